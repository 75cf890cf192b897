package vision

import "image"

// orient returns img transposed for EXIF orientation o (2 to 8), as Pillow's
// ImageOps.exif_transpose does: 2 mirror, 3 rotate 180°, 4 flip, 5
// transpose, 6 rotate 90° clockwise, 7 transverse, 8 rotate 90°
// counter-clockwise. The result is 0-based. Gray, 16-bit, RGBA, NRGBA,
// CMYK and paletted images keep their type; others (YCbCr from JPEG) are
// converted to RGB first, as libjpeg hands Pillow RGB before it transposes.
func orient(img image.Image, o int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	r := image.Rect(0, 0, ow, oh)
	switch m := img.(type) {
	case *image.Gray:
		out := image.NewGray(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 1, o)
		return out
	case *image.Gray16:
		out := image.NewGray16(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 2, o)
		return out
	case *image.RGBA:
		out := image.NewRGBA(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4, o)
		return out
	case *image.NRGBA:
		out := image.NewNRGBA(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4, o)
		return out
	case *image.CMYK:
		out := image.NewCMYK(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 4, o)
		return out
	case *image.RGBA64:
		out := image.NewRGBA64(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 8, o)
		return out
	case *image.NRGBA64:
		out := image.NewNRGBA64(r)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 8, o)
		return out
	case *image.Paletted:
		out := image.NewPaletted(r, m.Palette)
		transpose(out.Pix, out.Stride, m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), w, h, 1, o)
		return out
	}
	// Converted to RGB and transposed in one pass, row by row.
	out := image.NewRGBA(r)
	var rows rgbRows
	rows.init(img, new(convScratch))
	row := make([]byte, 3*w)
	for y := 0; y < h; y++ {
		rows.rgbRow(row, y, 0, w)
		d, step := orientStart(o, w, h, y, out.Stride)
		for x := 0; x < w; x++ {
			p := out.Pix[d : d+4 : d+4]
			p[0], p[1], p[2], p[3] = row[3*x], row[3*x+1], row[3*x+2], 0xff
			d += step
		}
	}
	return out
}

// orientStart is where source pixel (0, y) of a w×h image goes in the
// RGBA output of orientation o (a Pix offset, the output's stride given),
// and how far the offset moves for each step in x.
func orientStart(o, w, h, y, stride int) (off, step int) {
	at := func(x, y int) int { return y*stride + 4*x }
	switch o {
	case 2:
		return at(w-1, y), -4
	case 3:
		return at(w-1, h-1-y), -4
	case 4:
		return at(0, h-1-y), 4
	case 5:
		return at(y, 0), stride
	case 6:
		return at(h-1-y, 0), stride
	case 7:
		return at(h-1-y, w-1), -stride
	case 8:
		return at(y, w-1), -stride
	}
	return at(0, y), 4
}

// transpose writes the w×h source (bpp bytes a pixel, first pixel at off)
// into dst, transposed for orientation o; dst is h×w for o >= 5.
func transpose(dst []byte, dstStride int, src []byte, stride, off, w, h, bpp, o int) {
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	at := func(x, y int) int { return off + y*stride + x*bpp }
	for y := 0; y < oh; y++ {
		var s, step int
		switch o {
		case 2:
			s, step = at(w-1, y), -bpp
		case 3:
			s, step = at(w-1, h-1-y), -bpp
		case 4:
			s, step = at(0, h-1-y), bpp
		case 5:
			s, step = at(y, 0), stride
		case 6:
			s, step = at(y, h-1), -stride
		case 7:
			s, step = at(w-1-y, h-1), -stride
		case 8:
			s, step = at(w-1-y, 0), stride
		default:
			s, step = at(0, y), bpp
		}
		d := dst[y*dstStride:][:ow*bpp]
		for x := 0; x < ow; x++ {
			copy(d[x*bpp:x*bpp+bpp], src[s:s+bpp])
			s += step
		}
	}
}
