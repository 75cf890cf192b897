package jpegdec

import (
	"fmt"
	"image"
)

// readSOF reads a baseline, extended-sequential or progressive frame
// header and allocates the planes (and a progressive frame's
// coefficients).
func (d *decoder) readSOF(m byte, seg []byte) error {
	if d.sof != 0 {
		return formatError("more than one frame header (SOF)")
	}
	if len(seg) < 6 {
		return formatError("short frame header (SOF)")
	}
	if seg[0] != 8 {
		return unsupported(fmt.Sprintf("%d-bit samples", seg[0]))
	}
	h, w, nc := int(seg[1])<<8|int(seg[2]), int(seg[3])<<8|int(seg[4]), int(seg[5])
	if len(seg) != 6+3*nc {
		return formatError(fmt.Sprintf("frame header of %d bytes for %d components", len(seg), nc))
	}
	if nc != 1 && nc != 3 {
		return unsupported(fmt.Sprintf("%d components", nc))
	}
	if h == 0 {
		return unsupported("height defined by a DNL marker")
	}
	if w == 0 {
		return formatError("image width 0")
	}
	d.sof, d.width, d.height, d.ncomp = m, w, h, nc
	for i := range nc {
		c := &d.comp[i]
		c.id, c.h, c.v, c.tq = seg[6+3*i], int(seg[7+3*i]>>4), int(seg[7+3*i]&15), int(seg[8+3*i])
		for j := range i {
			if d.comp[j].id == c.id {
				return formatError(fmt.Sprintf("component id %d repeated", c.id))
			}
		}
		if c.tq > 3 {
			return formatError(fmt.Sprintf("quantization table %d", c.tq))
		}
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
			return formatError(fmt.Sprintf("sampling factors %dx%d", c.h, c.v))
		}
		// The sampling factors image/jpeg accepts: Y's 1, 2 or 4 across
		// and 1 or 2 down, the chroma components' the same and dividing Y's.
		if c.h == 3 || c.v == 3 || (i == 0 && c.v == 4) ||
			(i == 1 && (d.comp[0].h%c.h != 0 || d.comp[0].v%c.v != 0)) ||
			(i == 2 && (c.h != d.comp[1].h || c.v != d.comp[1].v)) {
			return unsupported(fmt.Sprintf("sampling factors %dx%d of component %d", c.h, c.v, i))
		}
		if nc == 1 {
			// One component is a non-interleaved scan whatever its
			// factors say: one block is an MCU.
			c.h, c.v = 1, 1
		}
	}
	if nc == 3 && d.comp[0].id == 'R' && d.comp[1].id == 'G' && d.comp[2].id == 'B' {
		return unsupported("RGB components")
	}
	d.hmax, d.vmax = d.comp[0].h, d.comp[0].v
	d.mxx = (w + 8*d.hmax - 1) / (8 * d.hmax)
	d.myy = (h + 8*d.vmax - 1) / (8 * d.vmax)
	for i := range nc {
		c := &d.comp[i]
		cw := (w*c.h + d.hmax - 1) / d.hmax
		ch := (h*c.v + d.vmax - 1) / d.vmax
		c.bw, c.bh = (cw+7)/8, (ch+7)/8
		c.stride = 8 * c.h * d.mxx
	}
	if lim := d.opt.MaxPixels; lim > 0 && int64(w)*int64(h) > lim {
		return &TooLargeError{Width: w, Height: h, Limit: lim}
	}
	d.allocPlanes()
	if m == markSOF2 {
		d.allocCoefs()
	}
	return nil
}

// allocPlanes makes the image, each plane whole MCUs wide and high, as
// image/jpeg lays them out.
func (d *decoder) allocPlanes() {
	size := func(c *component) int { return c.stride * 8 * c.v * d.myy }
	n := 0
	for i := range d.ncomp {
		n += size(&d.comp[i])
	}
	var buf []byte
	if d.opt.Alloc != nil {
		buf = d.opt.Alloc(n)[:n]
	} else {
		buf = make([]byte, n)
	}
	r := image.Rect(0, 0, d.width, d.height)
	y := &d.comp[0]
	ny := size(y)
	y.plane = buf[:ny]
	if d.ncomp == 1 {
		d.img = &image.Gray{Pix: y.plane, Stride: y.stride, Rect: r}
		return
	}
	cb, cr := &d.comp[1], &d.comp[2]
	nc := size(cb)
	cb.plane = buf[ny : ny+nc : ny+nc]
	cr.plane = buf[ny+nc : ny+2*nc : ny+2*nc]
	var ratio image.YCbCrSubsampleRatio
	switch (y.h/cb.h)<<4 | y.v/cb.v {
	case 0x11:
		ratio = image.YCbCrSubsampleRatio444
	case 0x12:
		ratio = image.YCbCrSubsampleRatio440
	case 0x21:
		ratio = image.YCbCrSubsampleRatio422
	case 0x22:
		ratio = image.YCbCrSubsampleRatio420
	case 0x41:
		ratio = image.YCbCrSubsampleRatio411
	case 0x42:
		ratio = image.YCbCrSubsampleRatio410
	}
	d.img = &image.YCbCr{Y: y.plane, Cb: cb.plane, Cr: cr.plane, YStride: y.stride, CStride: cb.stride,
		SubsampleRatio: ratio, Rect: r}
}

// readDQT reads quantization tables, 8 or 16 bits an entry, kept in the
// zigzag order they are stored in.
func (d *decoder) readDQT(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, seg[0]&15
		seg = seg[1:]
		if tq > 3 {
			return formatError(fmt.Sprintf("quantization table %d", tq))
		}
		t := &d.quant[tq]
		switch pq {
		case 0:
			if len(seg) < 64 {
				return formatError("short quantization table")
			}
			for i := range t.q {
				t.q[i] = int32(seg[i])
			}
			seg = seg[64:]
		case 1:
			if len(seg) < 128 {
				return formatError("short quantization table")
			}
			for i := range t.q {
				t.q[i] = int32(seg[2*i])<<8 | int32(seg[2*i+1])
			}
			seg = seg[128:]
		default:
			return formatError(fmt.Sprintf("quantization table precision %d", pq))
		}
		t.defined = true
	}
	return nil
}

// readDRI reads the restart interval.
func (d *decoder) readDRI(seg []byte) error {
	if len(seg) != 2 {
		return formatError("restart interval segment (DRI) of wrong length")
	}
	d.restart = int(seg[0])<<8 | int(seg[1])
	return nil
}
