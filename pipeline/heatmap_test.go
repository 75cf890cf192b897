package pipeline

import (
	"image"
	"image/color"
	"testing"
)

func TestViridisAnchors(t *testing.T) {
	// matplotlib's viridis at 0, 0.25, 0.5, 0.75 and 1 (#440154, #3b528b,
	// #21918c, #5ec962, #fde725).
	for _, c := range []struct {
		t    float32
		want color.RGBA
	}{{0, color.RGBA{0x44, 0x01, 0x54, 255}}, {0.25, color.RGBA{0x3b, 0x52, 0x8b, 255}}, {0.5, color.RGBA{0x21, 0x91, 0x8c, 255}}, {0.75, color.RGBA{0x5e, 0xc9, 0x62, 255}}, {1, color.RGBA{0xfd, 0xe7, 0x25, 255}}} {
		got := viridis(c.t)
		d := func(a, b uint8) int {
			if a > b {
				return int(a - b)
			}
			return int(b - a)
		}
		if d(got.R, c.want.R) > 6 || d(got.G, c.want.G) > 6 || d(got.B, c.want.B) > 6 {
			t.Errorf("viridis(%v) = %v, want about %v", c.t, got, c.want)
		}
	}
}

func TestRenderHeatmapsPeakWhereTheMapPeaks(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	m := make([]float32, 4*4)
	m[0*4+3] = 1 // top-right patch
	sheet, err := RenderHeatmaps(HeatmapBase(img, img.Bounds()), 4, 4, []Overlay{{Label: "red", Map: m}})
	if err != nil {
		t.Fatal(err)
	}
	if w := sheet.Bounds().Dx(); w != 2*HeatmapPanel {
		t.Fatalf("sheet width %d", w)
	}
	// In the overlay panel, top-right must be bright (yellow) and bottom-left dark.
	x0 := HeatmapPanel
	tr := sheet.RGBAAt(x0+HeatmapPanel-10, 18+10)
	bl := sheet.RGBAAt(x0+10, 18+HeatmapPanel-10)
	if int(tr.R)+int(tr.G) <= int(bl.R)+int(bl.G)+100 {
		t.Fatalf("peak not shown: top-right %v, bottom-left %v", tr, bl)
	}
	if _, err := RenderHeatmaps(HeatmapBase(img, img.Bounds()), 4, 4, []Overlay{{Label: "x", Map: m[:3]}}); err == nil {
		t.Fatal("short map accepted")
	}
}

func BenchmarkRenderHeatmaps(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 320, 240))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	base := HeatmapBase(img, img.Bounds())
	const g = 8
	overlays := make([]Overlay, 3)
	for i := range overlays {
		m := make([]float32, g*g)
		for j := range m {
			m[j] = float32((j*(i+3))%17) / 17
		}
		overlays[i] = Overlay{Label: "word", Map: m}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderHeatmaps(base, g, g, overlays); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHeatmapBase(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 640, 480))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	crop := image.Rect(80, 0, 560, 480)
	b.ReportAllocs()
	for b.Loop() {
		HeatmapBase(img, crop)
	}
}
