package tensorio

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes a file through write into a temporary file in the
// same folder, syncs it and renames it over path, so that readers (and a
// process killed half-way) never see a partial file. The folder must exist.
func WriteFileAtomic(path string, write func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("tensorio: write %q: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return fmt.Errorf("tensorio: write %q: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("tensorio: write %q: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("tensorio: write %q: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("tensorio: sync %q: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("tensorio: close %q: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tensorio: rename into %q: %w", path, err)
	}
	return nil
}
