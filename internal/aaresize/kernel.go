package aaresize

import "math"

// axis holds the taps of one axis resized from in to out samples, laid
// out as torch 1.13 lays them out: output i sums size[i] inputs from
// start[i] on, weighted by w[i·stride+j]. stride is the most taps an
// output can have, 2·⌈support⌉+1.
type axis struct {
	in, out int
	start   []int
	size    []int
	stride  int
	w       []float32
}

// newAxis computes the taps of an axis resized from in to out samples
// with torch's antialiased triangle filter (align_corners=False, no scale
// factor given): newScaledAxis with no factor.
func newAxis(in, out int) *axis { return newScaledAxis(in, out, 0) }

// newScaledAxis computes the taps of an axis resized from in to out
// samples with torch's antialiased triangle filter (align_corners=False).
// factor is F.interpolate's scale_factor for the axis, or 0 when a size
// was given: torch's area_pixel_compute_scale takes float32(1/factor) as
// the input step per output sample when a factor is given (out being
// ⌊in·factor⌋, the step differs from in/out), float32(in)/float32(out)
// otherwise. Each expression rounds where torch's float32 code
// rounds: scale, support, the centre and the weights are float32; the
// products by (i + 0.5) and by 1/scale, and the additions of 0.5, are
// float64.
//
// torch 1.13 does not bound a window by stride: were rounding to make one
// a tap wider, the weight would spill into the next output's first slot
// (and be overwritten there). w has stride spare slots at its end so
// that the same layout would give the same sums; TestAxisWindows finds
// no such window for sizes up to 128 (nor does a scan up to 1024).
func newScaledAxis(in, out int, factor float64) *axis {
	scale := float32(in) / float32(out)
	if factor > 0 {
		scale = float32(1 / factor)
	}
	support := float32(1) // (interp_size·0.5), interp_size 2
	invscale := float32(1)
	if scale >= 1 {
		support = float32(1.0 * float64(scale))
		invscale = float32(1 / float64(scale))
	}
	stride := int(math.Ceil(float64(support)))*2 + 1
	a := &axis{
		in:     in,
		out:    out,
		start:  make([]int, out),
		size:   make([]int, out),
		stride: stride,
		w:      make([]float32, (out+1)*stride),
	}
	for i := range out {
		center := float32(float64(scale) * (float64(i) + 0.5))
		xmin := max(int(float64(center-support)+0.5), 0)
		xsize := min(int(float64(center+support)+0.5), in) - xmin
		wt := a.w[i*stride:]
		var total float32
		j := 0
		for ; j < xsize; j++ {
			v := triangle(float32((float64(float32(j+xmin)-center) + 0.5) * float64(invscale)))
			wt[j] = v
			total += v
		}
		if total != 0 {
			for j = 0; j < xsize; j++ {
				wt[j] /= total
			}
		}
		for ; j < stride; j++ {
			wt[j] = 0
		}
		a.start[i] = xmin
		a.size[i] = xsize
	}
	return a
}

// triangle is the bilinear filter, max(0, 1-|x|), rounded as torch's
// float32 filter rounds it (1-|x| in float64, then float32).
func triangle(x float32) float32 {
	x = float32(math.Abs(float64(x)))
	if x < 1 {
		return float32(1 - float64(x))
	}
	return 0
}

// resample resizes src [outer, a.in, inner] along its middle axis into
// dst [outer, a.out, inner]. Each output is its first tap's product, then
// each further tap added in order, as torch 1.13's x86-64 build computes
// it: unfused, the products are rounded before each addition (torch's
// kernel for CPUs without AVX2); fused, as its AVX2 and AVX-512 kernels
// were compiled (the loop over the taps vectorised four at a time, then
// a scalar remainder), the taps after the first go by groups of four whose
// rounded products are added in order, and the (n-1) mod 4 taps left at
// the end are fused multiply-adds (fma32). torch computes the same sums
// whatever the memory order, so inner may hold channels (channels last)
// or be 1 (resampling along the last axis).
func resample(dst, src []float32, outer, inner int, a *axis, fused bool) {
	inLen, outLen := a.in*inner, a.out*inner
	for o := range outer {
		s := src[o*inLen : (o+1)*inLen]
		d := dst[o*outLen : (o+1)*outLen]
		for i := range a.out {
			row := d[i*inner : (i+1)*inner]
			wt := a.w[i*a.stride:]
			base := a.start[i] * inner
			x := s[base:][:len(row)]
			w0 := wt[0]
			for k := range row {
				row[k] = x[k] * w0
			}
			n := a.size[i]
			fusedFrom := n
			if fused {
				fusedFrom = 1 + (n-1)/4*4
			}
			j := 1
			for ; j < fusedFrom; j++ {
				x := s[base+j*inner:][:len(row)]
				wj := wt[j]
				for k := range row {
					row[k] += float32(x[k] * wj)
				}
			}
			for ; j < n; j++ {
				x := s[base+j*inner:][:len(row)]
				wj := wt[j]
				for k := range row {
					row[k] = fma32(x[k], wj, row[k])
				}
			}
		}
	}
}

// fma32 returns a·b+c rounded once to float32, as a fused multiply-add
// instruction computes it. The product of two float32s is exact in
// float64; their sum with c is rounded to float64 and then to float32,
// and that double rounding errs only when the float64 sum falls exactly
// halfway between two float32s (or, below float32's normal range, on some
// other rounding boundary) while the exact sum does not. Then the sum is
// moved off that point towards the exact value (rounding to odd, with the
// exact error from TwoSum), and the conversion rounds it right.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	q := float64(c)
	s := p + q
	u := math.Float64bits(s)
	if u&(1<<29-1) == 1<<28 || math.Abs(s) < 0x1p-126 {
		v := s - p
		e := (p - (s - v)) + (q - v) // p + q - s, exactly
		if e != 0 && u&1 == 0 {
			if (e > 0) == (s > 0) {
				u++
			} else {
				u--
			}
			s = math.Float64frombits(u)
		}
	}
	return float32(s)
}
