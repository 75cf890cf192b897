package main

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestRunVideoSpoolLimit: --video-spool-limit bounds the temporary file an
// MP4 whose header follows its data (ffmpeg's default) is written to when
// it is read from a tar shard: the default takes it (3 frames); a limit
// under its size, and 0, make it a failed entry whose error says why and
// names -movflags +faststart; a size that is not one is a usage error
// naming the flag.
func TestRunVideoSpoolLimit(t *testing.T) {
	videotest.Need(t)
	dir := t.TempDir()
	v := videotest.Make(t, dir, "v.mp4", videotest.Frames(30, 64, 48), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	b, err := os.ReadFile(v)
	if err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(dir, "sh.tar")
	f, err := os.Create(shard)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	tw.WriteHeader(&tar.Header{Name: "k.mp4", Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
	tw.Write(b)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		limit  string
		code   int
		frames int
		want   string // in the manifest's error, or stderr for a usage error
	}{
		{"", 0, 3, ""},
		{"1KiB", 1, 0, "only up to 1024 bytes"},
		{"0", 1, 0, "spooling it to a temporary file is off; write it with ffmpeg -movflags +faststart"},
		{"lots", exitUsage, 0, `--video-spool-limit "lots": want a size in bytes`},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := []string{"run", "--images", shard, "--out", out, "-p", "x", "--quiet"}
		if c.limit != "" {
			args = append(args, "--video-spool-limit", c.limit)
		}
		code, _, errs := runCLI(t, args...)
		if code != c.code {
			t.Fatalf("--video-spool-limit %q: exit %d, want %d: %s", c.limit, code, c.code, errs)
		}
		if c.code == exitUsage {
			if !strings.Contains(errs, c.want) {
				t.Errorf("--video-spool-limit %q: %s; want %q", c.limit, errs, c.want)
			}
			continue
		}
		m := string(manifestBytes(t, out))
		if n := strings.Count(m, `"status":"ok"`); n != c.frames || !strings.Contains(m, c.want) {
			t.Errorf("--video-spool-limit %q: %d frames, want %d and %q in the manifest:\n%s", c.limit, n, c.frames, c.want, m)
		}
	}
}
