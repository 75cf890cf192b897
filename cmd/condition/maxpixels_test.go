package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hugePNG writes a PNG whose header says w×h pixels and which holds no
// pixels: a limit read from the header refuses it before decoding.
func hugePNG(t *testing.T, w, h uint32) string {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk("IHDR", ihdr)
	chunk("IEND", nil)
	p := filepath.Join(t.TempDir(), "huge.png")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPreprocessMaxPixels: --max-pixels 0 is Pillow's limit in preprocess
// as in run, -1 lifts the limit, and less is a usage error.
func TestPreprocessMaxPixels(t *testing.T) {
	img := hugePNG(t, 10000, 10000) // 10^8 pixels, over Pillow's 89478485
	out := filepath.Join(t.TempDir(), "x.npy")
	const limit = "over the limit of 89478485 pixels"
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		refused bool
	}{
		{"default", nil, exitFailed, true},
		{"0", []string{"--max-pixels", "0"}, exitFailed, true},
		{"-1", []string{"--max-pixels", "-1"}, exitFailed, false}, // read, then found to hold no pixels
		{"-2", []string{"--max-pixels", "-2"}, exitUsage, false},
	} {
		code, _, errs := preprocessCLI(t, append(append([]string{"--out", out}, c.args...), img)...)
		if code != c.code || strings.Contains(errs, limit) != c.refused {
			t.Errorf("--max-pixels %s: exit %d, %q; want exit %d, refused by the limit: %v", c.name, code, errs, c.code, c.refused)
		}
	}
	_, help, _ := preprocessCLI(t, "--help")
	if !strings.Contains(help, "0: Pillow's limit, 89478485") || !strings.Contains(help, "-1: no limit") {
		t.Errorf("preprocess --help does not say what 0 and -1 mean:\n%s", help)
	}
}

// TestAttendMaxPixelsHelp: attend's --max-pixels reads as preprocess's.
func TestAttendMaxPixelsHelp(t *testing.T) {
	_, help, _ := runCLI(t, "attend", "--help")
	if !strings.Contains(help, "0: Pillow's limit, 89478485") || !strings.Contains(help, "-1: no limit") {
		t.Errorf("attend --help does not say what 0 and -1 mean:\n%s", help)
	}
}
