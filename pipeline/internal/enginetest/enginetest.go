// Package enginetest holds what the engine's and the batch job's tests
// share: the tiny test model and generated images.
package enginetest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
)

// TinyDir is the folder of the tiny CLIP test model (testdata/tinyclip).
func TinyDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "tinyclip")
}

// TinyModel loads ONNX Runtime (skipping the test where it cannot be) and
// opens the tiny test model.
func TinyModel(t testing.TB) *models.Model {
	t.Helper()
	orttest.Load(t)
	m, err := models.Open(TinyDir(), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MakeImages writes n small PNGs of varied colours into dir (names
// img-000.png …, every third in a sub-folder).
func MakeImages(t testing.TB, dir string, n int) {
	t.Helper()
	for i := range n {
		w, h := 20+i%17, 16+(i*7)%23
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.Set(x, y, color.RGBA{uint8(i * 37), uint8(x * 255 / w), uint8(y * 255 / h), 255})
			}
		}
		name := fmt.Sprintf("img-%03d.png", i)
		if i%3 == 0 {
			name = filepath.Join("sub", name)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// EncodeImage encodes a w×h gradient as PNG (format "png") or JPEG
// (quality 90).
func EncodeImage(t testing.TB, w, h int, format string) []byte {
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

// PanicMagic starts the files of a format whose decoder panics, registered
// with the standard library's image package as a third-party decoder would
// be.
const PanicMagic = "PANICKY!"

func init() {
	image.RegisterFormat("panicky", PanicMagic,
		func(r io.Reader) (image.Image, error) { panic("decoder bug") },
		func(r io.Reader) (image.Config, error) { panic("decoder bug in the header") })
}
