package dedup_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/disintegration/imaging"
)

// photo draws a photo-like picture from rng, as
// scripts/bench_photos/make_photos.py draws them: a lit background (a
// gradient per channel at its own angle), out-of-focus shapes behind,
// sharp ones in front, and sensor-like noise.
func photo(rng *rand.Rand, w, h int) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	var ang, lo, hi [3]float64
	for c := range 3 {
		ang[c] = rng.Float64() * 2 * math.Pi
		lo[c], hi[c] = float64(rng.IntN(256)), float64(rng.IntN(256))
	}
	for y := range h {
		for x := range w {
			var px [3]uint8
			for c := range 3 {
				u := (float64(x)/float64(w)-0.5)*math.Cos(ang[c]) + (float64(y)/float64(h)-0.5)*math.Sin(ang[c]) + 0.5
				px[c] = uint8(math.Max(0, math.Min(255, lo[c]+(hi[c]-lo[c])*u)))
			}
			img.SetNRGBA(x, y, color.NRGBA{px[0], px[1], px[2], 255})
		}
	}
	shapes := func(n int) *image.NRGBA {
		over := image.NewNRGBA(img.Bounds())
		for range n {
			x0, y0 := rng.IntN(w+w/4)-w/4, rng.IntN(h+h/4)-h/4
			x1, y1 := x0+w/10+rng.IntN(w*2/5), y0+h/10+rng.IntN(h*2/5)
			c := color.NRGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(150 + rng.IntN(106))}
			ellipse := rng.IntN(2) == 0
			cx, cy, rx, ry := float64(x0+x1)/2, float64(y0+y1)/2, float64(x1-x0)/2, float64(y1-y0)/2
			for y := max(0, y0); y < min(h, y1); y++ {
				for x := max(0, x0); x < min(w, x1); x++ {
					if dx, dy := (float64(x)-cx)/rx, (float64(y)-cy)/ry; !ellipse || dx*dx+dy*dy <= 1 {
						over.SetNRGBA(x, y, c)
					}
				}
			}
		}
		return over
	}
	draw.Draw(img, img.Bounds(), imaging.Blur(shapes(6), 3+5*rng.Float64()), image.Point{}, draw.Over)
	draw.Draw(img, img.Bounds(), shapes(4), image.Point{}, draw.Over)
	for i := 0; i < len(img.Pix); i += 4 {
		for c := range 3 {
			v := float64(img.Pix[i+c]) + 6*rng.NormFloat64()
			img.Pix[i+c] = uint8(math.Max(0, math.Min(255, v)))
		}
	}
	return img
}

// encodeJPEG encodes img at quality q.
func encodeJPEG(t testing.TB, img image.Image, q int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// transforms are the near-duplicates planted: each makes a copy of a
// photo (its JPEG bytes and decoded image) as collections hold them.
var transforms = []struct {
	name string
	make func(t testing.TB, jpg []byte, img image.Image) []byte
}{
	{"copy", func(t testing.TB, jpg []byte, _ image.Image) []byte { return bytes.Clone(jpg) }},
	{"jpeg40", func(t testing.TB, _ []byte, img image.Image) []byte { return encodeJPEG(t, img, 40) }},
	{"half", func(t testing.TB, _ []byte, img image.Image) []byte {
		b := img.Bounds()
		return encodeJPEG(t, imaging.Resize(img, b.Dx()/2, b.Dy()/2, imaging.Lanczos), 88)
	}},
	{"bright5", func(t testing.TB, _ []byte, img image.Image) []byte {
		return encodeJPEG(t, imaging.AdjustBrightness(img, 5), 88)
	}},
	{"bright15", func(t testing.TB, _ []byte, img image.Image) []byte {
		return encodeJPEG(t, imaging.AdjustBrightness(img, 15), 88)
	}},
	{"crop80", func(t testing.TB, _ []byte, img image.Image) []byte {
		b := img.Bounds()
		return encodeJPEG(t, imaging.CropCenter(img, b.Dx()*4/5, b.Dy()*4/5), 88)
	}},
}

// plantedSet is a folder of photos: distinct ones "pNNN-0.jpg" and, for
// the first planted of them, one near-duplicate each
// "pNNN-1-<transform>.jpg" (the transforms in turn). Sorted by name, each
// original comes just before its copy.
type plantedSet struct {
	dir      string
	distinct int
	copies   map[string]string // copy's name → its original's
	kind     map[string]string // copy's name → its transform
}

func makePlanted(t testing.TB, dir string, distinct, planted int) *plantedSet {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &plantedSet{dir: dir, distinct: distinct, copies: map[string]string{}, kind: map[string]string{}}
	rng := rand.New(rand.NewPCG(20261207, 1))
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range distinct {
		w, h := 256, 192
		if i%3 == 2 {
			w, h = h, w
		}
		img := photo(rng, w, h)
		jpg := encodeJPEG(t, img, 88)
		orig := fmt.Sprintf("p%03d-0.jpg", i)
		write(orig, jpg)
		if i < planted {
			tr := transforms[i%len(transforms)]
			name := fmt.Sprintf("p%03d-1-%s.jpg", i, tr.name)
			write(name, tr.make(t, jpg, img))
			s.copies[name], s.kind[name] = orig, tr.name
		}
	}
	return s
}
