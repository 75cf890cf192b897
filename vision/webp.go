package vision

import "image"

// webpRGB converts a lossy WebP's Y'CbCr 4:2:0 planes (as golang.org/x/image/webp
// returns them) to RGB the way libwebp does for Pillow: its "fancy"
// upsampler (UpsampleRgbLinePair, which pairs output rows 2k-1 and 2k
// between chroma rows k-1 and k and mirrors the first and last rows) and
// its 14-bit fixed-point BT.601 limited-range conversion (VP8YuvToRgb).
// x/image/webp leaves the planes as image.YCbCr, whose colour model is
// JFIF full range; read that way, colours would be several levels off.
//
// The result is *image.RGBA (opaque) or, with alpha, *image.NRGBA.
func webpRGB(m *image.YCbCr, alpha []byte, alphaStride int) image.Image {
	r := m.Rect
	w, h := r.Dx(), r.Dy()
	var pix []byte
	var out image.Image
	stride := 4 * w
	if alpha != nil {
		n := image.NewNRGBA(image.Rect(0, 0, w, h))
		pix, out = n.Pix, n
	} else {
		n := image.NewRGBA(image.Rect(0, 0, w, h))
		pix, out = n.Pix, n
	}
	ch := (h + 1) / 2
	us, vs := make([]int32, w), make([]int32, w)
	crow := func(plane []byte, k int) []byte { return plane[min(k, ch-1)*m.CStride:] }
	for y := 0; y < h; y++ {
		yrow := m.Y[y*m.YStride:][:w]
		dst := pix[y*stride:][:4*w]
		switch {
		case y == 0: // first row: chroma row 0 on its own
			webpRow(dst, yrow, crow(m.Cb, 0), crow(m.Cr, 0), crow(m.Cb, 0), crow(m.Cr, 0), false, us, vs)
		case y&1 == 1 && y == h-1: // last row of an even height: last chroma row on its own
			k := (y - 1) / 2
			webpRow(dst, yrow, crow(m.Cb, k), crow(m.Cr, k), crow(m.Cb, k), crow(m.Cr, k), false, us, vs)
		case y&1 == 1: // upper row of the pair between chroma rows k and k+1
			k := (y - 1) / 2
			webpRow(dst, yrow, crow(m.Cb, k), crow(m.Cr, k), crow(m.Cb, k+1), crow(m.Cr, k+1), false, us, vs)
		default: // lower row of the pair between chroma rows k-1 and k
			k := y / 2
			webpRow(dst, yrow, crow(m.Cb, k-1), crow(m.Cr, k-1), crow(m.Cb, k), crow(m.Cr, k), true, us, vs)
		}
		for x := 0; x < w; x++ {
			a := uint8(0xff)
			if alpha != nil {
				a = alpha[y*alphaStride+x]
			}
			dst[4*x+3] = a
		}
	}
	return out
}

// webpRow is one output row of libwebp's UpsampleRgbLinePair: the "top"
// row (nearer the chroma rows tu, tv) or, with bottom, the "bottom" row
// (nearer cu, cv), each chroma sample weighted 9:3:3:1 with libwebp's
// rounding; RGB written at dst[4x:4x+3]. us and vs are scratch of len(yrow).
func webpRow(dst, yrow, tu, tv, cu, cv []byte, bottom bool, us, vs []int32) {
	n := len(yrow)
	up := func(t, c []byte, out []int32) {
		tl, l := int32(t[0]), int32(c[0])
		if bottom {
			out[0] = (3*l + tl + 2) >> 2
		} else {
			out[0] = (3*tl + l + 2) >> 2
		}
		last := (n - 1) >> 1
		for x := 1; x <= last; x++ {
			tt, uv := int32(t[x]), int32(c[x])
			avg := tl + tt + l + uv + 8
			d12 := (avg + 2*(tt+l)) >> 3
			d03 := (avg + 2*(tl+uv)) >> 3
			if bottom {
				out[2*x-1] = (d03 + l) >> 1
				out[2*x] = (d12 + uv) >> 1
			} else {
				out[2*x-1] = (d12 + tl) >> 1
				out[2*x] = (d03 + tt) >> 1
			}
			tl, l = tt, uv
		}
		if n&1 == 0 {
			if bottom {
				out[n-1] = (3*l + tl + 2) >> 2
			} else {
				out[n-1] = (3*tl + l + 2) >> 2
			}
		}
	}
	up(tu, cu, us)
	up(tv, cv, vs)
	for x := 0; x < n; x++ {
		yy := int32(yrow[x]) * 19077 >> 8
		u, v := us[x], vs[x]
		dst[4*x] = webpClip(yy + v*26149>>8 - 14234)
		dst[4*x+1] = webpClip(yy - u*6419>>8 - v*13320>>8 + 8708)
		dst[4*x+2] = webpClip(yy + u*33050>>8 - 17685)
	}
}

// webpClip is libwebp's VP8Clip8 on a value with 6 fractional bits.
func webpClip(v int32) uint8 {
	if v&^(256<<6-1) == 0 {
		return uint8(v >> 6)
	}
	if v < 0 {
		return 0
	}
	return 255
}
