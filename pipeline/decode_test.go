package pipeline

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/vision"
)

func encodeTestImage(t *testing.T, w, h int, format string) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x + y) % 256), 255})
		}
	}
	var buf bytes.Buffer
	var err error
	if format == "png" {
		err = png.Encode(&buf, img)
	} else {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecodeModes checks what each Options.Decode asks of the decoder on
// the tiny model (resized to a 32-pixel shortest edge): a 288×160 JPEG is
// decoded whole (exact), at 1/2 (fast: sides ≥ 64) or 1/4 (fastest: sides
// ≥ 32) in builds that scale JPEGs, PNGs always whole; and a build that
// cannot scale refuses the fast modes when the engine opens, naming the
// build tag.
func TestDecodeModes(t *testing.T) {
	m := openTiny(t)
	jpg := encodeTestImage(t, 288, 160, "jpeg")
	pngData := encodeTestImage(t, 288, 160, "png")
	for _, tc := range []struct {
		mode  DecodeMode
		draft int
		jpeg  image.Rectangle
	}{
		{"", 0, image.Rect(0, 0, 288, 160)},
		{DecodeExact, 0, image.Rect(0, 0, 288, 160)},
		{DecodeFast, 64, image.Rect(0, 0, 144, 80)},
		{DecodeFastest, 32, image.Rect(0, 0, 72, 40)},
	} {
		eng, err := New(context.Background(), m, Options{Decode: tc.mode})
		if tc.draft > 0 && !vision.CanDraft {
			if err == nil || !strings.Contains(err.Error(), "-tags libjpeg") {
				t.Errorf("%s in a build without scaled JPEG decoding: %v, want an error naming -tags libjpeg", tc.mode, err)
			}
			if eng != nil {
				eng.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if eng.JPEGDraft() != tc.draft {
			t.Errorf("%s: draft %d, want %d", tc.mode, eng.JPEGDraft(), tc.draft)
		}
		img, err := eng.DecodeImage(jpg)
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds() != tc.jpeg {
			t.Errorf("%s: JPEG decoded to %v, want %v", tc.mode, img.Bounds(), tc.jpeg)
		}
		if img, err = eng.DecodeImage(pngData); err != nil || img.Bounds() != image.Rect(0, 0, 288, 160) {
			t.Errorf("%s: PNG decoded to %v (%v), want it whole", tc.mode, img.Bounds(), err)
		}
		eng.Close()
	}
	if _, err := New(context.Background(), m, Options{Decode: "quick"}); err == nil || !strings.Contains(err.Error(), `"quick"`) {
		t.Errorf("an unknown mode: %v", err)
	}
}

// TestDecodeModeInSettings checks that a job decoding JPEGs scaled records
// it and does not count as the exact job's images for --resume: the same
// inputs give another settings hash and the draft side in the metadata.
func TestDecodeModeInSettings(t *testing.T) {
	if !vision.CanDraft {
		t.Skip("this build decodes JPEGs with Go's image/jpeg, which cannot scale them (the libjpeg build runs this: go test -tags libjpeg)")
	}
	m := openTiny(t)
	in := t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "a.jpg"), encodeTestImage(t, 288, 160, "jpeg"), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := map[DecodeMode]string{}
	for _, mode := range []DecodeMode{DecodeExact, DecodeFast} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, Options{Decode: mode}), Inputs: []string{in},
			Prompts: []string{"red"}, Out: out, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		es := readManifest(t, sum.Manifest)
		if len(es) != 1 || es[0].Status != StatusOK {
			t.Fatalf("%s: manifest %+v", mode, es)
		}
		settings[mode] = es[0].Settings
		if es[0].Width != 288 || es[0].Height != 160 {
			t.Errorf("%s: the manifest says %dx%d, want the full 288x160", mode, es[0].Width, es[0].Height)
		}
	}
	if settings[DecodeExact] == settings[DecodeFast] {
		t.Errorf("exact and fast decoding share the settings hash %s: --resume would take one's images for the other's", settings[DecodeFast])
	}
}

// TestFullRegion maps a crop of a decode scaled by 4 back to the full
// image: multiplied, and cut where the last block ran past the border.
func TestFullRegion(t *testing.T) {
	info := vision.Info{Width: 289, Height: 161, Scale: 4}
	for _, tc := range []struct{ in, want image.Rectangle }{
		{image.Rect(0, 0, 73, 41), image.Rect(0, 0, 289, 161)},
		{image.Rect(16, 0, 57, 41), image.Rect(64, 0, 228, 161)},
		{image.Rect(2, 3, 5, 7), image.Rect(8, 12, 20, 28)},
	} {
		if got := FullRegion(tc.in, info); got != tc.want {
			t.Errorf("FullRegion(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if r := image.Rect(1, 2, 3, 4); FullRegion(r, vision.Info{Width: 9, Height: 9, Scale: 1}) != r {
		t.Error("scale 1 changed the region")
	}
}
