package vision

import (
	"image"
	"image/color"
)

// rowSource gives rows of an image as packed 8-bit RGB: rgbRow writes
// columns x0 <= x < x1 of row y (0-based, relative to the image's bounds)
// into dst[:3·(x1-x0)].
type rowSource interface {
	rgbRow(dst []byte, y, x0, x1 int)
}

// The layouts rgbRows reads directly.
const (
	rowsGeneric  = iota // through image.Image.At, NRGBA64, high byte
	rowsYCbCr           // JPEG planes: libjpeg-turbo's upsampling and YCC→RGB
	rowsBytes           // 8-bit samples: R, G, B at offsets 0, 1, 2 of bpp bytes
	rowsBytes16         // 16-bit big-endian samples: high bytes at 0, 2, 4 of 8
	rowsRGBA            // premultiplied 8-bit RGBA: un-premultiplied where not opaque
	rowsRGBA64          // premultiplied 16-bit RGBA: likewise
	rowsGray            // 8-bit gray, replicated
	rowsGray16          // 16-bit gray, clipped to 0..255 (Pillow's "I" to "RGB")
	rowsPaletted        // palette expanded, alpha ignored
	rowsCMYK            // Pillow's cmyk2rgb
)

// rgbRows reads the rows of an image as packed RGB, converting as Pillow's
// Image.convert("RGB") does for the mode Pillow opens the same file in:
//
//   - gray (L, 1-bit): replicated; gray+alpha, RGBA: alpha dropped, not blended
//   - paletted (P): palette expanded, transparency ignored
//   - 16-bit gray (Pillow's "I"/"I;16"): clipped to 0..255, not scaled
//   - 16-bit RGB/RGBA/gray+alpha (Pillow unpacks "RGB;16B" etc.): high byte
//   - CMYK: nk = 255-K; R = nk - C·nk/255 (Pillow's cmyk2rgb, MULDIV255)
//   - YCbCr (JPEG): libjpeg-turbo's fancy upsampling and YCC→RGB tables
//
// Premultiplied RGBA is un-premultiplied pixel by pixel (as
// color.NRGBA64Model does; opaque pixels are unchanged). Everything that
// depends only on the image (its layout, the palette, the chroma geometry)
// is worked out once by init, not per row.
type rgbRows struct {
	kind int
	img  image.Image
	min  image.Point // img.Bounds().Min
	w, h int
	pix  []byte // first pixel of the bounds at pix[0]
	strd int
	bpp  int
	ycc  yccPlanes
	pal  [256][3]uint8
	tmp  *convScratch
}

// convScratch is the reusable working memory of rgbRows.
type convScratch struct {
	rows []byte
	sums []int32
}

// init prepares r to read img, with tmp as working memory.
func (r *rgbRows) init(img image.Image, tmp *convScratch) {
	b := img.Bounds()
	*r = rgbRows{kind: rowsGeneric, img: img, min: b.Min, w: b.Dx(), h: b.Dy(), tmp: tmp}
	direct := func(pix []byte, stride, off, bpp, kind int) {
		r.pix, r.strd, r.bpp, r.kind = pix[off:], stride, bpp, kind
	}
	switch m := img.(type) {
	case *image.YCbCr:
		r.kind = rowsYCbCr
		r.ycc.init(m.Y, m.Cb, m.Cr, m.YStride, m.CStride, m.SubsampleRatio, m.Rect)
	case *image.NYCbCrA:
		r.kind = rowsYCbCr
		r.ycc.init(m.Y, m.Cb, m.Cr, m.YStride, m.CStride, m.SubsampleRatio, m.Rect)
	case *image.NRGBA:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 4, rowsBytes)
	case *image.RGBA:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 4, rowsRGBA)
	case *image.Gray:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 1, rowsGray)
	case *image.Gray16:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 2, rowsGray16)
	case *image.NRGBA64:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 8, rowsBytes16)
	case *image.RGBA64:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 8, rowsRGBA64)
	case *image.Paletted:
		for i, c := range m.Palette {
			if i < 256 {
				r.pal[i] = paletteRGB(c)
			}
		}
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 1, rowsPaletted)
	case *image.CMYK:
		direct(m.Pix, m.Stride, m.PixOffset(b.Min.X, b.Min.Y), 4, rowsCMYK)
	}
}

// reset drops the references to the image.
func (r *rgbRows) reset() {
	r.img, r.pix, r.ycc = nil, nil, yccPlanes{}
}

// pairAt implements pairSource: JPEG 4:2:0 planes with fancy upsampling,
// for two rows that share a chroma row; 8-bit RGBA, NRGBA and gray rows.
func (r *rgbRows) pairAt(y int) bool {
	if y+1 >= r.h {
		return false
	}
	switch r.kind {
	case rowsYCbCr:
		g := &r.ycc
		return g.fancyV && g.hs == 1 && (y+g.r.Min.Y)&1 == 0
	case rowsBytes, rowsRGBA, rowsGray:
		return true
	}
	return false
}

// rgbPair implements pairSource.
func (r *rgbRows) rgbPair(dst []uint64, y, x0, x1 int) {
	if r.kind == rowsYCbCr {
		r.ycc.pairH2V2(dst, y, x0, x1, r.tmp)
		return
	}
	n := x1 - x0
	dst = dst[:3*n]
	switch r.kind {
	case rowsGray:
		a := r.pix[y*r.strd+x0:][:n]
		b := r.pix[(y+1)*r.strd+x0:][:n]
		for x, v := range a {
			w := uint64(v) | uint64(b[x])<<32
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = w, w, w
		}
	case rowsBytes, rowsRGBA:
		a := r.pix[y*r.strd+4*x0:][:4*n]
		b := r.pix[(y+1)*r.strd+4*x0:][:4*n]
		premul := r.kind == rowsRGBA
		for x := 0; x < n; x++ {
			p, q := a[4*x:4*x+4:4*x+4], b[4*x:4*x+4:4*x+4]
			o := dst[3*x : 3*x+3 : 3*x+3]
			if !premul || p[3]&q[3] == 0xff {
				o[0] = uint64(p[0]) | uint64(q[0])<<32
				o[1] = uint64(p[1]) | uint64(q[1])<<32
				o[2] = uint64(p[2]) | uint64(q[2])<<32
				continue
			}
			var u, v [3]uint8
			rgba8(u[:], p)
			rgba8(v[:], q)
			o[0] = uint64(u[0]) | uint64(v[0])<<32
			o[1] = uint64(u[1]) | uint64(v[1])<<32
			o[2] = uint64(u[2]) | uint64(v[2])<<32
		}
	}
}

// rgba8 is the RGB of one premultiplied 8-bit RGBA pixel s, as
// color.NRGBA64Model's conversion, high bytes.
func rgba8(o, s []byte) {
	o, s = o[:3:3], s[:4:4]
	if a := s[3]; a == 0xff {
		o[0], o[1], o[2] = s[0], s[1], s[2]
	} else {
		a16 := uint32(a) * 0x101
		o[0], o[1], o[2] = unpremul(uint32(s[0])*0x101, a16), unpremul(uint32(s[1])*0x101, a16), unpremul(uint32(s[2])*0x101, a16)
	}
}

// rgbRow implements rowSource.
func (r *rgbRows) rgbRow(dst []byte, y, x0, x1 int) {
	n := x1 - x0
	dst = dst[:3*n]
	if r.kind == rowsYCbCr {
		r.ycc.row(dst, y, x0, x1, r.tmp)
		return
	}
	if r.kind == rowsGeneric {
		// Any image, through its non-premultiplied 16-bit colour, high byte.
		for x := 0; x < n; x++ {
			c := color.NRGBA64Model.Convert(r.img.At(r.min.X+x0+x, r.min.Y+y)).(color.NRGBA64)
			dst[3*x], dst[3*x+1], dst[3*x+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
		}
		return
	}
	src := r.pix[y*r.strd+x0*r.bpp:][:n*r.bpp]
	switch r.kind {
	case rowsBytes:
		for x := 0; x < n; x++ {
			s := src[4*x : 4*x+3 : 4*x+3]
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = s[0], s[1], s[2]
		}
	case rowsBytes16:
		for x := 0; x < n; x++ {
			s := src[8*x : 8*x+5 : 8*x+5]
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = s[0], s[2], s[4]
		}
	case rowsRGBA:
		for x := 0; x < n; x++ {
			rgba8(dst[3*x:], src[4*x:])
		}
	case rowsRGBA64:
		for x := 0; x < n; x++ {
			s := src[8*x : 8*x+8 : 8*x+8]
			o := dst[3*x : 3*x+3 : 3*x+3]
			if s[6] == 0xff && s[7] == 0xff {
				o[0], o[1], o[2] = s[0], s[2], s[4]
			} else {
				c := func(i int) uint32 { return uint32(s[i])<<8 | uint32(s[i+1]) }
				a16 := c(6)
				o[0], o[1], o[2] = unpremul(c(0), a16), unpremul(c(2), a16), unpremul(c(4), a16)
			}
		}
	case rowsGray:
		for x, v := range src {
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = v, v, v
		}
	case rowsGray16:
		for x := 0; x < n; x++ {
			v := uint8(0xff)
			if src[2*x] == 0 {
				v = src[2*x+1]
			}
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = v, v, v
		}
	case rowsPaletted:
		for x, v := range src {
			c := &r.pal[v]
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = c[0], c[1], c[2]
		}
	case rowsCMYK:
		for x := 0; x < n; x++ {
			s := src[4*x : 4*x+4 : 4*x+4]
			nk := 255 - int(s[3])
			o := dst[3*x : 3*x+3 : 3*x+3]
			o[0] = cmykChannel(int(s[0]), nk)
			o[1] = cmykChannel(int(s[1]), nk)
			o[2] = cmykChannel(int(s[2]), nk)
		}
	}
}

// unpremul is the high byte of color.NRGBA64Model's conversion of one
// premultiplied 16-bit channel v with alpha a (< 0xffff), truncation to 16
// bits included.
func unpremul(v, a uint32) uint8 {
	if a == 0 {
		return 0
	}
	return uint8(uint16(v*0xffff/a) >> 8)
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

// libjpeg's YCC→RGB tables (jdcolor.c, SCALEBITS 16):
// R = Y + crR[Cr], G = Y + (cbG[Cb] + crG[Cr]) >> 16, B = Y + cbB[Cb].
var crR, cbB, crG, cbG [256]int32

// clampTab[(v+256)&1023] is v clamped to 0..255, for -256 <= v < 768 (the
// YCC→RGB sums lie in -227..482).
var clampTab [1024]uint8

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
	for i := range clampTab {
		clampTab[i] = clamp8(int32(i - 256))
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

// yccPixel writes the RGB of one JPEG sample to o[0:3].
func yccPixel(o []byte, y int32, cb, cr uint8) {
	o = o[:3:3]
	o[0] = clampTab[(y+crR[cr]+256)&1023]
	o[1] = clampTab[(y+(cbG[cb]+crG[cr])>>16+256)&1023]
	o[2] = clampTab[(y+cbB[cb]+256)&1023]
}

// yccPlanes is a JPEG's Y'CbCr planes with the chroma geometry worked out
// once: hs and vs are log2 of the horizontal and vertical subsampling; the
// chroma plane, relative to its first sample, is cw×ch.
type yccPlanes struct {
	Y, Cb, Cr        []byte
	yStride, cStride int
	r                image.Rectangle
	hs, vs           int
	cx0, cy0, cw, ch int
	fancyH, fancyV   bool
}

func (g *yccPlanes) init(Y, Cb, Cr []byte, yStride, cStride int, ratio image.YCbCrSubsampleRatio, r image.Rectangle) {
	*g = yccPlanes{Y: Y, Cb: Cb, Cr: Cr, yStride: yStride, cStride: cStride, r: r}
	switch ratio {
	case image.YCbCrSubsampleRatio422:
		g.hs = 1
	case image.YCbCrSubsampleRatio420:
		g.hs, g.vs = 1, 1
	case image.YCbCrSubsampleRatio440:
		g.vs = 1
	case image.YCbCrSubsampleRatio411:
		g.hs = 2
	case image.YCbCrSubsampleRatio410:
		g.hs, g.vs = 2, 1
	}
	g.cx0, g.cy0 = r.Min.X>>g.hs, r.Min.Y>>g.vs
	g.cw = ((r.Max.X + 1<<g.hs - 1) >> g.hs) - g.cx0
	g.ch = ((r.Max.Y + 1<<g.vs - 1) >> g.vs) - g.cy0
	// libjpeg-turbo's "fancy" (triangle) upsampling for 4:2:2, 4:2:0 and
	// 4:4:0; plain replication for chroma planes 2 samples wide or less,
	// and for 4:1:1 and 4:1:0.
	g.fancyH = g.hs == 1 && g.cw > 2 && r.Min.X%2 == 0
	g.fancyV = g.vs == 1 && r.Min.Y%2 == 0 && (g.hs == 0 || (g.hs == 1 && g.fancyH))
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

// row converts columns x0..x1 of row y (relative to the rectangle) the way
// libjpeg-turbo does for Pillow: chroma upsampled with its fancy filters,
// then its fixed-point YCC→RGB.
func (g *yccPlanes) row(dst []byte, y, x0, x1 int, tmp *convScratch) {
	n := x1 - x0
	yRow := g.Y[y*g.yStride+x0:][:n]
	cy := (y+g.r.Min.Y)>>g.vs - g.cy0 // chroma row, relative to the plane
	if g.fancyV && g.hs == 1 {
		g.rowH2V2(dst, yRow, y, cy, x0, x1, tmp)
		return
	}
	tmp.rows = grow(tmp.rows, 2*n)
	cbRow, crRow := tmp.rows[:n], tmp.rows[n:2*n]
	for p, plane := range [2][]byte{g.Cb, g.Cr} {
		out := cbRow
		if p == 1 {
			out = crRow
		}
		row := plane[cy*g.cStride:]
		switch {
		case g.fancyV: // h1v2: rows weighted 3:1
			orow := plane[neighbourRow(y, cy, g.ch)*g.cStride:]
			bias := int32(1 + y&1)
			for x := range out {
				out[x] = uint8((3*int32(row[x0+x]) + int32(orow[x0+x]) + bias) >> 2)
			}
		case g.fancyH && g.vs == 0: // h2v1: columns 3:1, edges repeated
			last := g.cw - 1
			for x := range out {
				i := (x0 + x) >> 1
				c := 3 * int32(row[i])
				if (x0+x)&1 == 0 {
					out[x] = uint8((c + int32(row[max(i-1, 0)]) + 1) >> 2)
				} else {
					out[x] = uint8((c + int32(row[min(i+1, last)]) + 2) >> 2)
				}
			}
		default: // 4:4:4, and replication
			for x := range out {
				out[x] = row[(x0+x+g.r.Min.X)>>g.hs-g.cx0]
			}
		}
	}
	for x, v := range yRow {
		yccPixel(dst[3*x:], int32(v), cbRow[x], crRow[x])
	}
}

// colSums sets cb[1+i] and cr[1+i], for chroma columns lo <= i <= hi,
// to 3·(row cy) + (row o): libjpeg-turbo's vertical step of h2v2 fancy
// upsampling. cb[0] and cr[0] repeat column 0, cb[cw+1] and cr[cw+1]
// column cw-1 (they are read only when lo = 0 or hi = cw-1).
func (g *yccPlanes) colSums(cb, cr []int32, cy, o, lo, hi int) {
	g.colSums2(cb, cr, cb, cr, cy, o, o, lo, hi)
}

// colSums2 is colSums for two output rows at once: the row above (o1,
// sums in cb1, cr1) and the row below (o2, sums in cb2, cr2) of chroma
// row cy.
func (g *yccPlanes) colSums2(cb1, cr1, cb2, cr2 []int32, cy, o1, o2, lo, hi int) {
	cw := g.cw
	vsum2(cb1, cb2, g.Cb[cy*g.cStride:][:cw], g.Cb[o1*g.cStride:][:cw], g.Cb[o2*g.cStride:][:cw], lo, hi)
	vsum2(cr1, cr2, g.Cr[cy*g.cStride:][:cw], g.Cr[o1*g.cStride:][:cw], g.Cr[o2*g.cStride:][:cw], lo, hi)
	for _, cs := range [4][]int32{cb1, cr1, cb2, cr2} {
		cs = cs[:cw+2]
		cs[0], cs[cw+1] = cs[1], cs[cw]
	}
}

// vsum2 sets s1[1+i] = 3·c[i] + a[i] and s2[1+i] = 3·c[i] + b[i] for
// lo <= i <= hi.
func vsum2(s1, s2 []int32, c, a, b []byte, lo, hi int) {
	c = c[lo : hi+1]
	a, b = a[lo : hi+1][:len(c)], b[lo : hi+1][:len(c)]
	s1, s2 = s1[1+lo:][:len(c)], s2[1+lo:][:len(c)]
	for i, v := range c {
		v3 := 3 * int32(v)
		s1[i] = v3 + int32(a[i])
		s2[i] = v3 + int32(b[i])
	}
}

// yccRGB is libjpeg's fixed-point YCC→RGB of one sample.
func yccRGB(y int32, cb, cr int32) (r, g, b uint64) {
	cb, cr = cb&255, cr&255
	r = uint64(clampTab[(y+crR[cr]+256)&1023])
	g = uint64(clampTab[(y+(cbG[cb]+crG[cr])>>16+256)&1023])
	b = uint64(clampTab[(y+cbB[cb]+256)&1023])
	return r, g, b
}

// pairH2V2 is rowH2V2 for rows y and y+1 of a chroma row pair at once (y+1
// below y, both of chroma row cy): dst[3·(x-x0)+c] holds channel c of
// column x of row y in its low 32 bits and of row y+1 in its high 32 bits,
// the layout of resample's horizontal pass.
func (g *yccPlanes) pairH2V2(dst []uint64, y, x0, x1 int, tmp *convScratch) {
	cw := g.cw
	n := x1 - x0
	cy := (y+g.r.Min.Y)>>1 - g.cy0
	i0, i1 := x0>>1, (x1-1)>>1
	lo, hi := max(i0-1, 0), min(i1+1, cw-1)
	tmp.sums = grow(tmp.sums, 4*(cw+2))
	m := cw + 2
	cbT, crT, cbB, crB := tmp.sums[:m], tmp.sums[m:2*m], tmp.sums[2*m:3*m], tmp.sums[3*m:4*m]
	g.colSums2(cbT, crT, cbB, crB, cy, max(0, cy-1), min(g.ch-1, cy+1), lo, hi)
	yT := g.Y[y*g.yStride+x0:][:n]
	yB := g.Y[(y+1)*g.yStride+x0:][:n]
	dst = dst[:3*n]
	// Column x of chroma column i: even x blend i-1 (3:1), odd x blend i+1.
	col := func(x int) {
		i, j := x>>1, x-x0
		var cbt, crt, cbb, crb int32
		if x&1 == 0 {
			cbt, crt = (cbT[1+i]*3+cbT[i]+8)>>4, (crT[1+i]*3+crT[i]+8)>>4
			cbb, crb = (cbB[1+i]*3+cbB[i]+8)>>4, (crB[1+i]*3+crB[i]+8)>>4
		} else {
			cbt, crt = (cbT[1+i]*3+cbT[2+i]+7)>>4, (crT[1+i]*3+crT[2+i]+7)>>4
			cbb, crb = (cbB[1+i]*3+cbB[2+i]+7)>>4, (crB[1+i]*3+crB[2+i]+7)>>4
		}
		r0, g0, b0 := yccRGB(int32(yT[j]), cbt, crt)
		r1, g1, b1 := yccRGB(int32(yB[j]), cbb, crb)
		o := dst[3*j : 3*j+3 : 3*j+3]
		o[0], o[1], o[2] = r0|r1<<32, g0|g1<<32, b0|b1<<32
	}
	x := x0
	if x&1 == 1 {
		col(x)
		x++
	}
	for ; x+1 < x1; x += 2 {
		i, j := x>>1, x-x0
		bt, rt := cbT[i:i+3:i+3], crT[i:i+3:i+3]
		bb, rb := cbB[i:i+3:i+3], crB[i:i+3:i+3]
		yt, yb := yT[j:j+2:j+2], yB[j:j+2:j+2]
		o := dst[3*j : 3*j+6 : 3*j+6]
		r0, g0, b0 := yccRGB(int32(yt[0]), (bt[1]*3+bt[0]+8)>>4, (rt[1]*3+rt[0]+8)>>4)
		r1, g1, b1 := yccRGB(int32(yb[0]), (bb[1]*3+bb[0]+8)>>4, (rb[1]*3+rb[0]+8)>>4)
		o[0], o[1], o[2] = r0|r1<<32, g0|g1<<32, b0|b1<<32
		r0, g0, b0 = yccRGB(int32(yt[1]), (bt[1]*3+bt[2]+7)>>4, (rt[1]*3+rt[2]+7)>>4)
		r1, g1, b1 = yccRGB(int32(yb[1]), (bb[1]*3+bb[2]+7)>>4, (rb[1]*3+rb[2]+7)>>4)
		o[3], o[4], o[5] = r0|r1<<32, g0|g1<<32, b0|b1<<32
	}
	if x < x1 {
		col(x)
	}
}

// rowH2V2 is row for 4:2:0 with fancy upsampling (libjpeg-turbo's
// h2v2_fancy_upsample): chroma rows weighted 3:1 (the nearer row and the one
// above for even output rows, below for odd ones), then columns 3:1, the
// edge columns repeated; output columns 2i and 2i+1 come from chroma column
// i. The chroma sums are kept padded by one column each side, so no index is
// clamped in the inner loop.
func (g *yccPlanes) rowH2V2(dst, yRow []byte, y, cy, x0, x1 int, tmp *convScratch) {
	cw := g.cw
	i0, i1 := x0>>1, (x1-1)>>1              // chroma columns of the output columns
	lo, hi := max(i0-1, 0), min(i1+1, cw-1) // and their neighbours
	// sums[p][1+i] is chroma column i of plane p (Cb, Cr) after the vertical step.
	tmp.sums = grow(tmp.sums, 2*(cw+2))
	cb, cr := tmp.sums[:cw+2], tmp.sums[cw+2:2*(cw+2)]
	g.colSums(cb, cr, cy, neighbourRow(y, cy, g.ch), lo, hi)
	x := x0
	if x&1 == 1 { // odd first column: the right half of chroma column i0
		i := x >> 1
		ccb := (cb[1+i]*3 + cb[2+i] + 7) >> 4
		ccr := (cr[1+i]*3 + cr[2+i] + 7) >> 4
		yccPixel(dst, int32(yRow[0]), uint8(ccb), uint8(ccr))
		x++
	}
	for ; x+1 < x1; x += 2 {
		i := x >> 1
		b := cb[i : i+3 : i+3]
		r := cr[i : i+3 : i+3]
		j := x - x0
		o := dst[3*j : 3*j+6 : 3*j+6]
		yy := yRow[j : j+2 : j+2]
		yccPixel(o[0:3], int32(yy[0]), uint8((b[1]*3+b[0]+8)>>4), uint8((r[1]*3+r[0]+8)>>4))
		yccPixel(o[3:6], int32(yy[1]), uint8((b[1]*3+b[2]+7)>>4), uint8((r[1]*3+r[2]+7)>>4))
	}
	if x < x1 { // even last column: the left half of chroma column i1
		i := x >> 1
		ccb := (cb[1+i]*3 + cb[i] + 8) >> 4
		ccr := (cr[1+i]*3 + cr[i] + 8) >> 4
		yccPixel(dst[3*(x-x0):], int32(yRow[x-x0]), uint8(ccb), uint8(ccr))
	}
}
