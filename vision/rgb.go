package vision

import (
	"image"
	"image/color"
)

// toRGB writes img as packed 8-bit RGB (3 bytes a pixel, rows of 3·w bytes,
// no padding) into dst, growing it as needed, and returns it with the size.
// The conversion is Pillow's Image.convert("RGB") for the mode Pillow opens
// the same file in:
//
//   - gray (L, 1-bit): replicated; gray+alpha, RGBA: alpha dropped, not blended
//   - paletted (P): palette expanded, transparency ignored
//   - 16-bit gray (Pillow's "I"/"I;16"): clipped to 0..255, not scaled
//   - 16-bit RGB/RGBA/gray+alpha (Pillow unpacks "RGB;16B" etc.): high byte
//   - CMYK: nk = 255-K; R = nk - C·nk/255 (Pillow's cmyk2rgb, MULDIV255)
//   - YCbCr (JPEG): libjpeg-turbo's fancy upsampling and YCC→RGB tables
//
// tmp, if not nil, holds working rows reused across calls.
func toRGB(dst []byte, img image.Image, tmp *convScratch) ([]byte, int, int) {
	if tmp == nil {
		tmp = new(convScratch)
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	n := 3 * w * h
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	switch m := img.(type) {
	case *image.YCbCr:
		ycbcrToRGB(dst, m.Y, m.Cb, m.Cr, m.YStride, m.CStride, m.SubsampleRatio, m.Rect, tmp)
	case *image.NYCbCrA:
		ycbcrToRGB(dst, m.Y, m.Cb, m.Cr, m.YStride, m.CStride, m.SubsampleRatio, m.Rect, tmp)
	case *image.NRGBA:
		copyRGB(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4)
	case *image.RGBA:
		if opaque8(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h) {
			copyRGB(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4)
		} else {
			genericRGB(dst, img)
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:w]
			row := dst[3*w*y:][:3*w]
			for x, v := range src {
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:2*w]
			row := dst[3*w*y:][:3*w]
			for x := 0; x < w; x++ {
				v := uint8(0xff)
				if src[2*x] == 0 {
					v = src[2*x+1]
				}
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
	case *image.NRGBA64:
		copyRGB16(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h)
	case *image.RGBA64:
		if opaque16(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h) {
			copyRGB16(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h)
		} else {
			genericRGB(dst, img)
		}
	case *image.Paletted:
		var lut [256][3]uint8
		for i, c := range m.Palette {
			if i < 256 {
				lut[i] = paletteRGB(c)
			}
		}
		for y := 0; y < h; y++ {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:w]
			row := dst[3*w*y:][:3*w]
			for x, v := range src {
				c := lut[v]
				row[3*x], row[3*x+1], row[3*x+2] = c[0], c[1], c[2]
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			src := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:4*w]
			row := dst[3*w*y:][:3*w]
			for x := 0; x < w; x++ {
				s := src[4*x : 4*x+4]
				nk := 255 - int(s[3])
				row[3*x] = cmykChannel(int(s[0]), nk)
				row[3*x+1] = cmykChannel(int(s[1]), nk)
				row[3*x+2] = cmykChannel(int(s[2]), nk)
			}
		}
	default:
		genericRGB(dst, img)
	}
	return dst, w, h
}

// convScratch is toRGB's reusable working memory.
type convScratch struct {
	rows []byte
	sums []int32
}

// cmykChannel is Pillow's CLIP8(nk - MULDIV255(v, nk)).
func cmykChannel(v, nk int) uint8 {
	t := v*nk + 128
	r := nk - ((t>>8)+t)>>8
	if r < 0 {
		return 0
	}
	return uint8(r)
}

// paletteRGB is the RGB a palette entry stands for, alpha ignored.
func paletteRGB(c color.Color) [3]uint8 {
	switch c := c.(type) {
	case color.NRGBA:
		return [3]uint8{c.R, c.G, c.B}
	case color.RGBA:
		if c.A == 0xff {
			return [3]uint8{c.R, c.G, c.B}
		}
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return [3]uint8{n.R, n.G, n.B}
}

func copyRGB(dst, pix []byte, stride, off, w, h, bpp int) {
	for y := 0; y < h; y++ {
		src := pix[off+y*stride:][:bpp*w]
		row := dst[3*w*y:][:3*w]
		for x := 0; x < w; x++ {
			row[3*x], row[3*x+1], row[3*x+2] = src[bpp*x], src[bpp*x+1], src[bpp*x+2]
		}
	}
}

// copyRGB16 takes the high byte of 16-bit big-endian R, G, B (8 bytes a pixel).
func copyRGB16(dst, pix []byte, stride, off, w, h int) {
	for y := 0; y < h; y++ {
		src := pix[off+y*stride:][:8*w]
		row := dst[3*w*y:][:3*w]
		for x := 0; x < w; x++ {
			row[3*x], row[3*x+1], row[3*x+2] = src[8*x], src[8*x+2], src[8*x+4]
		}
	}
}

func opaque8(pix []byte, stride, off, w, h int) bool {
	for y := 0; y < h; y++ {
		src := pix[off+y*stride:][:4*w]
		for x := 3; x < len(src); x += 4 {
			if src[x] != 0xff {
				return false
			}
		}
	}
	return true
}

func opaque16(pix []byte, stride, off, w, h int) bool {
	for y := 0; y < h; y++ {
		src := pix[off+y*stride:][:8*w]
		for x := 6; x < len(src); x += 8 {
			if src[x] != 0xff || src[x+1] != 0xff {
				return false
			}
		}
	}
	return true
}

// genericRGB converts any image through its non-premultiplied 16-bit colour
// and keeps the high byte.
func genericRGB(dst []byte, img image.Image) {
	b := img.Bounds()
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBA64Model.Convert(img.At(x, y)).(color.NRGBA64)
			dst[i], dst[i+1], dst[i+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
			i += 3
		}
	}
}

// libjpeg's YCC→RGB tables (jdcolor.c, SCALEBITS 16):
// R = Y + crR[Cr], G = Y + (cbG[Cb] + crG[Cr]) >> 16, B = Y + cbB[Cb].
var crR, cbB, crG, cbG [256]int32

func init() {
	const half = 1 << 15
	fix := func(x float64) int32 { return int32(x*(1<<16) + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix(1.40200)*x + half) >> 16
		cbB[i] = (fix(1.77200)*x + half) >> 16
		crG[i] = -fix(0.71414) * x
		cbG[i] = -fix(0.34414)*x + half
	}
}

func clamp8(v int32) uint8 {
	if uint32(v) <= 255 {
		return uint8(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// ycbcrToRGB converts a JPEG's planes the way libjpeg-turbo does for
// Pillow: chroma upsampled with its "fancy" (triangle) filters for 4:2:2,
// 4:2:0 and 4:4:0 (plain replication for chroma planes 2 samples wide or
// less, and for 4:1:1 and 4:1:0), then its fixed-point YCC→RGB.
func ycbcrToRGB(dst, Y, Cb, Cr []byte, yStride, cStride int, ratio image.YCbCrSubsampleRatio, r image.Rectangle, tmp *convScratch) {
	w, h := r.Dx(), r.Dy()
	// Chroma plane geometry, as image.YCbCr lays it out.
	var hs, vs int // log2 of the horizontal and vertical subsampling
	switch ratio {
	case image.YCbCrSubsampleRatio422:
		hs = 1
	case image.YCbCrSubsampleRatio420:
		hs, vs = 1, 1
	case image.YCbCrSubsampleRatio440:
		vs = 1
	case image.YCbCrSubsampleRatio411:
		hs = 2
	case image.YCbCrSubsampleRatio410:
		hs, vs = 2, 1
	}
	cx0, cy0 := r.Min.X>>hs, r.Min.Y>>vs
	cw := ((r.Max.X + 1<<hs - 1) >> hs) - cx0
	ch := ((r.Max.Y + 1<<vs - 1) >> vs) - cy0
	fancyH := hs == 1 && cw > 2 && r.Min.X%2 == 0
	fancyV := vs == 1 && r.Min.Y%2 == 0 && (hs == 0 || (hs == 1 && fancyH))
	tmp.rows = grow(tmp.rows, 2*w)
	cbRow, crRow := tmp.rows[:w], tmp.rows[w:]
	tmp.sums = grow(tmp.sums, cw)
	cs := tmp.sums
	for y := 0; y < h; y++ {
		yRow := Y[y*yStride:][:w]
		cy := (y+r.Min.Y)>>vs - cy0 // chroma row, relative to the plane
		for p, plane := range [2][]byte{Cb, Cr} {
			out := cbRow
			if p == 1 {
				out = crRow
			}
			row := plane[cy*cStride:]
			switch {
			case fancyV && hs == 1: // h2v2: rows weighted 3:1, then columns 3:1
				orow := plane[neighbourRow(y, cy, ch)*cStride:]
				for i := range cs {
					cs[i] = 3*int32(row[i]) + int32(orow[i])
				}
				// Output columns 2i and 2i+1 from chroma column i.
				for i := 0; i < cw; i++ {
					prev, next := cs[max(i-1, 0)], cs[min(i+1, cw-1)]
					even := (cs[i]*3 + prev + 8) >> 4
					odd := (cs[i]*3 + next + 7) >> 4
					if i == 0 {
						even = (cs[0]*4 + 8) >> 4
					}
					if i == cw-1 {
						odd = (cs[i]*4 + 7) >> 4
					}
					if 2*i < w {
						out[2*i] = uint8(even)
					}
					if 2*i+1 < w {
						out[2*i+1] = uint8(odd)
					}
				}
			case fancyV: // h1v2
				orow := plane[neighbourRow(y, cy, ch)*cStride:]
				bias := int32(1 + y&1)
				for x := 0; x < w; x++ {
					out[x] = uint8((3*int32(row[x]) + int32(orow[x]) + bias) >> 2)
				}
			case fancyH && vs == 0: // h2v1
				for x := 0; x < w; x++ {
					i := x >> 1
					c := int32(row[i])
					v := c
					switch {
					case x&1 == 0 && i > 0:
						v = (3*c + int32(row[i-1]) + 1) >> 2
					case x&1 == 1 && i < cw-1:
						v = (3*c + int32(row[i+1]) + 2) >> 2
					}
					out[x] = uint8(v)
				}
			default: // 4:4:4, and replication
				for x := 0; x < w; x++ {
					out[x] = row[(x+r.Min.X)>>hs-cx0]
				}
			}
		}
		o := dst[3*w*y:][:3*w]
		for x := 0; x < w; x++ {
			yy := int32(yRow[x])
			cb, cr := cbRow[x], crRow[x]
			o[3*x] = clamp8(yy + crR[cr])
			o[3*x+1] = clamp8(yy + (cbG[cb]+crG[cr])>>16)
			o[3*x+2] = clamp8(yy + cbB[cb])
		}
	}
}

// neighbourRow is the chroma row that libjpeg blends (weight 1 of 4) into
// row cy for output row y: the one above for even y, below for odd y,
// clamped at the edges (libjpeg's context rows repeat the edge row).
func neighbourRow(y, cy, ch int) int {
	if y&1 == 0 {
		return max(0, cy-1)
	}
	return min(ch-1, cy+1)
}
