package vision

import (
	"fmt"
	"image"
	"math"
)

// Resample is a Pillow resampling filter, numbered as PIL.Image.Resampling
// (and the "resample" key of preprocessor_config.json).
type Resample int

// Pillow's filters. Nearest is not supported by Preprocessor (Pillow does
// not resize with it through the convolution code reproduced here).
const (
	Nearest  Resample = 0
	Lanczos  Resample = 1
	Bilinear Resample = 2
	Bicubic  Resample = 3
	Box      Resample = 4
	Hamming  Resample = 5
)

func (r Resample) String() string {
	switch r {
	case Nearest:
		return "nearest"
	case Lanczos:
		return "lanczos"
	case Bilinear:
		return "bilinear"
	case Bicubic:
		return "bicubic"
	case Box:
		return "box"
	case Hamming:
		return "hamming"
	}
	return fmt.Sprintf("resample(%d)", int(r))
}

// filter is one of Pillow's convolution filters (Resample.c): the kernel
// and its support at scale 1.
type filter struct {
	kernel  func(x float64) float64
	support float64
}

func (r Resample) filter() (filter, bool) {
	switch r {
	case Lanczos:
		return filter{lanczosKernel, 3}, true
	case Bilinear:
		return filter{bilinearKernel, 1}, true
	case Bicubic:
		return filter{bicubicKernel, 2}, true
	case Box:
		return filter{boxKernel, 0.5}, true
	case Hamming:
		return filter{hammingKernel, 1}, true
	}
	return filter{}, false
}

// The kernels are written operation by operation, each product converted
// explicitly, so that the Go compiler cannot fuse them into FMAs: Pillow's
// C is built without FMA, and one rounding more or less moves coefficients.

func boxKernel(x float64) float64 {
	if x > -0.5 && x <= 0.5 {
		return 1
	}
	return 0
}

func bilinearKernel(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// bicubicKernel is Keys' cubic with a = -0.5.
func bicubicKernel(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		t := float64((a+2)*x) - (a + 3)
		t = float64(t * x)
		t = float64(t * x)
		return t + 1
	}
	if x < 2 {
		t := float64((x-5)*x) + 8
		t = float64(t*x) - 4
		return float64(t * a)
	}
	return 0
}

func hammingKernel(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x == 0 {
		return 1
	}
	if x >= 1 {
		return 0
	}
	x = float64(x * math.Pi)
	// Pillow: sin(x) / x * (0.54f + 0.46f * cos(x)), float literals.
	w := float64(float64(float32(0.46))*math.Cos(x)) + float64(float32(0.54))
	return float64(math.Sin(x)/x) * w
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x = float64(x * math.Pi)
	return math.Sin(x) / x
}

func lanczosKernel(x float64) float64 {
	if -3 <= x && x < 3 {
		return float64(sinc(x) * sinc(x/3))
	}
	return 0
}

// precision is Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2.
const precision = 22

// coeffs are one axis' fixed-point weights: for output i, the taps
// k[i*ksize : i*ksize+n[i]] apply to input samples first[i], first[i]+1, ...
type coeffs struct {
	ksize int
	first []int32
	n     []int32
	k     []int32
}

// makeCoeffs is Pillow's precompute_coeffs followed by
// normalize_coeffs_8bpc, for an axis of inSize samples resampled to
// outSize (box 0..inSize), but only for the outputs lo <= i < hi. The
// fixed-point weights are the same as Pillow's for every output computed.
func makeCoeffs(c *coeffs, inSize, outSize, lo, hi int, f filter, scratch []float64) []float64 {
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

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// clip8 is Pillow's clip8 on a sum with the rounding half added.
func clip8(ss int32) uint8 {
	v := ss >> precision
	if uint32(v) <= 255 {
		return uint8(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// rgbView is packed 8-bit RGB: pixel (x, y) at pix[y*stride + 3*x].
type rgbView struct {
	pix    []byte
	stride int
	w, h   int
}

// resampleScratch holds the buffers of one resize, reused across calls.
type resampleScratch struct {
	hc, vc coeffs
	tmp    []byte
	f64    []float64
	acc    []int32
}

// resize is Pillow's ImagingResample (two passes, horizontal then vertical,
// 8-bit rounding and clipping between them, a pass skipped when its size
// does not change) of src to dw×dh, computing only the output pixels in win
// (a sub-rectangle of dw×dh) into dst (win.Dx()×win.Dy(), stride 3·win.Dx()).
// Every pixel computed is bit-identical to Pillow's.
func resize(dst []byte, src rgbView, dw, dh int, win image.Rectangle, f filter, s *resampleScratch) {
	needH := dw != src.w
	needV := dh != src.h
	ow, oh := win.Dx(), win.Dy()
	// Rows of src the vertical pass reads (all window rows if none).
	y0, y1 := win.Min.Y, win.Max.Y
	if needV {
		s.f64 = makeCoeffs(&s.vc, src.h, dh, win.Min.Y, win.Max.Y, f, s.f64)
		y0 = int(s.vc.first[0])
		y1 = int(s.vc.first[oh-1] + s.vc.n[oh-1])
	}
	// Horizontal pass: rows y0..y1 of src, window columns.
	mid := src
	mid.pix = src.pix[y0*src.stride:]
	mid.h = y1 - y0
	xoff := win.Min.X
	if needH {
		s.f64 = makeCoeffs(&s.hc, src.w, dw, win.Min.X, win.Max.X, f, s.f64)
		s.tmp = grow(s.tmp, 3*ow*(y1-y0))
		horizontal(s.tmp, 3*ow, mid, &s.hc, ow)
		mid = rgbView{pix: s.tmp, stride: 3 * ow, w: ow, h: y1 - y0}
		xoff = 0
	}
	if needV {
		s.acc = grow(s.acc, 3*ow)
		vertical(dst, 3*ow, mid, xoff, &s.vc, y0, ow, oh, s.acc)
		return
	}
	for y := 0; y < oh; y++ {
		copy(dst[y*3*ow:][:3*ow], mid.pix[y*mid.stride+3*xoff:][:3*ow])
	}
}

// horizontal is ImagingResampleHorizontal_8bpc for 3 bands: each of src's
// rows to ow outputs.
func horizontal(dst []byte, stride int, src rgbView, c *coeffs, ow int) {
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

// vertical is ImagingResampleVertical_8bpc: output row yy of the window
// from rows first-y0 ... of src (whose row 0 is input row y0), columns
// xoff ... xoff+ow. acc is scratch for one row of sums.
func vertical(dst []byte, stride int, src rgbView, xoff int, c *coeffs, y0, ow, oh int, acc []int32) {
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
