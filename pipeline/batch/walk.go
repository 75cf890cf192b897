package batch

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// Item is one input image: its path on disk and the slash-separated path
// relative to its input, which names its outputs and, unless Unit is set,
// picks its shard.
type Item struct {
	Path string // path to open (for a tar member, its shard)
	Rel  string // clean, slash-separated, local (never starts with .. or /)
	// Unit, when set, is what sharding assigns instead of Rel: a tar
	// member goes with its shard.
	Unit string
	// Member marks a sample of a tar shard; Data holds its image's bytes
	// (nil when the walk only lists), Caption its caption, if any, and
	// MemberName the name of its image's member, as the shard has it.
	Member     bool
	Data       []byte
	Caption    string
	MemberName string
	// Err is why the walk could not read this item (a broken tar member):
	// the job records it as the item's failure.
	Err error
	// Obj, when set, is the object-store location to read instead of Path
	// (then the object's URL, without its options), and Size its size in
	// bytes when the listing gave it.
	Obj  *objstore.Location
	Size int64
	// Video, for a frame of a video, is the video's relative path, Time
	// the frame's presentation time in seconds, and Frame its pixels
	// (until the job takes them); see video.go.
	Video string
	Time  float64
	Frame *image.RGBA
}

// ShardKey returns what sharding assigns: Unit, or Rel.
func (it Item) ShardKey() string {
	if it.Unit != "" {
		return it.Unit
	}
	return it.Rel
}

// Walk calls fn for every image under roots, in a stable order: roots in the
// order given, each folder's entries sorted by name. A root that is a .tar
// file is a WebDataset shard: each sample is an Item (see isTarName). Symbolic links to files
// and folders are followed; a folder reached twice (a link loop, or two
// links to one folder) is walked once. With a single folder root, Rel is
// relative to it; otherwise each root adds its base name in front, so that
// two inputs cannot name the same output. Unreadable folders are reported
// through onErr (and skipped) unless it returns an error, which stops the
// walk. fn's error stops the walk.
func Walk(ctx context.Context, roots []string, fn func(Item) error, onErr func(path string, err error) error) error {
	return walkExcept(ctx, roots, nil, fn, onErr)
}

// List is Walk without reading the inputs: a video is one item, named as
// its file, not decoded into frames, and a tar shard's samples carry no
// bytes.
func List(ctx context.Context, roots []string, fn func(Item) error, onErr func(path string, err error) error) error {
	if onErr == nil {
		onErr = func(_ string, err error) error { return err }
	}
	sources, err := resolveInputs(roots)
	if err != nil {
		return err
	}
	return walk(ctx, sources, nil, walkOptions{listOnly: true}, fn, onErr)
}

// walkExcept is Walk leaving out the folders skip (and all below them),
// matched by identity, not by name: a job's output folder inside one of its
// inputs is never an input.
func walkExcept(ctx context.Context, roots, skip []string, fn func(Item) error, onErr func(path string, err error) error) error {
	if onErr == nil {
		onErr = func(_ string, err error) error { return err }
	}
	sources, err := resolveInputs(roots)
	if err != nil {
		return err
	}
	return walk(ctx, sources, nil, walkOptions{skip: skip}, fn, onErr)
}

// walkOptions are how a walk goes.
type walkOptions struct {
	skip     []string              // folders left out (see walkExcept)
	listOnly bool                  // tar members' bytes are not read
	stores   *objstore.Stores      // opens object-store roots and list entries
	counting bool                  // a count ahead: a tar shard in a store, which would be read whole, ends the walk with errUncounted
	video    video.Options         // how videos are sampled
	captions bool                  // the job makes prompts of tar samples' captions: a video member waits for its key's caption
	takes    func(key string) bool // the shard's items, when set: videos of other shards are not decoded
}

// errUncounted ends a counting walk that would have to read a remote tar
// shard to count its samples.
var errUncounted = errors.New("batch: a tar shard in an object store is not read ahead to count its samples")

// walk is walkExcept over resolved roots, then the entries of the list
// files lists.
func walk(ctx context.Context, roots []source, lists []string, o walkOptions, fn func(Item) error, onErr func(path string, err error) error) error {
	if onErr == nil {
		onErr = func(_ string, err error) error { return err }
	}
	w := &walker{ctx: ctx, fn: fn, onErr: onErr, seen: map[fileID]bool{}, listOnly: o.listOnly, stores: o.stores, counting: o.counting,
		videoOpts: o.video, captions: o.captions, takes: o.takes}
	for _, s := range o.skip {
		if st, err := os.Stat(s); err == nil && st.IsDir() {
			if id, ok := idOf(st); ok {
				w.seen[id] = true // as if walked already
			}
		}
	}
	single := len(roots) == 1
	for _, root := range roots {
		if err := root.walk(w, single); err != nil {
			return err
		}
	}
	for _, l := range lists {
		if err := w.list(l); err != nil {
			return err
		}
	}
	return nil
}

// source is one input of a job, resolved once (see resolveInputs): a local
// path (localSource) or an object-store location (storeSource).
type source interface {
	// String names the input as given.
	String() string
	// check makes sure, before any work, that the input exists, where that
	// costs nothing (an object-store input is found by its walk).
	check() error
	// walk walks the input, one of several unless single.
	walk(w *walker, single bool) error
}

// resolveInputs resolves each input once: an object-store URL (s3://,
// gs://, azblob://), or a local path.
func resolveInputs(inputs []string) ([]source, error) {
	out := make([]source, len(inputs))
	for i, in := range inputs {
		if !objstore.IsURL(in) {
			out[i] = localSource(in)
			continue
		}
		l, err := objstore.Parse(in)
		if err != nil {
			return nil, &InputError{Path: in, Err: err}
		}
		out[i] = storeSource{name: in, loc: l}
	}
	return out, nil
}

// localSource is an input on a local file system: a folder, an image or a
// .tar shard.
type localSource string

func (s localSource) String() string { return string(s) }

func (s localSource) check() error {
	if _, err := os.Stat(string(s)); err != nil {
		return &InputError{Path: string(s), Err: err}
	}
	return nil
}

func (s localSource) walk(w *walker, single bool) error {
	root := string(s)
	st, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("batch: input %q: %w", root, err)
	}
	if !st.IsDir() {
		base := filepath.Base(root)
		if isTarName(base) {
			return w.tar(root, strings.TrimSuffix(base, filepath.Ext(base)))
		}
		return w.emit(Item{Path: root, Rel: filepath.ToSlash(base)})
	}
	prefix := ""
	if !single {
		prefix = filepath.Base(filepath.Clean(root))
		if prefix == "." || prefix == "/" || prefix == ".." {
			abs, _ := filepath.Abs(root)
			prefix = filepath.Base(abs)
		}
	}
	return w.dir(root, prefix, st)
}

type fileID struct{ dev, ino uint64 }

type walker struct {
	ctx       context.Context
	fn        func(Item) error
	onErr     func(string, error) error
	seen      map[fileID]bool
	listOnly  bool // do not read tar members' bytes
	stores    *objstore.Stores
	counting  bool
	videoOpts video.Options
	captions  bool
	takes     func(string) bool
}

func (w *walker) emit(it Item) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if isVideoItem(it) {
		return w.video(it)
	}
	return w.fn(it)
}

// isInputName reports whether a folder's entry named name is an input: an
// image or a video, not hidden.
func isInputName(name string) bool {
	return (vision.IsImageName(name) || video.IsName(name)) && !strings.HasPrefix(name, ".")
}

func idOf(st fs.FileInfo) (fileID, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fileID{uint64(s.Dev), uint64(s.Ino)}, true
	}
	return fileID{}, false
}

func (w *walker) dir(dir, rel string, st fs.FileInfo) error {
	if id, ok := idOf(st); ok {
		if w.seen[id] {
			return nil
		}
		w.seen[id] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return w.onErr(dir, fmt.Errorf("batch: read folder %q: %w", dir, err))
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, e.Name())
		r := path.Join(rel, e.Name())
		mode := e.Type()
		if mode&fs.ModeSymlink != 0 {
			st, err := os.Stat(p)
			if err != nil {
				// A broken link named like an image is an input that
				// cannot be read: the job records it as a failure.
				if isInputName(e.Name()) {
					if err := w.emit(Item{Path: p, Rel: r}); err != nil {
						return err
					}
				}
				continue
			}
			if st.IsDir() {
				if err := w.dir(p, r, st); err != nil {
					return err
				}
				continue
			}
			mode = st.Mode().Type()
		}
		switch {
		case mode.IsDir():
			st, err := e.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return w.onErr(p, fmt.Errorf("batch: %w", err))
			}
			if err := w.dir(p, r, st); err != nil {
				return err
			}
		case mode.IsRegular() && isInputName(e.Name()):
			if err := w.emit(Item{Path: p, Rel: r}); err != nil {
				return err
			}
		}
	}
	return nil
}
