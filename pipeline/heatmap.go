package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"

	"github.com/disintegration/imaging"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// HeatmapPanel is the side of one square panel of a heatmap sheet, in pixels.
const HeatmapPanel = 224

const (
	heatmapLabel   = 30   // height of the strip above a panel that holds its label
	heatmapCols    = 6    // most panels in one row of a sheet
	heatmapOpacity = 0.65 // the map's weight over the image in grey
)

// heatmapBackground is the colour of a sheet around and between its panels.
var heatmapBackground = color.RGBA{24, 24, 24, 255}

// Overlay is one word's map over the patch grid: Map holds [GridH*GridW]
// values in row-major patch order.
type Overlay struct {
	Label      string
	Start, End int // the word's tokens, [Start, End) in the prompt's ids
	Map        []float32
	// Lo and Hi, when Hi > Lo, are the fixed values the colour scale runs
	// between, so that panels compare across words and images (a word
	// absent from the image is drawn dimmer); otherwise each map is
	// stretched over its own range and shows only where, not how much.
	Lo, Hi float32
	// Peak is the largest value of Map, printed in the label of a fixed
	// scale.
	Peak float32
	// GridH and GridW are the patch grid's rows and columns.
	GridH, GridW int
}

// PeakCell returns the row and column of the patch where Map is largest
// (the first, in row-major order, of equal values).
func (o *Overlay) PeakCell() (row, col int) {
	if len(o.Map) == 0 || o.GridW <= 0 {
		return 0, 0
	}
	best := 0
	for j, v := range o.Map {
		if v > o.Map[best] {
			best = j
		}
	}
	return best / o.GridW, best % o.GridW
}

// Absolute reports whether o has a fixed colour scale.
func (o *Overlay) Absolute() bool { return o.Hi > o.Lo }

// heatmapBase scales the region of img the model saw (crop, in source
// coordinates; the whole image when crop is empty) to one HeatmapPanel ×
// HeatmapPanel panel. Make it once per image: every prompt's sheet draws on
// it, and it is all a job needs to keep of the decoded image.
//
// The crop is stretched to the square (imaging.Resize), not cut to it
// (imaging.Fill): it already is what the model saw and the patch grid covers
// all of it, so cutting a crop that is not square (an image the model
// squashed whole) again would put every map off its patches.
func heatmapBase(img image.Image, crop image.Rectangle) *image.RGBA {
	crop = crop.Intersect(img.Bounds())
	if crop.Empty() {
		crop = img.Bounds()
	}
	if crop.Empty() {
		return image.NewRGBA(image.Rect(0, 0, HeatmapPanel, HeatmapPanel))
	}
	src := img
	if crop != img.Bounds() {
		// A view of the crop where the image has one; imaging.Crop copies it.
		if s, ok := img.(interface {
			SubImage(image.Rectangle) image.Image
		}); ok {
			src = s.SubImage(crop)
		} else {
			src = imaging.Crop(img, crop)
		}
	}
	return toRGBA(imaging.Resize(opaque(src), HeatmapPanel, HeatmapPanel, imaging.CatmullRom))
}

// opaque returns img with its alpha dropped, not blended: its colours as the
// model saw them (vision reads an image with alpha as Pillow's
// convert("RGB") does), so that a heatmap's first panel shows what the
// model saw rather than a transparent or darkened picture.
func opaque(img image.Image) image.Image {
	if o, ok := img.(interface{ Opaque() bool }); ok && o.Opaque() {
		return img
	}
	b := img.Bounds()
	out := image.NewNRGBA(b)
	if n, ok := img.(*image.NRGBA); ok {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			copy(out.Pix[out.PixOffset(b.Min.X, y):out.PixOffset(b.Max.X, y)], n.Pix[n.PixOffset(b.Min.X, y):n.PixOffset(b.Max.X, y)])
		}
	} else {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				out.SetNRGBA(x, y, color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA))
			}
		}
	}
	for i := 3; i < len(out.Pix); i += 4 {
		out.Pix[i] = 0xff
	}
	return out
}

// heatmapWholeBase scales the whole of img to a panel HeatmapPanel high
// and as wide as its aspect makes it (from half to four times that): the
// base of maps over the whole image (AttendOptions.Windows).
func heatmapWholeBase(img image.Image) *image.RGBA {
	b := img.Bounds()
	if b.Empty() {
		return image.NewRGBA(image.Rect(0, 0, HeatmapPanel, HeatmapPanel))
	}
	w := int(math.Round(float64(HeatmapPanel) * float64(b.Dx()) / float64(b.Dy())))
	w = min(max(w, HeatmapPanel/2), 4*HeatmapPanel)
	return toRGBA(imaging.Resize(opaque(img), w, HeatmapPanel, imaging.CatmullRom))
}

// renderHeatmaps draws a sheet: the base panel (HeatmapBase) and one panel
// per overlay, each the base in grey under the word's map upsampled smoothly
// (bilinear) to the panel and coloured with viridis, labelled with its word;
// at most six panels a row. gridH×gridW is the patch grid.
func renderHeatmaps(base *image.RGBA, gridH, gridW int, overlays []Overlay) (*image.RGBA, error) {
	return renderLabelled(base, "image", gridH, gridW, overlays)
}

// renderLabelled is renderHeatmaps with the image's panel labelled label.
func renderLabelled(base *image.RGBA, label string, gridH, gridW int, overlays []Overlay) (*image.RGBA, error) {
	if b := base.Bounds(); b.Dx() < HeatmapPanel/2 || b.Dx() > 4*HeatmapPanel || b.Dy() != HeatmapPanel {
		return nil, fmt.Errorf("pipeline: heatmap: base panel is %v, want %d high and %d to %d wide", b, HeatmapPanel, HeatmapPanel/2, 4*HeatmapPanel)
	}
	for _, o := range overlays {
		if gridH <= 0 || gridW <= 0 {
			return nil, fmt.Errorf("pipeline: heatmap %q: patch grid %d×%d", o.Label, gridH, gridW)
		}
		if len(o.Map) != gridH*gridW {
			return nil, fmt.Errorf("pipeline: heatmap %q: %d weights for a %d×%d patch grid", o.Label, len(o.Map), gridH, gridW)
		}
	}
	if gridH <= 0 || gridW <= 0 {
		return nil, fmt.Errorf("pipeline: heatmap: patch grid %d×%d", gridH, gridW)
	}

	const p = HeatmapPanel
	pw := base.Bounds().Dx() // p, or the whole image's aspect
	cols := min(len(overlays)+1, heatmapCols)
	rows := (len(overlays) + cols) / cols
	sheet := toRGBA(imaging.New(cols*pw, rows*(p+heatmapLabel), heatmapBackground))
	// place puts panel i of the sheet, labelled. It draws into the sheet with
	// image/draw: imaging.Paste returns a new copy of the whole sheet for
	// every panel, so a sheet of n panels would be allocated n+1 times.
	place := func(i int, panel image.Image, label string) {
		at := image.Pt((i%cols)*pw, (i/cols)*(p+heatmapLabel))
		b := panel.Bounds()
		draw.Draw(sheet, b.Sub(b.Min).Add(at.Add(image.Pt(0, heatmapLabel))), panel, b.Min, draw.Src)
		drawLabel(sheet, at, label)
	}
	place(0, base, label)

	// The map over the image in grey, so that the colours read as the map,
	// not as the picture; opaque, so that no panel fades where the image is
	// transparent.
	grey := imaging.Grayscale(base)
	for i := 3; i < len(grey.Pix); i += 4 {
		grey.Pix[i] = 0xff
	}
	grid := image.NewGray(image.Rect(0, 0, gridW, gridH))
	for i, o := range overlays {
		label := o.Label
		if o.Absolute() {
			label = fmt.Sprintf("%s %.2f", o.Label, o.Peak)
		}
		panel := imaging.Overlay(grey, heatPanel(grid, &o, pw), image.Point{}, heatmapOpacity)
		if o.Absolute() {
			drawColourBar(panel, o.Lo, o.Hi)
		}
		place(i+1, panel, label)
	}
	return sheet, nil
}

// drawColourBar draws the colour scale from lo (bottom) to hi (top) along
// the right edge of a panel, with its two ends written beside it.
func drawColourBar(panel *image.NRGBA, lo, hi float32) {
	const w, top, bottom = 8, 20, HeatmapPanel - 20
	pw := panel.Bounds().Dx()
	x0 := pw - w - 4
	for y := top; y < bottom; y++ {
		c := viridis(float32(bottom-1-y) / float32(bottom-1-top))
		for x := x0; x < x0+w; x++ {
			panel.SetNRGBA(x, y, color.NRGBA{c.R, c.G, c.B, 0xff})
		}
	}
	for _, l := range []struct {
		v float32
		y int
	}{{hi, top - 4}, {lo, bottom + 12}} {
		s := fmt.Sprintf("%.1f", l.v)
		d := font.Drawer{Dst: panel, Src: image.White, Face: basicfont.Face7x13, Dot: fixed.P(pw-4-7*len(s), l.y)}
		d.DrawString(s)
	}
}

// heatPanel colours one word's map over a panel pw wide. On a fixed scale (see
// Overlay) the values are placed between Lo and Hi (clamped), upsampled and
// coloured. Otherwise the map is stretched over its own
// range to 0–255 in grid (a gridW×gridH scratch image), upsampled to the
// panel by imaging.Resize with the Linear filter, stretched again over the
// upsampled range (the peak of an inner patch falls between pixel centres),
// and coloured with viridis. The Linear filter is the bilinear resize
// wanted: samples at pixel centres, edges clamped. Its 8-bit result is as
// fine as the colour map needs (256 colours), and it lets viridis be looked
// up per level instead of computed per pixel. A map with no range (flat, or
// with NaN or ±Inf) is drawn all at the low end.
func heatPanel(grid *image.Gray, o *Overlay, pw int) *image.NRGBA {
	m := o.Map
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range m {
		lo, hi = min(lo, v), max(hi, v)
	}
	if o.Absolute() {
		lo, hi = o.Lo, o.Hi
		for i, v := range m {
			grid.Pix[i] = uint8(math.Round(255 * float64(min(max(v, lo), hi)-lo) / float64(hi-lo)))
		}
		up := imaging.Resize(grid, pw, HeatmapPanel, imaging.Linear)
		var lut [256]color.RGBA
		for v := range lut {
			lut[v] = viridis(float32(v) / 255)
		}
		for i := 0; i < len(up.Pix); i += 4 {
			c := lut[up.Pix[i]]
			up.Pix[i], up.Pix[i+1], up.Pix[i+2], up.Pix[i+3] = c.R, c.G, c.B, 0xff
		}
		return up
	}
	if span := float64(hi - lo); span > 0 && !math.IsInf(span, 0) {
		for i, v := range m {
			grid.Pix[i] = uint8(math.Round(255 * float64(v-lo) / span))
		}
	} else {
		clear(grid.Pix)
	}
	up := imaging.Resize(grid, pw, HeatmapPanel, imaging.Linear)

	lo8, hi8 := uint8(255), uint8(0)
	for i := 0; i < len(up.Pix); i += 4 {
		lo8, hi8 = min(lo8, up.Pix[i]), max(hi8, up.Pix[i])
	}
	var lut [256]color.RGBA
	for v := int(lo8); v <= int(hi8); v++ {
		t := float32(0)
		if hi8 > lo8 {
			t = float32(v-int(lo8)) / float32(hi8-lo8)
		}
		lut[v] = viridis(t)
	}
	for i := 0; i < len(up.Pix); i += 4 {
		c := lut[up.Pix[i]]
		up.Pix[i], up.Pix[i+1], up.Pix[i+2], up.Pix[i+3] = c.R, c.G, c.B, 0xff
	}
	return up
}

// toRGBA returns imaging's non-premultiplied result as an *image.RGBA, the
// type the API hands out. An opaque image (a photo, a blank sheet) shares
// its pixels: with every alpha 255 the two layouts are the same bytes.
func toRGBA(n *image.NRGBA) *image.RGBA {
	for i := 3; i < len(n.Pix); i += 4 {
		if n.Pix[i] != 0xff {
			m := image.NewRGBA(n.Rect)
			draw.Draw(m, m.Rect, n, n.Rect.Min, draw.Src)
			return m
		}
	}
	return &image.RGBA{Pix: n.Pix, Stride: n.Stride, Rect: n.Rect}
}

// drawLabel writes s in the label strip whose top-left corner is at, cut to
// the panel's width, at twice the size of basicfont's 7×13 face so that it
// reads at 100% zoom. imaging draws no text, so this is x/image/font,
// drawn small and scaled up with nearest-neighbour (crisp, no blur). The
// face is ASCII (anything else is drawn as its replacement glyph), so a cut
// label ends in "..." rather than "…".
func drawLabel(dst *image.RGBA, at image.Point, s string) {
	const scale = 2
	const maxChars = HeatmapPanel/(7*scale) - 1
	if r := []rune(s); len(r) > maxChars {
		s = string(r[:maxChars-3]) + "..."
	}
	small := image.NewRGBA(image.Rect(0, 0, 7*len([]rune(s))+2, 14))
	draw.Draw(small, small.Rect, &image.Uniform{heatmapBackground}, image.Point{}, draw.Src)
	d := font.Drawer{Dst: small, Src: image.White, Face: basicfont.Face7x13, Dot: fixed.P(1, 11)}
	d.DrawString(s)
	big := imaging.Resize(small, small.Rect.Dx()*scale, small.Rect.Dy()*scale, imaging.NearestNeighbor)
	r := big.Bounds().Add(at.Add(image.Pt(4, 1)))
	draw.Draw(dst, r.Intersect(image.Rect(at.X, at.Y, at.X+HeatmapPanel, at.Y+heatmapLabel)), big, image.Point{}, draw.Src)
}

// viridis maps t in [0, 1] to matplotlib's viridis colour map (perceptually
// uniform, readable in grey and by colour-blind readers) through a
// degree-6 polynomial fit of it per channel. imaging has no colour maps.
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

// HeatmapBase is an image as every sheet of it shows it: the part the
// model saw, scaled to one HeatmapPanel × HeatmapPanel panel. Make it once
// per image (Engine.HeatmapBase) when several prompts' sheets are drawn or
// the decoded image should not be kept until they are.
type HeatmapBase struct{ *image.RGBA }

// HeatmapBase returns the base panel of img (the image as decoded) for
// Attention.Heatmap: the region the model's preprocessing keeps (its centre
// crop, in img's pixels), stretched to the panel; for SigLIP 2 NaFlex the
// whole image at its aspect, a panel high.
func (e *Engine) HeatmapBase(img image.Image) HeatmapBase {
	if e.naflex != nil {
		// SigLIP 2 NaFlex saw the whole image at its aspect.
		return HeatmapBase{heatmapWholeBase(img)}
	}
	return HeatmapBase{heatmapBase(img, e.CropRegion(img.Bounds()))}
}

// Heatmap draws the attention's sheet: first the image as the model saw it,
// then one panel per content word (Overlays) over it, each with its colour
// bar and label. img is the image as decoded (cropped and scaled as the
// engine's preprocessing does) or its HeatmapBase; the zero HeatmapBase
// draws the maps over a plain grey panel (an image known only by its
// stored features). Maps over the whole image (AttendOptions.Windows) are
// drawn over the whole image: give it, not a HeatmapBase.
func (a *Attention) Heatmap(img image.Image) (*image.RGBA, error) {
	if img == nil {
		return nil, errors.New("pipeline: heatmap: no image")
	}
	base, ok := img.(HeatmapBase)
	switch {
	case ok && a.whole && base.RGBA != nil:
		return nil, errors.New("pipeline: heatmap: the maps cover the whole image (windows): give the image itself, not its HeatmapBase (the model's centre crop)")
	case !ok && a.whole:
		base = HeatmapBase{heatmapWholeBase(img)}
	case !ok:
		if a.Prompt == nil || a.Prompt.eng == nil {
			return nil, errors.New("pipeline: heatmap: the attention has no prompt of an engine")
		}
		base = a.Prompt.eng.HeatmapBase(img)
	}
	if base.RGBA == nil {
		grey := image.NewRGBA(image.Rect(0, 0, HeatmapPanel, HeatmapPanel))
		draw.Draw(grey, grey.Bounds(), &image.Uniform{C: color.RGBA{128, 128, 128, 255}}, image.Point{}, draw.Src)
		base.RGBA = grey
	}
	label := a.ImageLabel
	if label == "" {
		label = "image"
	}
	return renderLabelled(base.RGBA, label, a.Grid.H, a.Grid.W, a.Overlays())
}

// EncodePNG encodes a heatmap sheet as PNG (fast compression).
func EncodePNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("pipeline: heatmap png: %w", err)
	}
	return buf.Bytes(), nil
}
