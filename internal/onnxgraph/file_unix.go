//go:build unix

package onnxgraph

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the file path read-only; unmap releases the mapping.
func mapFile(path string) (b []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := fi.Size()
	if size == 0 || size != int64(int(size)) || !fi.Mode().IsRegular() {
		return readFile(path)
	}
	b, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", path, err)
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
