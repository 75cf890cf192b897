package pipeline

import (
	"fmt"
	"image"
	"image/color"
	"strings"
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
	sheet, err := renderHeatmaps(heatmapBase(img, img.Bounds()), 4, 4, []Overlay{{Label: "red", Map: m}})
	if err != nil {
		t.Fatal(err)
	}
	if w := sheet.Bounds().Dx(); w != 2*HeatmapPanel {
		t.Fatalf("sheet width %d", w)
	}
	// In the overlay panel, top-right must be bright (yellow) and bottom-left dark.
	x0 := HeatmapPanel
	tr := sheet.RGBAAt(x0+HeatmapPanel-10, heatmapLabel+10)
	bl := sheet.RGBAAt(x0+10, heatmapLabel+HeatmapPanel-10)
	if int(tr.R)+int(tr.G) <= int(bl.R)+int(bl.G)+100 {
		t.Fatalf("peak not shown: top-right %v, bottom-left %v", tr, bl)
	}
	if _, err := renderHeatmaps(heatmapBase(img, img.Bounds()), 4, 4, []Overlay{{Label: "x", Map: m[:3]}}); err == nil {
		t.Fatal("short map accepted")
	}
}

func TestRenderHeatmapsLayout(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 300, 200))
	for y := 0; y < 200; y++ {
		for x := 0; x < 300; x++ {
			img.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), 200, 255})
		}
	}
	base := heatmapBase(img, image.Rect(50, 0, 250, 200))
	if b := base.Bounds(); b != image.Rect(0, 0, HeatmapPanel, HeatmapPanel) {
		t.Fatalf("base panel %v", b)
	}
	const p, label = HeatmapPanel, heatmapLabel
	bg := color.RGBA{24, 24, 24, 255}
	for _, c := range []struct{ n, cols, rows int }{{1, 2, 1}, {5, 6, 1}, {6, 6, 2}, {7, 6, 2}} {
		overlays := make([]Overlay, c.n)
		for i := range overlays {
			m := make([]float32, 3*5)
			for j := range m {
				m[j] = float32(j % (i + 2))
			}
			overlays[i] = Overlay{Label: fmt.Sprintf("w%d", i), Map: m}
		}
		sheet, err := renderHeatmaps(base, 3, 5, overlays)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sheet.Bounds(), image.Rect(0, 0, c.cols*p, c.rows*(p+label)); got != want {
			t.Errorf("%d overlays: sheet %v, want %v", c.n, got, want)
			continue
		}
		panels := 0
		for slot := 0; slot < c.cols*c.rows; slot++ {
			x0, y0 := (slot%c.cols)*p, (slot/c.cols)*(p+label)
			inked, drawn := false, false
			for y := y0; y < y0+label; y++ {
				for x := x0; x < x0+p; x++ {
					inked = inked || sheet.RGBAAt(x, y) != bg
				}
			}
			for y := y0 + label; y < y0+label+p; y++ {
				for x := x0; x < x0+p; x++ {
					drawn = drawn || sheet.RGBAAt(x, y) != bg
				}
			}
			if inked != drawn {
				t.Errorf("%d overlays: slot %d labelled %v, drawn %v", c.n, slot, inked, drawn)
			}
			if drawn {
				panels++
			}
		}
		if panels != c.n+1 {
			t.Errorf("%d overlays: %d panels drawn, want %d", c.n, panels, c.n+1)
		}
		for y := 0; y < p; y++ {
			for x := 0; x < p; x++ {
				if got, want := sheet.RGBAAt(x, label+y), base.RGBAAt(x, y); got != want {
					t.Fatalf("%d overlays: base panel (%d,%d) is %v, HeatmapBase's %v", c.n, x, y, got, want)
				}
			}
		}
	}
}

func TestRenderHeatmapsBadInput(t *testing.T) {
	base := heatmapBase(image.NewRGBA(image.Rect(0, 0, 32, 32)), image.Rectangle{})
	good := Overlay{Label: "cat", Map: make([]float32, 4*4)}
	bad := Overlay{Label: "dog", Map: make([]float32, 15)}
	for _, c := range []struct {
		name         string
		gridH, gridW int
		overlays     []Overlay
	}{
		{"short map", 4, 4, []Overlay{good, bad}},
		{"long map", 2, 4, []Overlay{{Label: "dog", Map: make([]float32, 9)}}},
		{"zero rows", 0, 4, []Overlay{{Label: "dog"}}},
		{"zero columns", 4, 0, []Overlay{{Label: "dog"}}},
		{"negative grid", -4, -4, []Overlay{{Label: "dog", Map: make([]float32, 16)}}},
	} {
		_, err := renderHeatmaps(base, c.gridH, c.gridW, c.overlays)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "pipeline: ") || !strings.Contains(msg, `"dog"`) {
			t.Errorf("%s: error %q does not name the overlay", c.name, msg)
		}
	}
	if _, err := renderHeatmaps(base, 0, 0, nil); err == nil {
		t.Error("zero grid without overlays: no error")
	}
	if _, err := renderHeatmaps(image.NewRGBA(image.Rect(0, 0, 10, 10)), 4, 4, []Overlay{good}); err == nil {
		t.Error("small base panel: no error")
	}
}

func BenchmarkRenderHeatmaps(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 320, 240))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
		if i%4 == 3 {
			img.Pix[i] = 0xff // opaque, as a photo
		}
	}
	base := heatmapBase(img, img.Bounds())
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
		if _, err := renderHeatmaps(base, g, g, overlays); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHeatmapBase(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 640, 480))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
		if i%4 == 3 {
			img.Pix[i] = 0xff // opaque, as a photo
		}
	}
	crop := image.Rect(80, 0, 560, 480)
	b.ReportAllocs()
	for b.Loop() {
		heatmapBase(img, crop)
	}
}

// TestHeatmapBaseDropsAlpha: the first panel shows an image with alpha as
// the model saw it, its colours with the alpha dropped (as Pillow's
// convert("RGB")), not transparent nor darkened: a fully transparent red
// image is drawn opaque red, straight or paletted.
func TestHeatmapBaseDropsAlpha(t *testing.T) {
	straight := image.NewNRGBA(image.Rect(0, 0, 40, 30))
	for i := 0; i < len(straight.Pix); i += 4 {
		copy(straight.Pix[i:], []byte{200, 30, 10, 0})
	}
	pal := image.NewPaletted(image.Rect(0, 0, 40, 30), color.Palette{color.NRGBA{200, 30, 10, 0}})
	for name, img := range map[string]image.Image{"NRGBA": straight, "paletted": pal} {
		for _, base := range []*image.RGBA{heatmapBase(img, img.Bounds()), heatmapWholeBase(img)} {
			c := base.RGBAAt(base.Rect.Dx()/2, base.Rect.Dy()/2)
			if c.A != 0xff || c.R < 195 || c.G > 35 || c.B > 15 {
				t.Errorf("%s: the base panel's centre is %v, want opaque (200, 30, 10)", name, c)
			}
		}
	}
}
