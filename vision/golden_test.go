package vision

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// The golden data comes from testdata/images/generate.py: Pillow 9.4 decodes
// each image, ImageOps.exif_transpose + convert("RGB") gives .rgb.npy, and
// CLIPImageProcessor's steps reproduced in numpy give the pixel_values.
//
// Tolerances: lossless inputs ("exact") must match bit for bit, the uint8
// RGB and every float32 of pixel_values. JPEG inputs ("lossy") must too when
// Decode uses libjpeg-turbo (jpegExact(): found at run time, or linked with
// the libjpeg build tag), and without it for baseline and progressive
// files, which jpegdec decodes (jpegExactFile); files left to Go's
// image/jpeg (CMYK) cannot, as Go's IDCT is not libjpeg-turbo's, and the
// test logs the differences and bounds them in 8-bit levels
// (jpegMaxLevels, jpegMeanLevels).
const (
	goldenDir      = "../testdata/images"
	jpegMaxLevels  = 3
	jpegMeanLevels = 0.08
)

type goldenCase struct {
	Image       string `json:"image"`
	Name        string `json:"name"`
	PILMode     string `json:"pil_mode"`
	Kind        string `json:"kind"`
	Config      string `json:"config"`
	RGB         string `json:"rgb"`
	Shape       []int  `json:"shape"`
	PixelValues string `json:"pixel_values"`
	U8PNG       string `json:"u8_png"`
	LUT         string `json:"lut"`
}

func loadCases(t testing.TB) []goldenCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "cases.json"))
	if os.IsNotExist(err) {
		t.Fatalf("committed golden data missing (%v): testdata/images/generate.py makes it", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Cases) == 0 {
		t.Fatal("cases.json lists no cases")
	}
	return meta.Cases
}

func readNPY(t testing.TB, rel string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(goldenDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// diffStats counts the differences between two uint8 arrays.
type diffStats struct {
	n, differ int
	max       float64
	sum       float64
}

func (d *diffStats) add(a, b float64) {
	d.n++
	if a != b {
		d.differ++
	}
	e := math.Abs(a - b)
	d.sum += e
	d.max = max(d.max, e)
}

func (d diffStats) mean() float64 { return d.sum / float64(max(d.n, 1)) }

func (d diffStats) String() string {
	return fmt.Sprintf("%d of %d values differ, max %.3g levels, mean %.3g levels", d.differ, d.n, d.max, d.mean())
}

// jpegExactFile reports whether Decode gives the JPEG file at path (of
// goldenDir) Pillow's pixels: always with libjpeg-turbo, else when jpegdec
// decodes it (a baseline or progressive file).
func jpegExactFile(t testing.TB, path string) bool {
	if jpegExact() {
		return true
	}
	data, err := os.ReadFile(filepath.Join(goldenDir, path))
	if err != nil {
		t.Fatal(err)
	}
	img, err := decodeGoJPEG(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	return img != nil
}

// check bounds d for an input of kind; exact says a lossy (JPEG) input
// must be bit-identical too (jpegExactFile).
func (d diffStats) check(t *testing.T, kind string, exact bool, what string) {
	t.Helper()
	switch kind {
	case "exact":
		if d.differ != 0 {
			t.Errorf("%s: %v (want bit-identical)", what, d)
		}
	case "lossy":
		t.Logf("%s: %v (decoder %s)", what, d, JPEGDecoder())
		if exact {
			if d.differ != 0 {
				t.Errorf("%s: %v (want bit-identical with %s)", what, d, JPEGDecoder())
			}
			return
		}
		if d.max > jpegMaxLevels || d.mean() > jpegMeanLevels {
			t.Errorf("%s: %v (want max <= %d, mean <= %g levels)", what, d, jpegMaxLevels, jpegMeanLevels)
		}
	default:
		t.Fatalf("unknown kind %q", kind)
	}
}

func TestGoldenRGB(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range loadCases(t) {
		if c.RGB == "" || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			img, err := DecodeFile(filepath.Join(goldenDir, c.Image), DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := readNPY(t, c.RGB)
			rgb, w, h := toRGB(nil, img, nil)
			if len(want.Shape) != 3 || want.Shape[0] != h || want.Shape[1] != w || want.Shape[2] != 3 {
				t.Fatalf("decoded %dx%d (%T), want shape %v [H, W, 3] (PIL mode %s)", w, h, img, want.Shape, c.PILMode)
			}
			wd := want.Data.([]uint8)
			var d diffStats
			for i := range wd {
				d.add(float64(rgb[i]), float64(wd[i]))
			}
			d.check(t, c.Kind, c.Kind == "lossy" && jpegExactFile(t, c.Image), fmt.Sprintf("RGB of %s (PIL mode %s, Go %T)", c.Image, c.PILMode, img))
		})
	}
}

func TestGoldenPixelValues(t *testing.T) { eachImpl(t, testGoldenPixelValues) }

func testGoldenPixelValues(t *testing.T) {
	for _, c := range loadCases(t) {
		cfg := strings.TrimSuffix(filepath.Base(c.Config), ".json")
		t.Run(c.Name+"/"+cfg, func(t *testing.T) {
			p, err := LoadPreprocessorFile(filepath.Join(goldenDir, c.Config))
			if err != nil {
				t.Fatal(err)
			}
			img, err := DecodeFile(filepath.Join(goldenDir, c.Image), DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, h, w, err := p.Apply(img)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Shape) != 3 || c.Shape[0] != 3 || c.Shape[1] != h || c.Shape[2] != w {
				t.Fatalf("output %dx%d, want %v", h, w, c.Shape)
			}
			// One 8-bit level, per channel, in output units.
			var level [3]float64
			var lut [3][256]float32
			p.fillLUT(&lut)
			for ch := range 3 {
				level[ch] = math.Abs(float64(lut[ch][1]) - float64(lut[ch][0]))
			}
			var want []float32
			switch {
			case c.PixelValues != "":
				x := readNPY(t, c.PixelValues)
				want = x.Data.([]float32)
			case c.U8PNG != "":
				// pixel_values == lut[c][u8] (asserted by the generator).
				wl := readNPY(t, c.LUT).Data.([]float32)
				f, err := os.Open(filepath.Join(goldenDir, c.U8PNG))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				u8, err := png.Decode(f)
				if err != nil {
					t.Fatal(err)
				}
				m := u8.(*image.RGBA)
				want = make([]float32, 3*h*w)
				for ch := range 3 {
					for y := 0; y < h; y++ {
						for x := 0; x < w; x++ {
							want[(ch*h+y)*w+x] = wl[ch*256+int(m.Pix[y*m.Stride+4*x+ch])]
						}
					}
				}
			default:
				t.Fatal("case has no pixel_values")
			}
			if len(want) != len(got) {
				t.Fatalf("got %d values, want %d", len(got), len(want))
			}
			var d diffStats
			for i := range want {
				ch := i / (h * w)
				d.add(float64(got[i])/level[ch], float64(want[i])/level[ch])
			}
			d.check(t, c.Kind, c.Kind == "lossy" && jpegExactFile(t, c.Image), "pixel_values")
		})
	}
}
