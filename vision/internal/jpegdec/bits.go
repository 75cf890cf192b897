package jpegdec

import (
	"bytes"
	"encoding/binary"
)

// bitReader reads an entropy-coded segment, unstuffed (each 0xFF00 made
// 0xFF) into buf, which is followed by 8 zero bytes. acc holds the next
// bits, left-aligned; n of them are valid. pos is the next byte of buf to
// load; past end it keeps counting, loading zeros, so that a segment that
// ends early is found by consumed.
type bitReader struct {
	buf      []byte
	end, pos int
	acc      uint64
	n        uint
}

// refill loads bits until at least 56 are valid: 8 bytes at once, of which
// as many whole bytes as fit are counted.
func refill(buf []byte, end, pos int, acc uint64, n uint) (int, uint64, uint) {
	acc |= binary.BigEndian.Uint64(buf[min(pos, end):]) >> n
	return pos + int(63-n)>>3, acc, n | 56
}

// consumed is the number of bits read from the segment.
func (b *bitReader) consumed() int { return 8*b.pos - int(b.n) }

// overrun reports whether more bits were read than the segment holds.
func (b *bitReader) overrun() bool { return b.consumed() > 8*b.end }

// unstuff copies the entropy-coded data of data from start up to the next
// marker into d.buf, each stuffed 0xFF00 as 0xFF, and sets d.bits to read
// it. It returns the index of the marker's first 0xFF (len(data) when
// there is none).
func (d *decoder) unstuff(start int) int {
	data := d.data
	buf := d.buf[:0]
	i := start
	for {
		j := bytes.IndexByte(data[i:], 0xff)
		if j < 0 {
			buf = append(buf, data[i:]...)
			i = len(data)
			break
		}
		buf = append(buf, data[i:i+j+1]...)
		i += j
		if i+1 >= len(data) || data[i+1] != 0 {
			buf = buf[:len(buf)-1] // the marker's 0xFF
			break
		}
		i += 2
	}
	end := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	d.buf = buf
	d.bits = bitReader{buf: buf, end: end}
	return i
}
