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
	id      Resample
}

func (r Resample) filter() (filter, bool) {
	switch r {
	case Lanczos:
		return filter{lanczosKernel, 3, Lanczos}, true
	case Bilinear:
		return filter{bilinearKernel, 1, Bilinear}, true
	case Bicubic:
		return filter{bicubicKernel, 2, Bicubic}, true
	case Box:
		return filter{boxKernel, 0.5, Box}, true
	case Hamming:
		return filter{hammingKernel, 1, Hamming}, true
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

// identity marks coefficients that copy their input (a pass Pillow skips
// because the size does not change on that axis).
const identity Resample = -1

// coeffs are one axis' fixed-point weights: for output i, the taps
// k[i*ksize : i*ksize+n[i]] apply to input samples first[i], first[i]+1, ...
// Zero weights at either end of an output's taps are dropped: they add
// nothing to Pillow's sums. key says what the weights were made for, so a
// resize of the same geometry reuses them.
//
// When an output's weights are symmetric (a palindrome, as every interior
// output's are for integer downscaling factors such as 256 → 64), its sum
// Σ k[x]·p[x] is computed as Σ k[x]·(p[x] + p[n-1-x]) over half the taps:
// integer sums do not depend on the order of the terms, so the result is
// Pillow's to the bit with half the multiplications.
type coeffs struct {
	key   coeffKey
	ksize int
	first []int32
	n     []int32
	k     []int32
	sym   []bool // k[i*ksize:][:n[i]] reads the same backwards
}

type coeffKey struct {
	in, out, lo, hi int
	f               Resample
}

// makeCoeffs is Pillow's precompute_coeffs followed by
// normalize_coeffs_8bpc, for an axis of inSize samples resampled to
// outSize (box 0..inSize), but only for the outputs lo <= i < hi. The
// fixed-point weights are the same as Pillow's for every output computed.
func makeCoeffs(c *coeffs, inSize, outSize, lo, hi int, f filter, scratch []float64) []float64 {
	key := coeffKey{inSize, outSize, lo, hi, f.id}
	if c.key == key && c.first != nil {
		return scratch
	}
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
	c.sym = grow(c.sym, n)
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
		// Drop the zero weights at both ends.
		a, b := 0, xmax
		for a < b && k[a] == 0 {
			a++
		}
		for b > a && k[b-1] == 0 {
			b--
		}
		copy(k, k[a:b])
		c.first[xx-lo] = int32(xmin + a)
		c.n[xx-lo] = int32(b - a)
		c.sym[xx-lo] = palindrome(k[:b-a])
	}
	c.key = key
	return scratch
}

// palindrome reports whether k, of at least 4 weights, reads the same
// backwards.
func palindrome(k []int32) bool {
	if len(k) < 4 {
		return false
	}
	for i, j := 0, len(k)-1; i < j; i, j = i+1, j-1 {
		if k[i] != k[j] {
			return false
		}
	}
	return true
}

// makeIdentity sets c to copy inputs lo..hi-1 to outputs 0..hi-lo-1: one
// tap of weight 1.0 each, which the 8-bit rounding returns unchanged.
func makeIdentity(c *coeffs, size, lo, hi int) {
	key := coeffKey{size, size, lo, hi, identity}
	if c.key == key && c.first != nil {
		return
	}
	n := hi - lo
	c.ksize = 1
	c.first = grow(c.first, n)
	c.n = grow(c.n, n)
	c.k = grow(c.k, n)
	c.sym = grow(c.sym, n)
	for i := range n {
		c.first[i], c.n[i], c.k[i], c.sym[i] = int32(lo+i), 1, 1<<precision, false
	}
	c.key = key
}

// span is the range of inputs that c's outputs read: [lo, hi), empty when
// no output has a non-zero weight.
func (c *coeffs) span() (lo, hi int) {
	lo, hi = math.MaxInt, 0
	for i, n := range c.n {
		if n > 0 {
			lo = min(lo, int(c.first[i]))
			hi = max(hi, int(c.first[i]+n))
		}
	}
	if hi == 0 {
		return 0, 0
	}
	return lo, hi
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

// Two 32-bit sums ride in one uint64 (SWAR): a + b·2³² summed over taps
// with uint64 arithmetic is, modulo 2⁶⁴, Σa + Σb·2³², and as long as each
// sum fits in an int32 (Pillow's own accumulator type) both come back
// exactly. One multiplication thus does two of Pillow's multiply-adds.

// halfPair is Pillow's rounding half (1 << (precision-1)) in both lanes.
const halfPair = 1<<(precision-1) | 1<<(precision-1+32)

// lanes splits a pair of sums: the low lane is the low 32 bits; the high
// lane is what is left once the (signed) low lane is taken off.
func lanes(s uint64) (lo, hi int32) {
	lo = int32(uint32(s))
	hi = int32(uint32((s - uint64(int64(lo))) >> 32))
	return lo, hi
}

// pairSource is a rowSource that can also write rows y and y+1 together
// into the lanes of one uint64 per value (row y in the low 32 bits, as
// resample's horizontal pass takes them), for the y where pairAt says so.
type pairSource interface {
	rowSource
	pairAt(y int) bool
	rgbPair(dst []uint64, y, x0, x1 int)
}

// resampleScratch holds the buffers of one resize, reused across calls.
type resampleScratch struct {
	hc, vc coeffs
	f64    []float64
	rows   []byte   // two source rows, packed RGB
	pair   []uint64 // two pairs of rows, one row in each 32-bit lane
	tmp    []uint64 // the horizontal pass's output rows, lanes (i, i+half)
	acc    []uint64 // one row of the vertical pass's sums
	sums   []uint64 // the horizontal pass's sums for two pairs of rows

	// resampleRGBX's buffers
	taps  []int32   // per output: byte offset into quad, number of taps
	quad  []byte    // four source rows, interleaved
	rows4 [4][]byte // four source rows, packed RGB
	mid   []byte    // the horizontal pass's output, RGBX rows
}

// resample is Pillow's ImagingResample (two passes, horizontal then
// vertical, 8-bit rounding and clipping between them, a pass skipped when
// its size does not change) of the sw×sh image src to dw×dh, computing only
// the output pixels in win (a non-empty sub-rectangle of dw×dh) into dst
// (win.Dx()×win.Dy() RGB, stride 3·win.Dx()). Every pixel computed is
// bit-identical to Pillow's; only the source rows and columns that those
// pixels depend on are read.
//
// The horizontal pass takes source rows two at a time, one in each lane of
// a uint64 (see halfPair), two such pairs a call, and writes its output row
// i of 3·ow values as half = ⌈3·ow/2⌉ uint64s holding values j and j+half;
// the vertical pass then sums those pairs, again two values a
// multiplication. Sources that can (JPEG 4:2:0 planes, 8-bit RGBA and
// gray: pairSource) write their row pairs straight into the lanes.
func resample(dst []byte, src rowSource, sw, sh, dw, dh int, win image.Rectangle, f filter, s *resampleScratch) {
	ow, oh := win.Dx(), win.Dy()
	if dw != sw {
		s.f64 = makeCoeffs(&s.hc, sw, dw, win.Min.X, win.Max.X, f, s.f64)
	} else {
		makeIdentity(&s.hc, sw, win.Min.X, win.Max.X)
	}
	if dh != sh {
		s.f64 = makeCoeffs(&s.vc, sh, dh, win.Min.Y, win.Max.Y, f, s.f64)
	} else {
		makeIdentity(&s.vc, sh, win.Min.Y, win.Max.Y)
	}
	x0, x1 := s.hc.span()
	y0, y1 := s.vc.span()
	n3 := 3 * (x1 - x0)
	half := (3*ow + 1) / 2
	s.rows = grow(s.rows, 2*n3)
	s.pair = grow(s.pair, 2*n3)
	s.tmp = grow(s.tmp, (y1-y0+1)*half) // one spare row for the odd last lane
	s.sums = grow(s.sums, 6*ow)
	ps, _ := src.(pairSource)
	// fill writes rows y and y+1 into the lanes of pair; rows before y0
	// or from y1 on are left out (their lane holds garbage, never read).
	fill := func(pair []uint64, y int) {
		if y >= y0 && ps != nil && y+1 < y1 && ps.pairAt(y) {
			ps.rgbPair(pair, y, x0, x1)
			return
		}
		r0, r1 := s.rows[:n3], s.rows[n3:2*n3]
		if y >= y0 {
			src.rgbRow(r0, y, x0, x1)
		}
		if y+1 < y1 {
			src.rgbRow(r1, y+1, x0, x1)
		}
		for i, v := range r0 {
			pair[i] = uint64(v) | uint64(r1[i])<<32
		}
	}
	// row is row y-y0 of tmp, or the spare (last) row for y outside y0..y1.
	row := func(y int) []uint64 {
		if y < y0 || y >= y1 {
			y = y1
		}
		return s.tmp[(y-y0)*half:][:half]
	}
	y := y0
	if ps != nil && y+1 < y1 && !ps.pairAt(y) && ps.pairAt(y+1) {
		y-- // the first row on its own (as the high lane of a pair), then aligned pairs
	}
	pa, pb := s.pair[:n3], s.pair[n3:2*n3]
	for ; y+2 < y1; y += 4 { // four rows at a time
		fill(pa, y)
		fill(pb, y+2)
		horizontalQuad([4][]uint64{row(y), row(y + 1), row(y + 2), row(y + 3)}, pa, pb, &s.hc, x0, ow, s.sums)
	}
	if y < y1 {
		fill(pa, y)
		horizontalPair(row(y), row(y+1), pa, &s.hc, x0, ow, s.sums)
	}
	s.acc = grow(s.acc, half)
	vertical(dst, s.tmp, &s.vc, y0, ow, oh, s.acc)
}

// horizontalPair is ImagingResampleHorizontal_8bpc for 3 bands on two rows
// at once: pair holds source columns x0... of both rows, one in each lane;
// their ow outputs go to t0 and t1 in the vertical pass's layout (value i
// of a row in the low lane of element i, or the high lane of element
// i-half). sums is scratch of 3·ow.
func horizontalPair(t0, t1, pair []uint64, c *coeffs, x0, ow int, sums []uint64) {
	sums = sums[:3*ow]
	for xx := range ow {
		n := int(c.n[xx])
		f := 3 * (int(c.first[xx]) - x0)
		if n == 0 {
			f = 0
		}
		k := c.k[xx*c.ksize:][:n]
		p := pair[f:][:3*n]
		o := sums[3*xx : 3*xx+3 : 3*xx+3]
		if c.sym[xx] {
			o[0], o[1], o[2] = dot3Sym(p, k)
		} else {
			o[0], o[1], o[2] = dot3(p, k)
		}
	}
	unpackPair(t0, t1, sums)
}

// horizontalQuad is horizontalPair for four rows: pa holds rows 0 and 1
// (t[0], t[1]), pb rows 2 and 3 (t[2], t[3]), sharing each weight's load
// and each output's bookkeeping. sums is scratch of 6·ow.
func horizontalQuad(t [4][]uint64, pa, pb []uint64, c *coeffs, x0, ow int, sums []uint64) {
	sa, sb := sums[:3*ow], sums[3*ow:6*ow]
	for xx := range ow {
		n := int(c.n[xx])
		f := 3 * (int(c.first[xx]) - x0)
		if n == 0 {
			f = 0
		}
		k := c.k[xx*c.ksize:][:n]
		p, q := pa[f:][:3*n], pb[f:][:3*n]
		a, b := sa[3*xx:3*xx+3:3*xx+3], sb[3*xx:3*xx+3:3*xx+3]
		if c.sym[xx] {
			a[0], a[1], a[2], b[0], b[1], b[2] = dot6Sym(p, q, k)
		} else {
			a[0], a[1], a[2], b[0], b[1], b[2] = dot6(p, q, k)
		}
	}
	unpackPair(t[0], t[1], sa)
	unpackPair(t[2], t[3], sb)
}

// unpackPair stores the 3·ow pair sums of horizontalPair in rows t0 (low
// lanes) and t1 (high lanes), clipped to 8 bits, in the vertical pass's
// layout: value i in the low lane of element i, or the high lane of
// element i-half.
func unpackPair(t0, t1, sums []uint64) {
	half := len(t0)
	t1 = t1[:half]
	lo, hi := sums[:half], sums[half:]
	for j, s := range lo {
		a, b := lanes(s)
		t0[j], t1[j] = uint64(clip8(a)), uint64(clip8(b))
	}
	for j, s := range hi {
		a, b := lanes(s)
		t0[j] |= uint64(clip8(a)) << 32
		t1[j] |= uint64(clip8(b)) << 32
	}
}

// dot6 is dot3 on two pairs of rows at once (p and q, same columns).
//
//go:noinline
func dot6(p, q []uint64, k []int32) (s0, s1, s2, s3, s4, s5 uint64) {
	s0, s1, s2, s3, s4, s5 = halfPair, halfPair, halfPair, halfPair, halfPair, halfPair
	n := len(k)
	p, q = p[:3*n], q[:3*n]
	for x, kv := range k {
		a := p[3*x : 3*x+3 : 3*x+3]
		b := q[3*x : 3*x+3 : 3*x+3]
		kk := uint64(int64(kv))
		s0 += a[0] * kk
		s1 += a[1] * kk
		s2 += a[2] * kk
		s3 += b[0] * kk
		s4 += b[1] * kk
		s5 += b[2] * kk
	}
	return
}

// dot6Sym is dot3Sym on two pairs of rows at once.
//
//go:noinline
func dot6Sym(p, q []uint64, k []int32) (s0, s1, s2, s3, s4, s5 uint64) {
	s0, s1, s2, s3, s4, s5 = halfPair, halfPair, halfPair, halfPair, halfPair, halfPair
	n := len(k)
	p, q = p[:3*n], q[:3*n]
	for x := 0; x < n/2; x++ {
		e := 3 * (n - 1 - x)
		a, a2 := p[3*x:3*x+3:3*x+3], p[e:e+3:e+3]
		b, b2 := q[3*x:3*x+3:3*x+3], q[e:e+3:e+3]
		kk := uint64(int64(k[x]))
		s0 += (a[0] + a2[0]) * kk
		s1 += (a[1] + a2[1]) * kk
		s2 += (a[2] + a2[2]) * kk
		s3 += (b[0] + b2[0]) * kk
		s4 += (b[1] + b2[1]) * kk
		s5 += (b[2] + b2[2]) * kk
	}
	if n&1 == 1 {
		x := n / 2
		a, b := p[3*x:3*x+3:3*x+3], q[3*x:3*x+3:3*x+3]
		kk := uint64(int64(k[x]))
		s0 += a[0] * kk
		s1 += a[1] * kk
		s2 += a[2] * kk
		s3 += b[0] * kk
		s4 += b[1] * kk
		s5 += b[2] * kk
	}
	return
}

// dot3 is the three sums of one output pixel of horizontalPair: p holds
// the pixels of its taps (3 values each), k their weights. It is kept out
// of line so that its sums stay in registers.
//
//go:noinline
func dot3(p []uint64, k []int32) (s0, s1, s2 uint64) {
	s0, s1, s2 = halfPair, halfPair, halfPair
	n := len(k)
	p = p[:3*n]
	x := 0
	for ; x+1 < n; x += 2 {
		q := p[3*x : 3*x+6 : 3*x+6]
		k0, k1 := uint64(int64(k[x])), uint64(int64(k[x+1]))
		s0 += q[0]*k0 + q[3]*k1
		s1 += q[1]*k0 + q[4]*k1
		s2 += q[2]*k0 + q[5]*k1
	}
	if x < n {
		q := p[3*x : 3*x+3 : 3*x+3]
		k0 := uint64(int64(k[x]))
		s0 += q[0] * k0
		s1 += q[1] * k0
		s2 += q[2] * k0
	}
	return s0, s1, s2
}

// dot3Sym is dot3 for symmetric weights (k[x] = k[n-1-x]): the two pixels
// that share a weight are added first (each lane stays below 511), then
// multiplied once.
//
//go:noinline
func dot3Sym(p []uint64, k []int32) (s0, s1, s2 uint64) {
	s0, s1, s2 = halfPair, halfPair, halfPair
	n := len(k)
	p = p[:3*n]
	for x := 0; x < n/2; x++ {
		a := p[3*x : 3*x+3 : 3*x+3]
		e := 3 * (n - 1 - x)
		b := p[e : e+3 : e+3]
		kk := uint64(int64(k[x]))
		s0 += (a[0] + b[0]) * kk
		s1 += (a[1] + b[1]) * kk
		s2 += (a[2] + b[2]) * kk
	}
	if n&1 == 1 {
		x := n / 2
		a := p[3*x : 3*x+3 : 3*x+3]
		kk := uint64(int64(k[x]))
		s0 += a[0] * kk
		s1 += a[1] * kk
		s2 += a[2] * kk
	}
	return s0, s1, s2
}

// vertical is ImagingResampleVertical_8bpc: output row yy of the window
// (3·ow values at dst[yy·3·ow:]) from the rows first-y0 ... of tmp (whose
// row 0 is input row y0, laid out by horizontalPair), four values of a row
// at a time. acc is scratch for one row of sums.
func vertical(dst []byte, tmp []uint64, c *coeffs, y0, ow, oh int, acc []uint64) {
	half := len(acc)
	n3 := 3 * ow
	for yy := 0; yy < oh; yy++ {
		off := (int(c.first[yy]) - y0) * half
		k := c.k[yy*c.ksize:][:c.n[yy]]
		sym := c.sym[yy]
		j := 0
		for ; j+4 <= half; j += 4 {
			a := acc[j : j+4 : j+4]
			if sym {
				a[0], a[1], a[2], a[3] = vdot4Sym(tmp, off+j, half, k)
			} else {
				a[0], a[1], a[2], a[3] = vdot4(tmp, off+j, half, k)
			}
		}
		for ; j < half; j++ {
			s := uint64(halfPair)
			for t, kv := range k {
				s += tmp[off+t*half+j] * uint64(int64(kv))
			}
			acc[j] = s
		}
		out := dst[yy*n3:][:n3]
		lo, hi := out[:half], out[half:]
		for j, s := range acc[:len(lo)] {
			a, _ := lanes(s)
			lo[j] = clip8(a)
		}
		for j, s := range acc[:len(hi)] {
			_, b := lanes(s)
			hi[j] = clip8(b)
		}
	}
}

// vdot4 is the pair sums of four neighbouring values of an output row of
// vertical: values tmp[off+t·half : off+t·half+4] of tap t, for each
// weight k[t]. It is kept out of line so that its sums stay in registers.
//
//go:noinline
func vdot4(tmp []uint64, off, half int, k []int32) (a0, a1, a2, a3 uint64) {
	a0, a1, a2, a3 = halfPair, halfPair, halfPair, halfPair
	for _, kv := range k {
		r := tmp[off : off+4 : off+4]
		kk := uint64(int64(kv))
		a0 += r[0] * kk
		a1 += r[1] * kk
		a2 += r[2] * kk
		a3 += r[3] * kk
		off += half
	}
	return a0, a1, a2, a3
}

// vdot4Sym is vdot4 for symmetric weights: rows t and n-1-t are added,
// then multiplied once (see dot3Sym).
//
//go:noinline
func vdot4Sym(tmp []uint64, off, half int, k []int32) (a0, a1, a2, a3 uint64) {
	a0, a1, a2, a3 = halfPair, halfPair, halfPair, halfPair
	n := len(k)
	end := off + (n-1)*half
	for _, kv := range k[:n/2] {
		r := tmp[off : off+4 : off+4]
		q := tmp[end : end+4 : end+4]
		kk := uint64(int64(kv))
		a0 += (r[0] + q[0]) * kk
		a1 += (r[1] + q[1]) * kk
		a2 += (r[2] + q[2]) * kk
		a3 += (r[3] + q[3]) * kk
		off += half
		end -= half
	}
	if n&1 == 1 {
		r := tmp[off : off+4 : off+4]
		kk := uint64(int64(k[n/2]))
		a0 += r[0] * kk
		a1 += r[1] * kk
		a2 += r[2] * kk
		a3 += r[3] * kk
	}
	return a0, a1, a2, a3
}
