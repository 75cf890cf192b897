package batch

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/internal/objstore"
)

// storeSource is an input in an object store, walked as one object (an
// image, a video, or a .tar WebDataset shard read as a stream), or every
// image and video object under a prefix, in key order, listed a page at a time. A URL ending in "/" is a
// prefix; one that does not is an object if one of that key exists, and a
// prefix otherwise; one that names neither (no object of that key, nothing
// under it) is an InputError, as a missing path is, not an empty input.
// With several roots, each prefix adds its last element in front of its
// images' names, as a folder does.
type storeSource struct {
	name string // as given
	loc  objstore.Location
}

func (s storeSource) String() string { return s.name }

func (s storeSource) check() error { return nil }

func (s storeSource) walk(w *walker, single bool) error {
	root, l := s.name, s.loc
	if w.stores == nil {
		return &InputError{Path: root, Err: errors.New("object-store inputs need a store to read them")}
	}
	maybeObject := l.Key != "" && !strings.HasSuffix(l.Key, "/")
	if maybeObject {
		size, ok, err := w.stores.Stat(w.ctx, l)
		if err != nil {
			return &InputError{Path: root, Err: err}
		}
		if ok {
			base := l.Base()
			if isTarName(base) {
				return w.remoteTar(l, strings.TrimSuffix(base, path.Ext(base)))
			}
			return w.emit(Item{Path: l.String(), Rel: base, Obj: &l, Size: size})
		}
	}
	prefix := ""
	if !single {
		prefix = l.Base()
	}
	listed := 0
	err := w.stores.List(w.ctx, l, func(o objstore.Object) error {
		listed++
		name := strings.TrimPrefix(o.Key, l.Dir())
		base := path.Base(name)
		if !isInputName(base) {
			return nil
		}
		child := l
		child.Key = o.Key
		it := Item{Path: child.String(), Obj: &child, Size: o.Size}
		rel := path.Join(prefix, name)
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			it.Rel, it.Err = safeName(rel), fmt.Errorf("object key %q does not make a name inside the output; not read", o.Key)
			return w.emit(it)
		}
		it.Rel = rel
		return w.emit(it)
	})
	var se *objstore.Error
	if errors.As(err, &se) {
		return &InputError{Path: root, Err: err}
	}
	if err == nil && maybeObject && listed == 0 {
		// Also what a restarting server can answer for an object that
		// exists: stopping keeps it from going missing from the output.
		return &InputError{Path: root, Err: fmt.Errorf("not found: no object %q and nothing under %q", l.Key, l.Dir())}
	}
	return err
}

// remoteTar walks a WebDataset shard in a store, streaming it.
func (w *walker) remoteTar(l objstore.Location, rel string) error {
	if w.counting {
		return errUncounted
	}
	// The shard was found a moment ago: a store that cannot open it (after
	// its retries) stops the job, for --resume to read the shard again,
	// rather than the shard's samples going missing from the output.
	r, err := w.stores.OpenExisting(w.ctx, l)
	if err != nil {
		return &InputError{Path: l.String(), Err: fmt.Errorf("read tar shard: %w", err)}
	}
	defer r.Close()
	return w.tarStream(l.String(), r, rel)
}

// listObject is a list entry naming an object in a store.
func listObject(entry string) Item {
	l, err := objstore.Parse(entry)
	if err != nil {
		return Item{Path: entry, Rel: urlName(entry), Err: err}
	}
	return Item{Path: l.String(), Rel: urlName(l.String()), Obj: &l}
}

// IsStoreURL reports whether s names an object-store location (s3://,
// gs://, azblob://) that the job reads or writes.
func IsStoreURL(s string) bool { return objstore.IsURL(s) }

// maxObject bounds one image object read into memory.
const maxObject = maxMember
