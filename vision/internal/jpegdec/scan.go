package jpegdec

import "fmt"

// scanBlock is one block of an MCU: its component's tables, plane and
// place in the MCU.
type scanBlock struct {
	comp   *component
	dc, ac *huffTable
	q      *[64]int32
	pred   *int32
	dx, dy int // in blocks, within the MCU
}

// readScan reads a scan header and decodes its entropy-coded data, which
// starts at data[pos]; it returns the index of the marker after it.
func (d *decoder) readScan(seg []byte, pos int) (int, error) {
	if d.sof == 0 {
		return 0, formatError("scan before the frame header")
	}
	if d.ncomp == 3 && d.adobe && d.adobeTf != 1 {
		return 0, unsupported(fmt.Sprintf("Adobe colour transform %d", d.adobeTf))
	}
	if len(seg) < 1 {
		return 0, formatError("empty scan header")
	}
	if d.sof == markSOF2 {
		return d.readProgressiveScan(seg, pos)
	}
	ns := int(seg[0])
	if ns < 1 || ns > d.ncomp || len(seg) != 4+2*ns {
		return 0, formatError(fmt.Sprintf("scan header of %d bytes for %d components", len(seg), ns))
	}
	if ss, se, a := seg[1+2*ns], seg[2+2*ns], seg[3+2*ns]; ss != 0 || se != 63 || a != 0 {
		return 0, formatError(fmt.Sprintf("sequential scan with spectral selection %d..%d, approximation 0x%02x", ss, se, a))
	}
	var preds [3]int32
	var blocks [10]scanBlock
	nb, hv := 0, 0
	var comps [3]*component
	for i := range ns {
		id, tables := seg[1+2*i], seg[2+2*i]
		var c *component
		for j := range d.ncomp {
			if d.comp[j].id == id {
				c = &d.comp[j]
			}
		}
		if c == nil {
			return 0, formatError(fmt.Sprintf("scan of component %d, not in the frame", id))
		}
		if c.scanned {
			return 0, formatError(fmt.Sprintf("component %d in more than one scan", id))
		}
		c.scanned = true
		comps[i] = c
		td, ta := int(tables>>4), int(tables&15)
		if td > 3 || ta > 3 || (d.sof == markSOF0 && (td > 1 || ta > 1)) {
			return 0, formatError(fmt.Sprintf("Huffman tables %d, %d of a baseline scan", td, ta))
		}
		if !d.dc[td].usable() || !d.ac[ta].usable() {
			return 0, formatError(fmt.Sprintf("Huffman tables %d, %d not defined before the scan, or not valid", td, ta))
		}
		if !d.quant[c.tq].defined {
			return 0, formatError(fmt.Sprintf("quantization table %d not defined before the scan", c.tq))
		}
		hv += c.h * c.v
		if d.ncomp > 1 && hv > 10 {
			return 0, formatError("more than 10 blocks in an MCU")
		}
		h, v := c.h, c.v
		if ns == 1 {
			h, v = 1, 1
		}
		for j := range h * v {
			blocks[nb] = scanBlock{comp: c, dc: &d.dc[td], ac: &d.ac[ta], q: &d.quant[c.tq].q,
				pred: &preds[i], dx: j % h, dy: j / h}
			nb++
		}
	}
	mcusX, mcus := d.mxx, d.mxx*d.myy
	if ns == 1 {
		c := comps[0]
		mcusX, mcus = c.bw, c.bw*c.bh
		if d.restart > 0 && c.h*c.v > 1 {
			// image/jpeg counts such a scan's restart intervals in MCUs
			// of the interleaved scan, not in blocks.
			return 0, unsupported("restart intervals in a non-interleaved scan of a component with several blocks an MCU")
		}
	}
	pos, err := d.decodeIntervals(pos, mcus, func(m, n int) error {
		preds = [3]int32{}
		return d.decodeMCUs(blocks[:nb], m, n, mcusX, ns == 1)
	})
	if err != nil {
		return 0, err
	}
	if ns == 1 {
		comps[0].clearPadding()
	}
	return pos, nil
}

// decodeIntervals decodes the entropy-coded data of a scan of mcus MCUs,
// which starts at data[pos], one restart interval at a time:
// decode(m, n) decodes MCUs m to m+n-1 from d.bits. It returns the index
// of the marker after the data.
func (d *decoder) decodeIntervals(pos, mcus int, decode func(m, n int) error) (int, error) {
	interval := mcus
	if d.restart > 0 {
		interval = d.restart
	}
	rst := 0
	for m := 0; m < mcus; {
		end := d.unstuff(pos)
		n := min(interval, mcus-m)
		if err := decode(m, n); err != nil {
			return 0, err
		}
		if d.bits.overrun() {
			return 0, formatError("entropy-coded data ends before its MCUs")
		}
		m += n
		pos = end
		if m == mcus {
			break
		}
		for pos < len(d.data) && d.data[pos] == 0xff {
			pos++
		}
		if pos >= len(d.data) || d.data[pos] != byte(markRST0+rst) {
			return 0, formatError(fmt.Sprintf("restart marker RST%d missing after MCU %d", rst, m))
		}
		pos++
		rst = (rst + 1) & 7
	}
	return pos, nil
}

// clearPadding zeroes the samples of c's plane outside its blocks, which
// a non-interleaved scan does not code, so that the planes hold nothing
// of the memory's past use.
func (c *component) clearPadding() {
	rows := len(c.plane) / c.stride
	for y := range rows {
		row := c.plane[y*c.stride : (y+1)*c.stride]
		if y >= 8*c.bh {
			clear(row)
		} else {
			clear(row[8*c.bw:])
		}
	}
}

// decodeMCUs decodes MCUs m0 to m0+n-1 of a scan from d.bits, mcusX of
// them a row, into the planes.
func (d *decoder) decodeMCUs(blocks []scanBlock, m0, n, mcusX int, single bool) error {
	blk := &d.blk
	br := &d.bits
	for m := m0; m < m0+n; m++ {
		mx, my := m%mcusX, m/mcusX
		for i := range blocks {
			b := &blocks[i]
			c := b.comp
			last := decodeBlock(br, blk, b.dc, b.ac, b.q, b.pred)
			if last < 0 {
				clear(blk[:])
				return blockError(last)
			}
			bx, by := mx, my
			if !single {
				bx, by = mx*c.h+b.dx, my*c.v+b.dy
			}
			idctBlock(blk, last, c.plane[8*(by*c.stride+bx):], c.stride)
		}
	}
	return nil
}

// The errors decodeBlock returns, negative.
const (
	errBadCode = -1 - iota
	errBadSymbol
	errTooManyCoefs
	errPastBand
	errRange
)

func blockError(code int) error {
	switch code {
	case errBadCode:
		return formatError("bad Huffman code")
	case errBadSymbol:
		return formatError("Huffman symbol not valid in its scan")
	case errPastBand:
		return formatError("coefficients past the end of the scan's spectral selection")
	case errRange:
		return formatError("coefficient out of range")
	}
	return formatError("more than 64 coefficients in a block")
}

// symbol is the symbol and length of the code at the top of acc (which
// holds at least 16 valid bits), whose fast entry e holds no coefficient:
// length 0 for no code.
func symbol(t *huffTable, e int32, acc uint64) (int, uint) {
	if e == 0 {
		return slowSymbol(t, acc)
	}
	return int(e>>8) & 255, uint(e & 31)
}

// dcDiff decodes a DC difference from the top of acc (which holds at least
// 32 valid bits) with DC table t: the difference and the bits it took, or
// 0 bits and a negative error code for the difference.
func dcDiff(t *huffTable, acc uint64) (int32, int) {
	e := t.fast[acc>>(64-lookBits)]
	if e&fastValue != 0 {
		return e >> 16, int(e & 31)
	}
	s, l := symbol(t, e, acc)
	if l == 0 {
		return errBadCode, 0
	}
	if s > 11 {
		return errBadSymbol, 0
	}
	if s == 0 {
		return 0, int(l)
	}
	return extendBits(int32(acc<<l>>(64-s)), uint(s)), int(l) + s
}

// eobRun is the length of the EOB run of symbol run<<4 (run < 15), whose
// extra run bits are at the top of acc, and the bits it took: 2^run plus
// those bits.
func eobRun(run int, acc uint64) (int, uint) {
	if run == 0 {
		return 1, 0
	}
	return 1<<run + int(acc>>(64-run)), uint(run)
}

// slowSymbol decodes a code longer than lookBits bits at the top of acc
// (which holds at least 16 valid bits): its symbol and length, or length 0
// for no code.
func slowSymbol(t *huffTable, acc uint64) (int, uint) {
	for l := lookBits + 1; l <= 16; l++ {
		code := int32(acc >> (64 - l))
		if code <= t.maxcode[l] {
			return int(t.vals[(code+t.valoff[l])&255]), uint(l)
		}
	}
	return 0, 0
}

// decodeBlock decodes one block's coefficients from br into blk (all zero
// on entry), dequantized by q (zigzag order), in natural order, pred being
// its component's DC predictor. It returns the zigzag index of the last
// coefficient it set, or one of the negative error codes.
func decodeBlock(br *bitReader, blk *[64]int32, dct, act *huffTable, q *[64]int32, pred *int32) int {
	buf, end := br.buf, br.end
	pos, acc, n := br.pos, br.acc, br.n
	if n < 32 {
		pos, acc, n = refill(buf, end, pos, acc, n)
	}
	// The DC coefficient, a difference from the predictor.
	diff, used := dcDiff(dct, acc)
	if used == 0 {
		return int(diff)
	}
	acc <<= uint(used)
	n -= uint(used)
	dc := *pred + diff
	*pred = dc
	blk[0] = dc * q[0]
	last := 0
	for k := 1; k < 64; {
		if n < 32 {
			pos, acc, n = refill(buf, end, pos, acc, n)
		}
		e := act.fast[acc>>(64-lookBits)]
		if e&fastValue != 0 {
			k += int(e>>8) & 15
			l := uint(e & 31)
			acc <<= l
			n -= l
			if k > 63 {
				return errTooManyCoefs
			}
			blk[zigzag[k]] = e >> 16 * q[k]
			last = k
			k++
			continue
		}
		s, l := symbol(act, e, acc)
		if l == 0 {
			return errBadCode
		}
		acc <<= l
		n -= l
		run, size := s>>4, uint(s&15)
		if size == 0 {
			if run == 0 { // end of block
				break
			}
			if run != 15 {
				return errBadSymbol
			}
			if k += 15; k > 63 {
				return errTooManyCoefs
			}
			k++
			continue
		}
		if size > 10 {
			return errBadSymbol
		}
		if k += run; k > 63 {
			return errTooManyCoefs
		}
		blk[zigzag[k]] = extendBits(int32(acc>>(64-size)), size) * q[k]
		acc <<= size
		n -= size
		last = k
		k++
	}
	br.pos, br.acc, br.n = pos, acc, n
	return last
}

// extendBits is extend for size >= 1, without branches.
func extendBits(v int32, size uint) int32 {
	m := v>>(size-1) - 1 // 0 when the top bit is set, else -1
	return v + m&(1-1<<size)
}
