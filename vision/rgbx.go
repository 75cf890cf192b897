package vision

import (
	"image"

	"github.com/conditionhq/condition/vision/internal/rgbx"
)

// The vector path of the resampler. It computes what resample computes,
// to the byte, with other buffer layouts, made for SIMD kernels:
//
//   - quad rows: four source rows interleaved column by column, 16 bytes a
//     column (row r's R, G, B, 0 at bytes 4r..4r+3), so that one 16-byte
//     load holds one tap of four rows' three channels;
//   - RGBX rows: 4 bytes a pixel (R, G, B and an unspecified byte), rows
//     padded to a multiple of 64 bytes, for the horizontal pass's output,
//     the vertical pass's input and output, and the value table's input.
//
// The sums are Pillow's: 32-bit products of 8-bit values and the same
// fixed-point weights (coeffs), added to the rounding half in 32 bits,
// shifted right by precision bits and clipped to 0..255. Integer sums do
// not depend on the order of their terms, and Pillow's never leave the
// int32 range, so 32-bit lanes give exactly resample's values (which sums
// the same products two lanes to a uint64).
//
// The kernels and their Go twins (the reference loops the assembly must
// match) are in internal/rgbx, a package of its own so that this one can
// use cgo (libjpeg-turbo's decoders) beside them.

// rgbxStride is the byte stride of RGBX rows of w pixels.
func rgbxStride(w int) int { return (4*w + rgbx.Align - 1) &^ (rgbx.Align - 1) }

// useRGBX says whether ApplyInto resizes with the vector kernels.
func useRGBX() bool { return rgbx.Impl() != "go" }

// resampleRGBX is resample (same arguments, same pixels) writing dst as
// win.Dy() RGBX rows of stride rgbxStride(win.Dx()).
func resampleRGBX(dst []byte, src rowSource, sw, sh, dw, dh int, win image.Rectangle, f filter, s *resampleScratch) {
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
	nx := x1 - x0
	nx4 := (nx + 3) &^ 3
	ws := rgbxStride(ow)
	// Each output's taps: the byte offset of its first column in a quad
	// row, and their number.
	s.taps = grow(s.taps, 2*ow)
	for xx := range ow {
		n := s.hc.n[xx]
		off := int32(0)
		if n > 0 {
			off = 16 * (s.hc.first[xx] - int32(x0))
		}
		s.taps[2*xx], s.taps[2*xx+1] = off, n
	}
	s.quad = grow(s.quad, 16*max(nx4, 8))
	for r := range s.rows4 {
		s.rows4[r] = grow(s.rows4[r], 3*nx4+16)
	}
	// JPEG 4:2:0 rows are converted in pairs of an even row and the next:
	// start at one if y0 is the second of a pair.
	if r, ok := src.(*rgbRows); ok && y0 > 0 && y0 < y1 && r.kind == rowsYCbCr && !r.pairAt(y0) && r.pairAt(y0-1) {
		y0--
	}
	groups := (y1 - y0 + 3) / 4
	s.mid = grow(s.mid, 4*max(groups, 1)*ws)
	for g := range groups {
		y := y0 + 4*g
		s.fillQuad(src, y, min(4, y1-y), x0, x1)
		rgbx.Hconv(s.mid[4*g*ws:][:4*ws], ws, s.quad, s.taps[:2*ow], s.hc.k, s.hc.ksize)
	}
	for yy := range oh {
		out := dst[yy*ws:][:ws]
		n := int(s.vc.n[yy])
		if n == 0 {
			clear(out) // clip8 of the rounding half alone
			continue
		}
		r := int(s.vc.first[yy]) - y0
		rgbx.Vconv(out, s.mid[r*ws:][:(n-1)*ws+ws], ws, s.vc.k[yy*s.vc.ksize:][:n])
	}
}

// fillQuad writes the quad row of source rows y ... y+nr-1 (nr <= 4;
// the rows past nr are left as they were), columns x0..x1-1, into s.quad.
// 8-bit RGBA and NRGBA rows are read in place; other layouts through
// rgbRow.
func (s *resampleScratch) fillQuad(src rowSource, y, nr, x0, x1 int) {
	nx := x1 - x0
	n4 := nx &^ 3
	if r, ok := src.(*rgbRows); ok && r.kind == rowsYCbCr && r.pairAt(y) && (nr <= 2 || r.pairAt(y+2)) {
		r.ycc.quadPair(s.quad, 0, y, x0, x1, r.tmp)
		if nr > 2 {
			r.ycc.quadPair(s.quad, 2, y+2, x0, x1, r.tmp)
		}
		return
	}
	if r, ok := src.(*rgbRows); ok && nr == 4 && n4 > 0 && (r.kind == rowsBytes || r.kind == rowsRGBA) {
		var rows [4][]byte
		for i := range rows {
			rows[i] = r.pix[(y+i)*r.strd+4*x0:][:4*n4]
		}
		alpha := rgbx.QuadRGBA(s.quad[:16*n4], rows)
		if r.kind == rowsBytes || alpha == 0xff {
			if n4 < nx { // the last columns, through rgbRow
				for i := range rows {
					r.rgbRow(s.rows4[i][:3*(nx-n4)], y+i, x0+n4, x1)
				}
				rgbx.QuadRGBGeneric(s.quad[16*n4:][:16*(nx-n4)], [4][]byte{s.rows4[0], s.rows4[1], s.rows4[2], s.rows4[3]})
			}
			return
		}
	}
	for i := range nr {
		src.rgbRow(s.rows4[i][:3*nx], y+i, x0, x1)
	}
	nx4 := (nx + 3) &^ 3
	rgbx.QuadRGB(s.quad[:16*nx4], [4][]byte{s.rows4[0], s.rows4[1], s.rows4[2], s.rows4[3]})
}

// normaliseRGBX is ApplyInto's last step for RGBX rows: dst, 3 planes of
// oh×ow, gets lut[c][v] for each value v of channel c of the window win8
// (rows of stride ws; output (i, j) is window pixel (top+i, left+j) in
// resized coordinates) and lut[c][0] outside it.
func normaliseRGBX(dst []float32, oh, ow, top, left int, win image.Rectangle, win8 []byte, ws int, lut *[3][256]float32) {
	plane := oh * ow
	pr, pg, pb := dst[:plane], dst[plane:2*plane], dst[2*plane:3*plane]
	x0, x1 := win.Min.X-left, win.Max.X-left // window columns in output coordinates
	for i := range oh {
		r, g, b := pr[i*ow:][:ow], pg[i*ow:][:ow], pb[i*ow:][:ow]
		y := top + i
		if y < win.Min.Y || y >= win.Max.Y {
			fill(r, lut[0][0])
			fill(g, lut[1][0])
			fill(b, lut[2][0])
			continue
		}
		fill(r[:x0], lut[0][0])
		fill(g[:x0], lut[1][0])
		fill(b[:x0], lut[2][0])
		rgbx.Lut(r[x0:x1], g[x0:x1], b[x0:x1], win8[(y-win.Min.Y)*ws:][:4*(x1-x0)], lut)
		fill(r[x1:], lut[0][0])
		fill(g[x1:], lut[1][0])
		fill(b[x1:], lut[2][0])
	}
}

func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}

// quadPair writes rows y and y+1 (a pair for pairAt: 4:2:0, fancy
// upsampling, y even in the image), columns x0..x1-1, into slots slot and
// slot+1 of the quad row q.
func (g *yccPlanes) quadPair(q []byte, slot, y, x0, x1 int, tmp *convScratch) {
	cw := g.cw
	cy := (y+g.r.Min.Y)>>1 - g.cy0
	rows := [3]int{cy, max(0, cy-1), min(g.ch-1, cy+1)}
	m := cw + 2 + 8
	tmp.rows = grow(tmp.rows, 6*m)
	pc := tmp.rows[:6*m]
	for p, plane := range [2][]byte{g.Cb, g.Cr} {
		for k, row := range rows {
			dst := pc[(3*p+k)*m:][:m]
			src := plane[row*g.cStride:][:cw]
			copy(dst[1:], src)
			dst[0], dst[cw+1] = src[0], src[cw-1]
		}
	}
	yT := g.Y[y*g.yStride:][:x1]
	yB := g.Y[(y+1)*g.yStride:][:x1]
	x := x0
	if x&1 == 1 {
		rgbx.QuadYCCGeneric(q[4*slot:], yT[x:], yB[x:], pc, m, x, 1)
		x++
	}
	if x < x1 {
		rgbx.QuadYCC(q[16*(x-x0)+4*slot:], yT[x:], yB[x:], pc, m, x, x1-x)
	}
}
