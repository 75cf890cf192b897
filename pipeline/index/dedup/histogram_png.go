package dedup

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The histogram picture's size and plot area.
const (
	histW, histH               = 800, 420
	plotL, plotR, plotT, plotB = 70, 20, 30, 60
)

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{128, 128, 128, 255}
	bars  = color.RGBA{70, 110, 170, 255}
	red   = color.RGBA{200, 30, 30, 255}
)

// plotRange returns the cosines the histogram's x axis spans: from the
// lowest bin with an image (rounded down to 0.1, and no higher than the
// threshold less 0.1) to 1.
func (h Histogram) plotRange() (lo, hi float64) {
	lo = math.Floor((float64(h.Threshold)-0.1)*10) / 10
	for i, c := range h.Counts {
		if c > 0 {
			lo = min(lo, math.Floor((h.Lo+float64(i)*h.Width)*10+1e-9)/10)
			break
		}
	}
	return max(lo, h.Lo), h.Lo + float64(len(h.Counts))*h.Width
}

// PNG draws the histogram (800×420): a bar per bin over the cosines from
// its lowest image to 1, the threshold as a red vertical line, the axes
// labelled (x: nearest-neighbour cosine, y: images), and the images
// counted (a sample of how many, with Sampled).
func (h Histogram) PNG() ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, histW, histH))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	lo, hi := h.plotRange()
	pw, ph := histW-plotL-plotR, histH-plotT-plotB
	xOf := func(c float64) int { return plotL + int(math.Round((c-lo)/(hi-lo)*float64(pw))) }
	top := 1
	for _, c := range h.Counts {
		top = max(top, c)
	}
	for i, c := range h.Counts {
		b0 := h.Lo + float64(i)*h.Width
		if c == 0 || b0 < lo-1e-9 {
			continue
		}
		x0, x1 := xOf(b0), xOf(b0+h.Width)
		y0 := plotT + ph - int(math.Round(float64(c)/float64(top)*float64(ph)))
		fill(img, image.Rect(x0, y0, max(x1-1, x0+1), plotT+ph), bars)
	}
	fill(img, image.Rect(plotL, plotT+ph, plotL+pw, plotT+ph+1), black) // x axis
	fill(img, image.Rect(plotL-1, plotT, plotL, plotT+ph), black)       // y axis
	for t := math.Ceil(lo*10-1e-9) / 10; t <= hi+1e-9; t += 0.1 {
		x := xOf(t)
		fill(img, image.Rect(x, plotT+ph, x+1, plotT+ph+5), black)
		s := fmt.Sprintf("%.1f", t)
		text(img, x-7*len(s)/2, plotT+ph+18, s, black)
	}
	for _, f := range []float64{0, 0.5, 1} {
		y := plotT + ph - int(math.Round(f*float64(ph)))
		fill(img, image.Rect(plotL-5, y, plotL-1, y+1), black)
		s := fmt.Sprint(int(math.Round(f * float64(top))))
		text(img, plotL-8-7*len(s), y+4, s, black)
	}
	if x := xOf(float64(h.Threshold)); x >= plotL && x <= plotL+pw {
		fill(img, image.Rect(x, plotT-8, x+2, plotT+ph), red)
		s := fmt.Sprintf("T = %g", h.Threshold)
		if x+4+7*len(s) > plotL+pw-40 {
			x -= 8 + 7*len(s) // to the line's left near the right edge
		} else {
			x += 4
		}
		text(img, x, plotT+4, s, red)
	}
	text(img, plotL+pw/2-7*12, histH-18, "nearest-neighbour cosine", black)
	text(img, 8, plotT-12, "images", black)
	title := fmt.Sprintf("%d images, %.2f a bin", h.Images, h.Width)
	if h.Sampled > 0 {
		title = fmt.Sprintf("a sample of %d images of %d, %.2f a bin", h.Sampled, h.Images, h.Width)
	}
	text(img, plotL+pw-7*max(22, len(title)), plotT-12, title, grey)
	return encodePNG(img)
}

// fill paints r with c.
func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

// text draws s with its baseline's left end at (x, y), in basicfont's
// 7×13 face (ASCII; anything else is drawn as its replacement glyph).
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func encodePNG(img image.Image) ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("dedup: encode png: %w", err)
	}
	return b.Bytes(), nil
}

// drawImage draws src onto img with src's top-left corner at at.
func drawImage(img *image.RGBA, src image.Image, at image.Point) {
	draw.Draw(img, src.Bounds().Sub(src.Bounds().Min).Add(at), src, src.Bounds().Min, draw.Src)
}
