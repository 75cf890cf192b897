package batch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// outFolder is a job's output folder. Every path is resolved inside it through
// an os.Root, so no file name (say ../../x.jpg) and no symbolic link planted
// in the folder can make a write land outside it. Writes are atomic.
type outFolder struct {
	root *os.Root
	dir  string
	made sync.Map // sub-folders already created, so a write does not repeat MkdirAll
}

// openOutFolder creates dir if needed and opens it.
func openOutFolder(dir string) (*outFolder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("batch: output folder: %w", err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("batch: output folder: %w", err)
	}
	return &outFolder{root: r, dir: dir}, nil
}

// Remove removes the file rel; a file already gone is not an error.
func (o *outFolder) Remove(rel string) error {
	rel, err := checkRel(rel)
	if err != nil {
		return err
	}
	if err := o.root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("batch: output folder: %w", err)
	}
	return nil
}

// Dir returns the folder's path as given.
func (o *outFolder) Dir() string { return o.dir }

// Close releases the folder. It is safe to call more than once.
func (o *outFolder) Close() error {
	if o == nil || o.root == nil {
		return nil
	}
	err := o.root.Close()
	o.root = nil
	return err
}

// checkRel rejects names that are not local slash-separated paths.
func checkRel(rel string) (string, error) {
	clean := path.Clean(rel)
	if rel == "" || !filepath.IsLocal(filepath.FromSlash(clean)) || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("batch: output name %q is not inside the output folder", rel)
	}
	return filepath.FromSlash(clean), nil
}

// WriteFile writes data to rel (slash-separated, inside the folder)
// atomically: a temporary file beside it, then renamed over rel, so that a
// killed process leaves either the old file or the new one, never part of
// one. The file is not fsynced (that costs milliseconds per image): a crash
// of the whole machine may lose recent outputs, which --resume redoes since
// the manifest is synced only at the end of the job.
func (o *outFolder) WriteFile(rel string, data []byte) error {
	name, err := checkRel(rel)
	if err != nil {
		return err
	}
	if d := filepath.Dir(name); d != "." {
		if _, ok := o.made.Load(d); !ok {
			if err := o.root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("batch: output folder for %q: %w", rel, err)
			}
			o.made.Store(d, true)
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := o.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("batch: write %q: %w", rel, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = o.root.Rename(tmp, name)
	}
	if err != nil {
		o.root.Remove(tmp)
		return fmt.Errorf("batch: write %q: %w", rel, err)
	}
	return nil
}

// Exists reports whether rel is a regular file in the folder.
func (o *outFolder) Exists(rel string) bool {
	name, err := checkRel(rel)
	if err != nil {
		return false
	}
	st, err := o.root.Stat(name)
	return err == nil && st.Mode().IsRegular()
}

// OpenAppend opens rel for appending, creating it if needed (truncating it
// first when truncate is set).
func (o *outFolder) OpenAppend(rel string, truncate bool) (*os.File, error) {
	name, err := checkRel(rel)
	if err != nil {
		return nil, err
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if truncate {
		flag |= os.O_TRUNC
	}
	f, err := o.root.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("batch: open %q: %w", rel, err)
	}
	return f, nil
}

// ReadFile reads rel from the folder.
func (o *outFolder) ReadFile(rel string) ([]byte, error) {
	name, err := checkRel(rel)
	if err != nil {
		return nil, err
	}
	return o.root.ReadFile(name)
}

// Truncate cuts rel to size bytes.
func (o *outFolder) Truncate(rel string, size int64) error {
	name, err := checkRel(rel)
	if err != nil {
		return err
	}
	f, err := o.root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

// CleanTemps removes temporary files left by a killed process (names
// starting with "." and holding ".tmp-") anywhere in the folder.
func (o *outFolder) CleanTemps() error {
	return fsWalkRemove(o.root, ".")
}

func fsWalkRemove(r *os.Root, dir string) error {
	f, err := r.Open(dir)
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if err := fsWalkRemove(r, p); err != nil {
				return err
			}
		case e.Type().IsRegular() && strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".tmp-"):
			if err := r.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}
