// Package aaresize resizes float32 grids exactly as torch's antialiased
// bilinear interpolation does: F.interpolate(x, size=(h, w),
// mode="bilinear", align_corners=False, antialias=True) on the CPU, the
// kernel torch names _upsample_bilinear2d_aa, as torch 1.13 computes it.
//
// SigLIP 2 NaFlex resizes its learned positional-embedding table with that
// call for every image's patch grid (PositionEmbeddings). No Go library
// computes torch's antialiased kernel: a triangle filter whose support
// widens with the downscaling factor (as in Pillow), separable, width
// first, with weights computed and normalised in float32 from float64
// intermediates, and float32 sums. This package follows those steps one
// by one, so that its outputs equal torch's to the last bit.
//
// How torch rounds the sums depends on how its CPU kernel was compiled.
// Its AVX2 and AVX-512 kernels (the ones any recent x86-64 CPU runs) sum
// an output's taps after the first four at a time, rounding each product
// and adding them in order, and the taps left over with fused
// multiply-adds; its kernel for CPUs without AVX2 rounds every product.
// This package computes the AVX2 kernel's sums in portable Go, whatever
// the CPU: on every case in testdata its outputs equal, bit for bit, those
// of torch 1.13.1 as Debian builds it (GCC 12). Other builds may round
// some sums differently, by about a unit in the last place.
package aaresize

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// ErrShape is what PositionEmbeddings's errors wrap when sizes or buffer
// lengths do not fit.
var ErrShape = errors.New("aaresize: bad shape")

// Bilinear resizes src [c, inH, inW] (row-major) into dst [c, outH, outW]
// as torch's F.interpolate(src, size=(outH, outW), mode="bilinear",
// align_corners=False, antialias=True) does for float32 input: each of the c
// planes is resampled along its width (inW → outW) into a temporary
// [c, inH, outW], then along its height (inH → outH); both passes run even
// when a size does not change (they then copy). Up- and downscaling both
// work, in either direction independently.
//
// Every size must be at least 1 and len(src), len(dst) must be exactly
// c·inH·inW and c·outH·outW; otherwise Bilinear panics with a constant
// message that starts with "aaresize: ". dst and src must not overlap.
func Bilinear(dst, src []float32, c, inH, inW, outH, outW int) {
	if c < 1 || inH < 1 || inW < 1 || outH < 1 || outW < 1 {
		panic(errNonPositive)
	}
	nTmp := checkLens(dst, src, c, inH, inW, outH, outW)
	bilinear(dst, src, make([]float32, nTmp), c, inH, inW, outH, outW, true)
}

// ScaledSize returns the number of samples torch's F.interpolate gives an
// axis of in samples for the scale_factor factor (recompute_scale_factor
// unset): in·factor in float64, truncated.
func ScaledSize(in int, factor float64) int { return int(float64(in) * factor) }

// BilinearScaled resizes src [c, inH, inW] into dst [c, ScaledSize(inH,
// factorH), ScaledSize(inW, factorW)] as torch's F.interpolate(src,
// scale_factor=(factorH, factorW), mode="bilinear", align_corners=False,
// antialias=True) does (recompute_scale_factor unset, torch's default):
// as Bilinear, but each axis's input step per output sample is 1/factor,
// as torch takes it, not the ratio of the sizes. DINOv2-style models ask
// for a factor a little over the wanted ratio (interpolate_offset) so that
// the truncated size comes out right; the step, and so every weight, then
// differs slightly from a resize to that size.
//
// The factors must be positive and finite, the output sizes at least 1,
// and the lengths as Bilinear's; otherwise it panics with a constant
// message that starts with "aaresize: ".
func BilinearScaled(dst, src []float32, c, inH, inW int, factorH, factorW float64) {
	if !(factorH > 0) || !(factorW > 0) || math.IsInf(factorH, 0) || math.IsInf(factorW, 0) {
		panic(errFactor)
	}
	if c < 1 || inH < 1 || inW < 1 {
		panic(errNonPositive)
	}
	if float64(inH)*factorH >= math.MaxInt32 || float64(inW)*factorW >= math.MaxInt32 {
		panic(errTooLarge)
	}
	outH, outW := ScaledSize(inH, factorH), ScaledSize(inW, factorW)
	if outH < 1 || outW < 1 {
		panic(errNonPositive)
	}
	nTmp := checkLens(dst, src, c, inH, inW, outH, outW)
	tmp := make([]float32, nTmp)
	resample(tmp, src, c*inH, 1, newScaledAxis(inW, outW, factorW), true)
	resample(dst, tmp, c, outW, newScaledAxis(inH, outH, factorH), true)
}

// bilinear is Bilinear on checked arguments, with tmp [c, inH, outW], the
// sums rounded as torch's AVX2 and AVX-512 kernels round them (fused) or
// as its kernel for CPUs without AVX2 does (see resample).
func bilinear(dst, src, tmp []float32, c, inH, inW, outH, outW int, fused bool) {
	resample(tmp, src, c*inH, 1, newAxis(inW, outW), fused)
	resample(dst, tmp, c, outW, newAxis(inH, outH), fused)
}

// The panic messages of Bilinear.
const (
	errNonPositive = "aaresize: a size is less than 1"
	errTooLarge    = "aaresize: sizes overflow int"
	errSrcLen      = "aaresize: len(src) is not c·inH·inW"
	errDstLen      = "aaresize: len(dst) is not c·outH·outW"
	errFactor      = "aaresize: a scale factor is not a positive finite number"
)

// PositionEmbeddings resizes a positional-embedding table as SigLIP 2
// NaFlex does for one image (transformers'
// Siglip2VisionEmbeddings.resize_positional_embeddings): table
// [side·side, d] (row-major, rows in raster order of a side×side grid) is
// resized with Bilinear's arithmetic to the image's h×w patch grid, giving
// dst's first h·w rows [h·w, d] in raster order; the rows after them, up
// to maxPatches, are copies of the first resized row. dst is
// [maxPatches, d].
//
// It returns an error wrapping ErrShape when a size is less than 1, when
// h·w exceeds maxPatches, or when len(table) is not side·side·d or len(dst)
// is not maxPatches·d.
func PositionEmbeddings(dst, table []float32, side, d, h, w, maxPatches int) error {
	if side < 1 || d < 1 || h < 1 || w < 1 || maxPatches < 1 {
		return fmt.Errorf("%w: side %d, d %d, grid %d×%d and max patches %d must all be at least 1",
			ErrShape, side, d, h, w, maxPatches)
	}
	nTable, ok1 := mul(side, side, d)
	nDst, ok2 := mul(maxPatches, d, 1)
	nTmp, ok3 := mul(side, w, d)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("%w: sizes overflow int", ErrShape)
	}
	if hw, ok := mul(h, w, 1); !ok || hw > maxPatches {
		return fmt.Errorf("%w: grid %d×%d has more than %d patches", ErrShape, h, w, maxPatches)
	}
	if len(table) != nTable {
		return fmt.Errorf("%w: table has %d values, want %d·%d·%d = %d", ErrShape, len(table), side, side, d, nTable)
	}
	if len(dst) != nDst {
		return fmt.Errorf("%w: dst has %d values, want %d·%d = %d", ErrShape, len(dst), maxPatches, d, nDst)
	}
	// The table is the grid in channels-last order, [side, side, d]; torch
	// resizes its permutation [d, side, side], whose every value is the
	// same sum of the same products, so resampling it in place of the
	// permutation changes no bit and gives [h, w, d] = [h·w, d] directly.
	tmp := make([]float32, nTmp)
	resample(tmp, table, side, d, newAxis(side, w), true)
	resample(dst[:h*w*d], tmp, 1, w*d, newAxis(side, h), true)
	first := dst[:d]
	for r := h * w; r < maxPatches; r++ {
		copy(dst[r*d:(r+1)*d], first)
	}
	return nil
}

// mul returns a·b·c for non-negative sizes, and whether it fits an int.
func mul(a, b, c int) (int, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt {
		return 0, false
	}
	hi, lo = bits.Mul64(lo, uint64(c))
	if hi != 0 || lo > math.MaxInt {
		return 0, false
	}
	return int(lo), true
}

// checkLens panics unless len(src) is c·inH·inW and len(dst) c·outH·outW,
// all of them and c·inH·outW within an int; it returns c·inH·outW, the
// size of the pass between the two.
func checkLens(dst, src []float32, c, inH, inW, outH, outW int) int {
	nIn, okIn := mul(c, inH, inW)
	nOut, okOut := mul(c, outH, outW)
	nTmp, okTmp := mul(c, inH, outW)
	if !okIn || !okOut || !okTmp {
		panic(errTooLarge)
	}
	if len(src) != nIn {
		panic(errSrcLen)
	}
	if len(dst) != nOut {
		panic(errDstLen)
	}
	return nTmp
}
