package vision

// The reference implementation of preprocessing that the fast path replaced,
// kept here to test the fast path against, value for value.

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
)

// toRGBGeneric writes img as packed 8-bit RGB (3 bytes a pixel, rows of 3·w bytes,
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
func toRGBGeneric(dst []byte, img image.Image, tmp *convScratchGeneric) ([]byte, int, int) {
	if tmp == nil {
		tmp = new(convScratchGeneric)
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
		ycbcrToRGBGeneric(dst, m.Y, m.Cb, m.Cr, m.YStride, m.CStride, m.SubsampleRatio, m.Rect, tmp)
	case *image.NYCbCrA:
		ycbcrToRGBGeneric(dst, m.Y, m.Cb, m.Cr, m.YStride, m.CStride, m.SubsampleRatio, m.Rect, tmp)
	case *image.NRGBA:
		copyRGBGeneric(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4)
	case *image.RGBA:
		if opaque8(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h) {
			copyRGBGeneric(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4)
		} else {
			genericRGBGeneric(dst, img)
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
		copyRGB16Generic(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h)
	case *image.RGBA64:
		if opaque16(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h) {
			copyRGB16Generic(dst, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h)
		} else {
			genericRGBGeneric(dst, img)
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
		genericRGBGeneric(dst, img)
	}
	return dst, w, h
}

// convScratchGeneric is toRGBGeneric's working memory.
type convScratchGeneric struct {
	rows []byte
	sums []int32
}

func copyRGBGeneric(dst, pix []byte, stride, off, w, h, bpp int) {
	for y := 0; y < h; y++ {
		src := pix[off+y*stride:][:bpp*w]
		row := dst[3*w*y:][:3*w]
		for x := 0; x < w; x++ {
			row[3*x], row[3*x+1], row[3*x+2] = src[bpp*x], src[bpp*x+1], src[bpp*x+2]
		}
	}
}

// copyRGB16Generic takes the high byte of 16-bit big-endian R, G, B (8 bytes a pixel).
func copyRGB16Generic(dst, pix []byte, stride, off, w, h int) {
	for y := 0; y < h; y++ {
		src := pix[off+y*stride:][:8*w]
		row := dst[3*w*y:][:3*w]
		for x := 0; x < w; x++ {
			row[3*x], row[3*x+1], row[3*x+2] = src[8*x], src[8*x+2], src[8*x+4]
		}
	}
}

// genericRGBGeneric converts any image through its non-premultiplied 16-bit colour
// and keeps the high byte.
func genericRGBGeneric(dst []byte, img image.Image) {
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

// ycbcrToRGBGeneric converts a JPEG's planes the way libjpeg-turbo does for
// Pillow: chroma upsampled with its "fancy" (triangle) filters for 4:2:2,
// 4:2:0 and 4:4:0 (plain replication for chroma planes 2 samples wide or
// less, and for 4:1:1 and 4:1:0), then its fixed-point YCC→RGB.
func ycbcrToRGBGeneric(dst, Y, Cb, Cr []byte, yStride, cStride int, ratio image.YCbCrSubsampleRatio, r image.Rectangle, tmp *convScratchGeneric) {
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

// resizeGeneric is Pillow's ImagingResample (two passes, horizontal then vertical,
// 8-bit rounding and clipping between them, a pass skipped when its size
// does not change) of src to dw×dh, computing only the output pixels in win
// (a sub-rectangle of dw×dh) into dst (win.Dx()×win.Dy(), stride 3·win.Dx()).
// Every pixel computed is bit-identical to Pillow's.
func resizeGeneric(dst []byte, src rgbView, dw, dh int, win image.Rectangle, f filter, s *resampleScratchGeneric) {
	needH := dw != src.w
	needV := dh != src.h
	ow, oh := win.Dx(), win.Dy()
	// Rows of src the vertical pass reads (all window rows if none).
	y0, y1 := win.Min.Y, win.Max.Y
	if needV {
		s.f64 = makeCoeffsGeneric(&s.vc, src.h, dh, win.Min.Y, win.Max.Y, f, s.f64)
		y0 = int(s.vc.first[0])
		y1 = int(s.vc.first[oh-1] + s.vc.n[oh-1])
	}
	// Horizontal pass: rows y0..y1 of src, window columns.
	mid := src
	mid.pix = src.pix[y0*src.stride:]
	mid.h = y1 - y0
	xoff := win.Min.X
	if needH {
		s.f64 = makeCoeffsGeneric(&s.hc, src.w, dw, win.Min.X, win.Max.X, f, s.f64)
		s.tmp = grow(s.tmp, 3*ow*(y1-y0))
		horizontalGeneric(s.tmp, 3*ow, mid, &s.hc, ow)
		mid = rgbView{pix: s.tmp, stride: 3 * ow, w: ow, h: y1 - y0}
		xoff = 0
	}
	if needV {
		s.acc = grow(s.acc, 3*ow)
		verticalGeneric(dst, 3*ow, mid, xoff, &s.vc, y0, ow, oh, s.acc)
		return
	}
	for y := 0; y < oh; y++ {
		copy(dst[y*3*ow:][:3*ow], mid.pix[y*mid.stride+3*xoff:][:3*ow])
	}
}

// horizontalGeneric is ImagingResampleHorizontal_8bpc for 3 bands: each of src's
// rows to ow outputs.
func horizontalGeneric(dst []byte, stride int, src rgbView, c *coeffsGeneric, ow int) {
	const half = 1 << (precision - 1)
	for y := 0; y < src.h; y++ {
		in := src.pix[y*src.stride:][:3*src.w]
		out := dst[y*stride:][:3*ow]
		for xx := 0; xx < ow; xx++ {
			n, f := int(c.n[xx]), 3*int(c.first[xx])
			k := c.k[xx*c.ksize:][:n]
			p := in[f : f+3*n]
			ss0, ss1, ss2 := int32(half), int32(half), int32(half)
			for x, kv := range k {
				q := p[3*x : 3*x+3 : 3*x+3]
				ss0 += int32(q[0]) * kv
				ss1 += int32(q[1]) * kv
				ss2 += int32(q[2]) * kv
			}
			o := out[3*xx : 3*xx+3 : 3*xx+3]
			o[0], o[1], o[2] = clip8(ss0), clip8(ss1), clip8(ss2)
		}
	}
}

// verticalGeneric is ImagingResampleVertical_8bpc: output row yy of the window
// from rows first-y0 ... of src (whose row 0 is input row y0), columns
// xoff ... xoff+ow. acc is scratch for one row of sums.
func verticalGeneric(dst []byte, stride int, src rgbView, xoff int, c *coeffsGeneric, y0, ow, oh int, acc []int32) {
	const half = 1 << (precision - 1)
	acc = acc[:3*ow]
	for yy := 0; yy < oh; yy++ {
		k := c.k[yy*c.ksize:][:c.n[yy]]
		for i := range acc {
			acc[i] = half
		}
		row := int(c.first[yy]) - y0
		for _, kv := range k {
			in := src.pix[row*src.stride+3*xoff:][:len(acc)]
			for i, v := range in {
				acc[i] += int32(v) * kv
			}
			row++
		}
		out := dst[yy*stride:][:len(acc)]
		for i, ss := range acc {
			out[i] = clip8(ss)
		}
	}
}

// makeCoeffsGeneric is Pillow's precompute_coeffs followed by
// normalize_coeffs_8bpc, for an axis of inSize samples resampled to
// outSize (box 0..inSize), but only for the outputs lo <= i < hi. The
// fixed-point weights are the same as Pillow's for every output computed.
func makeCoeffsGeneric(c *coeffsGeneric, inSize, outSize, lo, hi int, f filter, scratch []float64) []float64 {
	// prepare for horizontal stretch
	scale := float64(float32(inSize)) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	// determine support size (length of resampling filter)
	support := float64(f.support * filterscale)
	ksize := int(math.Ceil(support))*2 + 1
	n := hi - lo
	c.ksize = ksize
	c.first = grow(c.first, n)
	c.n = grow(c.n, n)
	c.k = grow(c.k, n*ksize)
	scratch = grow(scratch, ksize)
	ss := 1.0 / filterscale
	for xx := lo; xx < hi; xx++ {
		center := float64((float64(xx) + 0.5) * scale)
		// Round the value (C casts truncate toward zero, as Go's do)
		xmin := int(center - support + 0.5)
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w := f.kernel(float64((float64(x+xmin) - center + 0.5) * ss))
			scratch[x] = w
			ww += w
		}
		k := c.k[(xx-lo)*ksize:][:ksize]
		for x := 0; x < xmax; x++ {
			w := scratch[x]
			if ww != 0 {
				w /= ww
			}
			// normalize_coeffs_8bpc
			if w < 0 {
				k[x] = int32(-0.5 + float64(w*(1<<precision)))
			} else {
				k[x] = int32(0.5 + float64(w*(1<<precision)))
			}
		}
		for x := xmax; x < ksize; x++ {
			k[x] = 0
		}
		c.first[xx-lo] = int32(xmin)
		c.n[xx-lo] = int32(xmax)
	}
	return scratch
}

// coeffsGeneric are makeCoeffsGeneric's weights, zeros kept.
type coeffsGeneric struct {
	ksize int
	first []int32
	n     []int32
	k     []int32
}

// resampleScratchGeneric holds resizeGeneric's buffers.
type resampleScratchGeneric struct {
	hc, vc coeffsGeneric
	tmp    []byte
	f64    []float64
	acc    []int32
}

// applyGeneric is ApplyInto as it was first written and checked against
// the golden files: the whole image converted to RGB, then resized with
// Pillow's loops one multiply-add at a time. The fast path must agree with
// it bit for bit.
func (p *Preprocessor) applyGeneric(dst []float32, img image.Image) (h, w int, err error) {
	if img == nil {
		return 0, 0, errors.New("vision: preprocess: nil image")
	}
	b := img.Bounds()
	if b.Empty() {
		return 0, 0, errors.New("vision: preprocess: empty image")
	}
	if !p.DoConvertRGB {
		if m := pilMode(img); m != "RGB" {
			return 0, 0, fmt.Errorf("vision: preprocess: do_convert_rgb is false but the image is %s, not RGB (the model needs 3 channels)", m)
		}
	}
	var f filter
	if p.DoResize {
		var ok bool
		if f, ok = p.Resample.filter(); !ok {
			return 0, 0, fmt.Errorf("vision: preprocess: resample %v is not supported", p.Resample)
		}
	}
	sw, sh := b.Dx(), b.Dy()
	rh, rw := p.ResizedSize(sw, sh)
	oh, ow := p.OutputSize(sw, sh)
	if rh <= 0 || rw <= 0 {
		return 0, 0, fmt.Errorf("vision: preprocess: a %dx%d image resizes to %dx%d", sw, sh, rw, rh)
	}
	if int64(oh)*int64(ow) > maxOutput {
		return 0, 0, fmt.Errorf("vision: preprocess: a %dx%d image would become %dx%d, over %d pixels", sw, sh, ow, oh, maxOutput)
	}
	if len(dst) < 3*oh*ow {
		return 0, 0, fmt.Errorf("vision: preprocess: dst has %d values, need 3x%dx%d = %d", len(dst), oh, ow, 3*oh*ow)
	}
	// The crop window in resized coordinates: output (i, j) is resized
	// pixel (top+i, left+j), or zero outside the resized image.
	top, left := 0, 0
	if p.DoCenterCrop {
		top, left = floorDiv(rh-oh, 2), floorDiv(rw-ow, 2)
	}
	win := image.Rect(left, top, left+ow, top+oh).Intersect(image.Rect(0, 0, rw, rh))

	s := new(scratchGeneric)
	rgb, _, _ := toRGBGeneric(nil, img, &s.conv)
	src := rgbView{pix: rgb, stride: 3 * sw, w: sw, h: sh}

	var win8 []byte
	winStride := 3 * win.Dx()
	if !win.Empty() {
		if p.DoResize && (rw != sw || rh != sh) {
			s.win = grow(s.win, 3*win.Dx()*win.Dy())
			resizeGeneric(s.win, src, rw, rh, win, f, &s.rs)
			win8 = s.win
		} else {
			win8 = rgb[win.Min.Y*src.stride+3*win.Min.X:]
			winStride = src.stride
		}
	}
	lut := &s.lut
	p.fillLUT(lut)
	plane := oh * ow
	for c := range 3 {
		out := dst[c*plane : (c+1)*plane]
		pad := lut[c][0]
		for i := 0; i < oh; i++ {
			row := out[i*ow : (i+1)*ow]
			y := top + i
			if y < win.Min.Y || y >= win.Max.Y {
				for j := range row {
					row[j] = pad
				}
				continue
			}
			x0, x1 := win.Min.X-left, win.Max.X-left // window columns in output coordinates
			for j := 0; j < x0; j++ {
				row[j] = pad
			}
			in := win8[(y-win.Min.Y)*winStride:]
			for j := x0; j < x1; j++ {
				row[j] = lut[c][in[3*(j-x0)+c]]
			}
			for j := x1; j < ow; j++ {
				row[j] = pad
			}
		}
	}
	return oh, ow, nil
}

type scratchGeneric struct {
	win  []byte
	lut  [3][256]float32
	conv convScratchGeneric
	rs   resampleScratchGeneric
}

// rgbView is packed 8-bit RGB: pixel (x, y) at pix[y*stride + 3*x].
type rgbView struct {
	pix    []byte
	stride int
	w, h   int
}

// rgbRow implements rowSource.
func (v rgbView) rgbRow(dst []byte, y, x0, x1 int) {
	copy(dst[:3*(x1-x0)], v.pix[y*v.stride+3*x0:][:3*(x1-x0)])
}

// resize is resample for a packed RGB image (TestResizeWindow).
func resize(dst []byte, src rgbView, dw, dh int, win image.Rectangle, f filter, s *resampleScratch) {
	resample(dst, src, src.w, src.h, dw, dh, win, f, s)
}
