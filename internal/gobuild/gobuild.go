// Package gobuild builds a program of another Go module once per machine
// into the user cache folder, for the test kits that run real servers
// (SeaweedFS, Weaviate): a small wrapper module requires the program's
// module, go mod tidy resolves it through the module proxy, and go build
// writes the binary, renamed into place when whole. Concurrent callers
// (several test binaries) wait for one build, serialised by a lock file.
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Wrapper is the module that builds one program.
type Wrapper struct {
	// Dir is the cache folder's name below <UserCacheDir>/condition/test
	// (a name and version: one folder a version).
	Dir string
	// Bin is the binary's file name in that folder.
	Bin string
	// GoMod is the wrapper's go.mod: its requirements (and any replace
	// directive the program's module needs).
	GoMod string
	// Package is the program's import path.
	Package string
}

// Cached returns the path of w's binary, building it when it is missing.
func Cached(ctx context.Context, w Wrapper) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "condition", "test", w.Dir)
	bin := filepath.Join(dir, w.Bin)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while we waited
	}
	src, err := os.MkdirTemp(dir, "wrap-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	files := map[string]string{
		"go.mod":   w.GoMod,
		"tools.go": "//go:build tools\n\npackage tools\n\nimport _ \"" + w.Package + "\"\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	tmp := bin + ".tmp"
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", tmp, w.Package}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return bin, os.Rename(tmp, bin)
}
