package batch

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// isTarName reports whether name is a WebDataset shard the walk reads: a
// .tar file.
func isTarName(name string) bool { return strings.EqualFold(path.Ext(name), ".tar") }

// sample is one WebDataset sample being gathered: the members of one key.
type sample struct {
	key     string
	image   []byte
	ext     string
	member  string // the image's member name
	caption string
	txt     bool // caption is a .txt member's (which a .json's does not replace)
	err     error
	done    bool // its video member was decoded, its frames emitted
	// spool holds its video member, read ahead (see tarVideo), decoded by
	// the sample's flush once the key's other members are read.
	spool *video.Spooled
}

// tar walks a WebDataset shard (img2dataset's layout): members grouped by
// key (the member name up to the first dot of its base name), one image
// per key (the first member with an image extension), its caption from a
// .txt member or the "caption" field of a .json member. A key whose first
// image-or-video member is a video (see video.IsName) is decoded as it is
// read, into its frames' items, or read ahead when its caption may follow
// it (see tarVideo). Each sample is an
// Item named <rel>/<key>.<ext>, carrying its bytes (none when listing) and
// assigned to shards by rel, the tar shard. A member that cannot be read
// ends the shard with a failed item; a key that would leave the shard
// ("../x", "/x") is a failed item of its own.
func (w *walker) tar(p, rel string) error {
	f, err := os.Open(p)
	if err != nil {
		return w.emit(Item{Path: p, Rel: rel, Unit: rel, Err: fmt.Errorf("read tar shard: %w", err)})
	}
	defer f.Close()
	return w.tarStream(p, f, rel)
}

// tarStream walks the shard p read from r (see tar).
func (w *walker) tarStream(p string, r io.Reader, rel string) error {
	tail := &tailReader{r: r}
	tr := tar.NewReader(tail)
	var cur *sample
	defer func() {
		if cur != nil {
			cur.spool.Close()
		}
	}()
	flush := func() error {
		if cur == nil {
			return nil
		}
		s := cur
		cur = nil
		if s.spool != nil {
			return w.spooledVideo(p, rel, s)
		}
		if s.done {
			return nil
		}
		it := Item{Path: p, Unit: rel, Data: s.image, Caption: s.caption, Err: s.err, Member: true, MemberName: s.member}
		name, err := sampleName(rel, s.key, s.ext)
		if err != nil {
			it.Rel, it.Err = name, err
			return w.emit(it)
		}
		it.Rel = name
		if s.ext == "" && s.err == nil {
			return nil // a sample with no image (a caption alone, metadata)
		}
		return w.emit(it)
	}
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF && !tail.zeroBlock() {
			// archive/tar takes a stream that stops between two members
			// for the end; a whole shard ends with zero blocks.
			err = errors.New("no end-of-archive blocks: the shard was cut between two members")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if storeFailed(err) {
				return &InputError{Path: p, Err: err}
			}
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return w.emit(Item{Path: p, Rel: rel + "/" + truncatedName, Unit: rel, Member: true,
				Err: fmt.Errorf("tar shard %s is corrupt or truncated after its last whole member: %w", p, err)})
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(h.Name, "./")
		dir, base := path.Split(name)
		key, ext, _ := strings.Cut(base, ".")
		key = dir + key
		ext = strings.ToLower(ext)
		if cur != nil && cur.key != key {
			if err := flush(); err != nil {
				return err
			}
		}
		if cur == nil {
			cur = &sample{key: key}
		}
		switch {
		case vision.IsImageName("x."+ext) && cur.ext == "":
			cur.ext, cur.member = ext, h.Name
			if w.listOnly {
				continue
			}
			if cur.image, err = readMember(tr, h); err != nil {
				if storeFailed(err) {
					return &InputError{Path: p, Err: err}
				}
				cur.err = fmt.Errorf("tar member %s: %w", h.Name, err)
			}
		case video.IsName("x."+ext) && cur.ext == "":
			cur.ext, cur.member = ext, h.Name
			if err := w.tarVideo(p, rel, cur, tr, h.Size); err != nil {
				return err
			}
		case (ext == "txt" || ext == "json") && !w.listOnly:
			b, err := readMember(tr, h)
			if err != nil {
				continue // a caption that cannot be read leaves the image without one
			}
			if ext == "txt" {
				cur.caption, cur.txt = strings.TrimSpace(string(b)), true
			} else if cur.caption == "" {
				var meta struct {
					Caption string `json:"caption"`
				}
				if json.Unmarshal(b, &meta) == nil {
					cur.caption = strings.TrimSpace(meta.Caption)
				}
			}
		}
	}
	return flush()
}

// sampleName is the item name of a shard's sample of key whose image or
// video has extension ext ("" for none): rel/key.ext; or, for a key that
// would leave the shard ("../x", "/x"), a name in the shard and an error.
func sampleName(rel, key, ext string) (string, error) {
	clean := path.Clean(key)
	if path.IsAbs(key) || clean == ".." || strings.HasPrefix(clean, "../") {
		return rel + "/" + safeName(key), fmt.Errorf("tar member %q leaves the shard; not read", key)
	}
	if ext == "" {
		return rel + "/" + clean, nil
	}
	return rel + "/" + clean + "." + ext, nil
}

// tarVideo decodes the video member of sample s, which the shard's reader
// r is at (size bytes), and emits its frames. Streamed to ffmpeg as it is
// read, its frames' caption is the one read so far (a .txt or .json member
// before it in the shard). When the job makes prompts of captions
// (walkOptions.captions) and no .txt member of the key came before the
// video, the caption may follow it (webdataset shards order a key's
// members in any way; sorted, k.txt comes after k.mp4): the member is then
// read ahead, written to a temporary file (video.Spool, at most the spool
// limit; a larger member is streamed as above), and decoded by the
// sample's flush once the key's other members are read (spooledVideo).
// A walk that only lists, or a shard of another process, leaves it to
// the sample's flush, undecoded; so does a key that leaves the shard.
func (w *walker) tarVideo(p, rel string, s *sample, r io.Reader, size int64) error {
	if w.counting {
		return errUncounted
	}
	name, err := sampleName(rel, s.key, s.ext)
	it := Item{Path: p, Rel: name, Unit: rel, Caption: s.caption, Member: true, MemberName: s.member}
	if w.listOnly || err != nil || !w.decodes(it) {
		return nil
	}
	s.done = true
	if !w.captions || s.txt || size > w.videoOpts.SpoolLimit() {
		return w.streamVideo(it, r)
	}
	sp, err := video.Spool(w.ctx, r, p+"/"+s.member, w.videoOpts)
	if err != nil {
		if w.ctx.Err() != nil {
			return w.ctx.Err()
		}
		return w.decoded(it, func(func(video.Frame) error) error { return err })
	}
	s.spool = sp
	return nil
}

// spooledVideo decodes the video member of sample s that tarVideo read
// ahead, its frames with the caption of all the key's members, and
// removes its temporary file.
func (w *walker) spooledVideo(p, rel string, s *sample) error {
	defer s.spool.Close()
	name, _ := sampleName(rel, s.key, s.ext)
	it := Item{Path: p, Rel: name, Unit: rel, Caption: s.caption, Member: true, MemberName: s.member}
	return w.decoded(it, func(fn func(video.Frame) error) error {
		_, err := s.spool.Decode(w.ctx, fn)
		return err
	})
}

// storeFailed reports whether err is a store's read failing (after its
// retries) rather than the shard's bytes being wrong: the job then stops
// with it, for --resume to read the shard again, instead of recording the
// shard's remaining samples as failed.
func storeFailed(err error) bool {
	var se *objstore.Error
	return errors.As(err, &se)
}

// truncatedName names the failed item of a shard that ends in a broken
// member.
const truncatedName = "(truncated)"

// maxMember bounds one tar member read into memory.
const maxMember = 256 << 20

func readMember(tr *tar.Reader, h *tar.Header) ([]byte, error) {
	if h.Size > maxMember {
		return nil, fmt.Errorf("%d bytes, more than the %d a member may hold", h.Size, maxMember)
	}
	b := make([]byte, h.Size)
	if _, err := io.ReadFull(tr, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("cut short: %w", err)
		}
		return nil, err
	}
	return b, nil
}

// safeName makes a member name that leaves its shard into one path element
// for the manifest.
func safeName(s string) string {
	return strings.NewReplacer("/", "_", "\\", "_").Replace(strings.TrimLeft(s, "./"))
}

// tailReader reads r, keeping the last tar block (512 bytes) it read: after
// archive/tar's io.EOF, a whole archive's stream ends with a zero block (its
// end-of-archive marker), one cut between two members with a member's data.
type tailReader struct {
	r    io.Reader
	tail [512]byte
	n    int64 // bytes read
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n >= len(t.tail) {
		copy(t.tail[:], p[n-len(t.tail):n])
	} else if n > 0 {
		copy(t.tail[:], t.tail[n:])
		copy(t.tail[len(t.tail)-n:], p[:n])
	}
	t.n += int64(n)
	return n, err
}

// zeroBlock reports whether the last block read is all zeros.
func (t *tailReader) zeroBlock() bool {
	if t.n < int64(len(t.tail)) {
		return false
	}
	for _, b := range t.tail {
		if b != 0 {
			return false
		}
	}
	return true
}
