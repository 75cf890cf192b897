//go:build !unix

package hub

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// lockFile creates the lock file but does not lock it: on systems without
// flock, two processes fetching the same blob at once are not kept apart
// (each writes its own .incomplete through O_APPEND and the last rename wins).
func lockFile(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("hub: lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hub: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
