package jpegdec

import (
	"errors"
	"fmt"
	"image"
	"sync"
)

// ErrUnsupported is wrapped by the errors for JPEGs that are valid but not
// baseline or progressive gray or Y'CbCr (see the package documentation):
// the caller should decode them some other way.
var ErrUnsupported = errors.New("not a baseline or progressive gray or Y'CbCr JPEG")

// TooLargeError is returned for an image over Options.MaxPixels, found
// from its frame header before any plane is allocated.
type TooLargeError struct {
	Width, Height int
	Limit         int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("jpegdec: image is %dx%d (%d pixels), over the limit of %d pixels",
		e.Width, e.Height, int64(e.Width)*int64(e.Height), e.Limit)
}

// Options controls Decode.
type Options struct {
	// MaxPixels refuses images whose width × height is larger (a
	// *TooLargeError); 0 or negative means no limit.
	MaxPixels int64
	// Alloc returns n bytes for the planes, whose contents may be
	// anything: the decoder writes every sample inside the image. nil
	// means make.
	Alloc func(n int) []byte
}

// Decode decodes the baseline or progressive JPEG in data to *image.Gray (one component)
// or *image.YCbCr (three). Its errors wrap ErrUnsupported for files it
// does not handle, or are a *TooLargeError, or say what is corrupt.
func Decode(data []byte, opt Options) (image.Image, error) {
	d := decoders.Get().(*decoder)
	img, err := d.decode(data, opt)
	d.reset()
	decoders.Put(d)
	if err != nil {
		return nil, err
	}
	return img, nil
}

// decoders keeps decoders, whose tables and buffers are worth reusing.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

// unsupported is an error wrapping ErrUnsupported that says what.
func unsupported(what string) error {
	return fmt.Errorf("jpegdec: %s: %w", what, ErrUnsupported)
}

// formatError is the error for corrupt data.
type formatError string

func (e formatError) Error() string { return "jpegdec: invalid JPEG: " + string(e) }

// Marker codes (ITU T.81 table B.1).
const (
	markSOF0  = 0xc0
	markSOF1  = 0xc1
	markSOF2  = 0xc2
	markDHT   = 0xc4
	markRST0  = 0xd0
	markRST7  = 0xd7
	markSOI   = 0xd8
	markEOI   = 0xd9
	markSOS   = 0xda
	markDQT   = 0xdb
	markDRI   = 0xdd
	markAPP0  = 0xe0
	markAPP14 = 0xee
	markAPP15 = 0xef
	markCOM   = 0xfe
)

// decoder is the state of one decode.
type decoder struct {
	data []byte
	opt  Options

	sof           byte // the frame's marker, 0 before it
	width, height int
	ncomp         int
	comp          [3]component
	hmax, vmax    int
	mxx, myy      int // MCUs of an interleaved scan, across and down
	restart       int // restart interval in MCUs, 0 for none

	quant   [4]quantTable
	dc, ac  [4]huffTable
	adobe   bool // an Adobe APP14 segment was seen
	adobeTf byte // its colour transform

	img  image.Image
	buf  []byte // the unstuffed entropy-coded segment
	blk  [64]int32
	bits bitReader
	coef []int16  // a progressive frame's coefficients, of all components
	nz   []uint64 // and which of them are nonzero
	prog progressiveScan
}

// quantTable is a quantization table in zigzag order.
type quantTable struct {
	q       [64]int32
	defined bool
}

// component is one frame component and the plane it decodes into.
type component struct {
	id      byte
	h, v    int
	tq      int
	bw, bh  int // blocks across and down when it is scanned alone
	plane   []byte
	stride  int
	scanned bool

	// A progressive frame's: the coefficients of the blocks of the
	// MCU-padded grid, gw blocks across, 64 a block in zigzag order, and
	// for each block the set of those nonzero (bit k for coefficient k);
	// the Al of the last scan of each coefficient, -1 before its first;
	// and the quantization table as it was when the component's first
	// scan began, which libjpeg uses whatever DQT segments follow.
	coef []int16
	nz   []uint64
	gw   int
	al   [64]int8
	q    [64]int32
}

// maxPooledCoefs bounds the coefficient buffer a pooled decoder keeps, in
// coefficients (64 MB).
const maxPooledCoefs = 32 << 20

func (d *decoder) reset() {
	buf, coef, nz := d.buf[:0], d.coef[:0], d.nz[:0]
	if cap(coef) > maxPooledCoefs {
		coef, nz = nil, nil
	}
	*d = decoder{buf: buf, coef: coef, nz: nz}
}

// decode reads the segments up to EOI.
func (d *decoder) decode(data []byte, opt Options) (image.Image, error) {
	d.data, d.opt = data, opt
	if len(data) < 2 || data[0] != 0xff || data[1] != markSOI {
		return nil, formatError("missing SOI marker")
	}
	pos := 2
	for {
		// A marker, after any 0xFF fill bytes; no other bytes between
		// segments (libjpeg would warn, image/jpeg skip them).
		if pos >= len(data) || data[pos] != 0xff {
			if pos >= len(data) {
				return nil, formatError("the data ends before the EOI marker")
			}
			return nil, formatError("bytes between segments where a marker should be")
		}
		for pos < len(data) && data[pos] == 0xff {
			pos++
		}
		if pos >= len(data) {
			return nil, formatError("the data ends before the EOI marker")
		}
		m := data[pos]
		pos++
		switch {
		case m == markEOI:
			return d.finish()
		case m >= markRST0 && m <= markRST7:
			// A restart marker after a scan's last interval: both
			// libjpeg and image/jpeg pass over it.
			continue
		case m == 0 || m == markSOI || m == 0x01:
			return nil, formatError(fmt.Sprintf("marker 0x%02x outside a scan", m))
		}
		if pos+2 > len(data) {
			return nil, formatError("the data ends in a segment's length")
		}
		n := int(data[pos])<<8 | int(data[pos+1])
		if n < 2 || pos+n > len(data) {
			return nil, formatError(fmt.Sprintf("segment 0x%02x of length %d past the end of the data", m, n))
		}
		seg := data[pos+2 : pos+n]
		pos += n
		var err error
		switch {
		case m == markSOF0 || m == markSOF1 || m == markSOF2:
			err = d.readSOF(m, seg)
		case m >= 0xc0 && m <= 0xcf && m != markDHT:
			err = unsupported(sofName(m))
		case m == markDHT:
			err = d.readDHT(seg)
		case m == markDQT:
			err = d.readDQT(seg)
		case m == markDRI:
			err = d.readDRI(seg)
		case m == markSOS:
			pos, err = d.readScan(seg, pos)
		case m == markAPP14:
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
				d.adobe, d.adobeTf = true, seg[11]
			}
		case m >= markAPP0 && m <= markAPP15 || m == markCOM:
			// Metadata.
		default:
			err = unsupported(fmt.Sprintf("marker 0x%02x", m))
		}
		if err != nil {
			return nil, err
		}
	}
}

// sofName names the coding process of frame marker m that is not baseline.
func sofName(m byte) string {
	switch m {
	case 0xc3:
		return "lossless JPEG"
	case 0xc9, 0xca, 0xcb:
		return "arithmetic-coded JPEG"
	case 0xcc:
		return "arithmetic coding conditioning (DAC)"
	}
	return fmt.Sprintf("JPEG coding process of marker 0x%02x", m)
}

// finish checks, at EOI, that every component was decoded, and turns a
// progressive frame's coefficients into samples.
func (d *decoder) finish() (image.Image, error) {
	if d.sof == 0 {
		return nil, formatError("no frame header (SOF) before EOI")
	}
	for i := range d.ncomp {
		if !d.comp[i].scanned {
			return nil, formatError(fmt.Sprintf("component %d is in no scan", d.comp[i].id))
		}
	}
	if d.sof == markSOF2 {
		if err := d.checkFinished(); err != nil {
			return nil, err
		}
		d.reconstruct()
	}
	return d.img, nil
}
