package pipeline

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"

	xdraw "golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// HeatmapPanel is the side of one square panel of a heatmap sheet, in pixels.
const HeatmapPanel = 224

// Overlay is one word's attention over the patch grid: Map holds
// [GridH*GridW] weights in row-major patch order.
type Overlay struct {
	Label      string
	Start, End int // the word's tokens, [Start, End) in the prompt's ids
	Map        []float32
}

// HeatmapBase scales the region of img the model saw (crop, in source
// coordinates; the whole image when crop is empty) to one HeatmapPanel ×
// HeatmapPanel panel. Make it once per image: every prompt's sheet draws on
// it, and it is all a job needs to keep of the decoded image.
func HeatmapBase(img image.Image, crop image.Rectangle) *image.RGBA {
	crop = crop.Intersect(img.Bounds())
	if crop.Empty() {
		crop = img.Bounds()
	}
	base := image.NewRGBA(image.Rect(0, 0, HeatmapPanel, HeatmapPanel))
	xdraw.CatmullRom.Scale(base, base.Bounds(), img, crop, xdraw.Src, nil)
	return base
}

// RenderHeatmaps draws a sheet: the base panel (HeatmapBase) and one panel
// per overlay, each the base with the word's map upsampled smoothly
// (bilinear) to the panel, coloured with viridis and blended, labelled with
// its word. gridH×gridW is the patch grid.
func RenderHeatmaps(base *image.RGBA, gridH, gridW int, overlays []Overlay) (*image.RGBA, error) {
	if b := base.Bounds(); b.Dx() != HeatmapPanel || b.Dy() != HeatmapPanel {
		return nil, fmt.Errorf("pipeline: heatmap: base panel is %v, want %d×%d", b, HeatmapPanel, HeatmapPanel)
	}
	if gridH <= 0 || gridW <= 0 {
		return nil, fmt.Errorf("pipeline: heatmap: patch grid %d×%d", gridH, gridW)
	}
	for _, o := range overlays {
		if len(o.Map) != gridH*gridW {
			return nil, fmt.Errorf("pipeline: heatmap %q: %d weights for a %d×%d grid", o.Label, len(o.Map), gridH, gridW)
		}
	}
	const p = HeatmapPanel
	const label = 18
	cols := len(overlays) + 1
	if cols > 6 {
		cols = 6
	}
	rows := (len(overlays) + 1 + cols - 1) / cols
	sheet := image.NewRGBA(image.Rect(0, 0, cols*p, rows*(p+label)))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(color.RGBA{24, 24, 24, 255}), image.Point{}, draw.Src)

	panel := func(i int) image.Rectangle {
		x, y := (i%cols)*p, (i/cols)*(p+label)
		return image.Rect(x, y+label, x+p, y+label+p)
	}
	r0 := panel(0)
	draw.Draw(sheet, r0, base, image.Point{}, draw.Src)
	drawLabel(sheet, r0.Min.X, r0.Min.Y-label, "image")

	up := make([]float32, p*p)
	for i, o := range overlays {
		r := panel(i + 1)
		upsample(up, p, o.Map, gridH, gridW)
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range up {
			lo, hi = min(lo, v), max(hi, v)
		}
		span := hi - lo
		if span <= 0 || math.IsNaN(float64(span)) {
			span = 1
		}
		for y := 0; y < p; y++ {
			for x := 0; x < p; x++ {
				t := (up[y*p+x] - lo) / span
				c := viridis(t)
				b := base.RGBAAt(x, y)
				// The map at 65% over the image in grey, so that the
				// colours read as the map, not as the picture.
				const a = 0.65
				g := (1 - a) * (0.299*float32(b.R) + 0.587*float32(b.G) + 0.114*float32(b.B))
				sheet.SetRGBA(r.Min.X+x, r.Min.Y+y, color.RGBA{
					R: uint8(a*float32(c.R) + g),
					G: uint8(a*float32(c.G) + g),
					B: uint8(a*float32(c.B) + g),
					A: 255,
				})
			}
		}
		drawLabel(sheet, r.Min.X, r.Min.Y-label, o.Label)
	}
	return sheet, nil
}

// upsample resizes a gh×gw map to n×n bilinearly, sampling at pixel centres
// (half-pixel offsets, edges clamped).
func upsample(dst []float32, n int, m []float32, gh, gw int) {
	for y := 0; y < n; y++ {
		fy := (float32(y)+0.5)*float32(gh)/float32(n) - 0.5
		y0 := int(math.Floor(float64(fy)))
		wy := fy - float32(y0)
		y1 := min(y0+1, gh-1)
		y0 = max(y0, 0)
		for x := 0; x < n; x++ {
			fx := (float32(x)+0.5)*float32(gw)/float32(n) - 0.5
			x0 := int(math.Floor(float64(fx)))
			wx := fx - float32(x0)
			x1 := min(x0+1, gw-1)
			x0 = max(x0, 0)
			top := m[y0*gw+x0]*(1-wx) + m[y0*gw+x1]*wx
			bot := m[y1*gw+x0]*(1-wx) + m[y1*gw+x1]*wx
			dst[y*n+x] = top*(1-wy) + bot*wy
		}
	}
}

func drawLabel(dst *image.RGBA, x, y int, s string) {
	const maxChars = HeatmapPanel/7 - 1
	if len(s) > maxChars {
		s = s[:maxChars-1] + "…"
	}
	d := font.Drawer{Dst: dst, Src: image.White, Face: basicfont.Face7x13,
		Dot: fixed.P(x+4, y+13)}
	d.DrawString(s)
}

// viridis maps t in [0, 1] to matplotlib's viridis colour map (perceptually
// uniform, readable in grey and by colour-blind readers) through a
// degree-6 polynomial fit of it per channel.
func viridis(t float32) color.RGBA {
	if !(t >= 0) {
		t = 0
	}
	if t > 1 {
		t = 1
	}
	x := float64(t)
	ch := func(c [7]float64) uint8 {
		v := c[0] + x*(c[1]+x*(c[2]+x*(c[3]+x*(c[4]+x*(c[5]+x*c[6])))))
		return uint8(math.Round(255 * math.Min(1, math.Max(0, v))))
	}
	return color.RGBA{
		R: ch([7]float64{0.2777273272234177, 0.1050930431085774, -0.3308618287255563, -4.634230498983486, 6.228269936347081, 4.776384997670288, -5.435455855934631}),
		G: ch([7]float64{0.005407344544966578, 1.404613529898575, 0.214847559468213, -5.799100973351585, 14.17993336680509, -13.74514537774601, 4.645852612178535}),
		B: ch([7]float64{0.3340998053353061, 1.384590162594685, 0.09509516302823659, -19.33244095627987, 56.69055260068105, -65.35303263337234, 26.3124352495832}),
		A: 255,
	}
}
