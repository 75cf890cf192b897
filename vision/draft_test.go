package vision

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// The draft fixtures come from testdata/images/draft.py: Pillow 9.4 opens
// each JPEG, draft("RGB", (d, d)) picks a DCT scale, and exif_transpose +
// convert("RGB") of what it loads is stored as a lossless PNG.
const draftDir = "../testdata/images/draft"

type draftCase struct {
	Image  string `json:"image"`
	Draft  int    `json:"draft"`
	Full   [2]int `json:"full"`
	Scale  int    `json:"scale"`
	Size   [2]int `json:"size"`
	RGBPNG string `json:"rgb_png"`
}

func loadDraftCases(t *testing.T) []draftCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(draftDir, "cases.json"))
	if err != nil {
		t.Fatalf("committed draft fixtures missing (%v): testdata/images/draft.py makes them", err)
	}
	var meta struct {
		Cases []draftCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Cases) == 0 {
		t.Fatal("draft/cases.json lists no cases")
	}
	return meta.Cases
}

// TestDraftScaleIsPillows checks draftScale against the scale Pillow's
// draft chose for every fixture (stored sides, before any EXIF turn).
func TestDraftScaleIsPillows(t *testing.T) {
	for _, c := range loadDraftCases(t) {
		if got := draftScale(c.Full[0], c.Full[1], c.Draft); got != c.Scale {
			t.Errorf("%s, draft %d: scale %d, Pillow chose %d", c.Image, c.Draft, got, c.Scale)
		}
	}
	for _, tc := range []struct{ w, h, d, want int }{
		{100, 100, 0, 1}, {100, 100, -5, 1}, {100, 100, 200, 1}, {100, 100, 100, 1},
		{199, 400, 100, 1}, {200, 400, 100, 2}, {800, 800, 100, 8}, {5000, 5000, 100, 8},
		{700, 700, 100, 4}, {300, 1000, 100, 2},
	} {
		if got := draftScale(tc.w, tc.h, tc.d); got != tc.want {
			t.Errorf("draftScale(%d, %d, %d) = %d, want %d", tc.w, tc.h, tc.d, got, tc.want)
		}
	}
}

// TestDraftIsPillows decodes every fixture with DecodeOptions.Draft: where
// the build scales JPEGs (CanDraft) the RGB is Pillow's after draft bit for
// bit, size included; elsewhere the image comes at full size.
func TestDraftIsPillows(t *testing.T) {
	for _, c := range loadDraftCases(t) {
		t.Run(fmt.Sprintf("%s/d%d", filepath.Base(c.Image), c.Draft), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(draftDir, c.Image))
			if err != nil {
				t.Fatal(err)
			}
			img, info, err := DecodeInfo(data, DecodeOptions{Draft: c.Draft})
			if err != nil {
				t.Fatal(err)
			}
			// The full size, upright: the stored sides turned when the
			// draft's RGB came out turned.
			fw, fh := c.Full[0], c.Full[1]
			if (c.Size[0] < c.Size[1]) != (fw < fh) {
				fw, fh = fh, fw
			}
			wantScale := c.Scale
			if !CanDraft() {
				wantScale = 1
			}
			if info.Width != fw || info.Height != fh || info.Scale != wantScale || info.Format != "jpeg" {
				t.Errorf("info %+v, want jpeg %dx%d at scale %d", info, fw, fh, wantScale)
			}
			rgb, w, h := toRGB(nil, img, nil)
			if !CanDraft() {
				full, err := DecodeFile(filepath.Join(draftDir, c.Image), DecodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if img.Bounds() != full.Bounds() {
					t.Errorf("without libjpeg, draft gave %v, the full decode %v", img.Bounds(), full.Bounds())
				}
				return
			}
			if w != c.Size[0] || h != c.Size[1] {
				t.Fatalf("drafted to %dx%d, Pillow to %dx%d", w, h, c.Size[0], c.Size[1])
			}
			f, err := os.Open(filepath.Join(draftDir, c.RGBPNG))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			g, err := png.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := g.(*image.RGBA)
			if !ok {
				t.Fatalf("golden %s decoded as %T", c.RGBPNG, g)
			}
			var d diffStats
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					for ch := range 3 {
						d.add(float64(rgb[(y*w+x)*3+ch]), float64(m.Pix[y*m.Stride+4*x+ch]))
					}
				}
			}
			if d.differ != 0 {
				t.Errorf("RGB after draft: %v (want bit-identical with Pillow)", d)
			}
		})
	}
}
