package jpegdec

import (
	"fmt"
	"math/bits"
)

// A progressive frame (ITU T.81 annex G) codes each block's coefficients
// over several scans: spectral selection splits them into bands Ss..Se
// of the zigzag order, the DC coefficient alone in DC scans and one
// component's band in each AC scan; successive approximation codes a band's
// coefficients shifted right by Al first, then one bit more in each
// refinement scan (Ah the previous Al, Al one less). The coefficients are
// kept for the whole image and dequantized and transformed at EOI.

// progressiveScan is one progressive scan: its kind, band, shift and
// blocks, and the state its entropy-coded data carries from block to
// block.
type progressiveScan struct {
	ss, se int
	ah, al uint
	band   uint64 // bit k for each coefficient k of ss..se
	blocks [10]scanBlock
	nb     int
	single bool // one component: the blocks of its own grid
	preds  [3]int32
	eobrun int // blocks left in an EOB run
}

// allocCoefs makes the coefficient buffers of a progressive frame, zero,
// for the blocks of each component's MCU-padded grid.
func (d *decoder) allocCoefs() {
	n := 0
	for i := range d.ncomp {
		c := &d.comp[i]
		c.gw = d.mxx * c.h
		n += c.gw * d.myy * c.v
	}
	if cap(d.coef) >= 64*n && cap(d.nz) >= n {
		d.coef, d.nz = d.coef[:64*n], d.nz[:n]
		clear(d.coef)
		clear(d.nz)
	} else {
		d.coef, d.nz = make([]int16, 64*n), make([]uint64, n)
	}
	off := 0
	for i := range d.ncomp {
		c := &d.comp[i]
		m := c.gw * d.myy * c.v
		c.coef = d.coef[64*off : 64*(off+m) : 64*(off+m)]
		c.nz = d.nz[off : off+m : off+m]
		off += m
		for k := range c.al {
			c.al[k] = -1
		}
	}
}

// readProgressiveScan reads the header of a progressive scan, checks it
// against the scans before (T.81 G.1.1.1), and decodes its entropy-coded
// data, which starts at data[pos]; it returns the index of the marker
// after it.
func (d *decoder) readProgressiveScan(seg []byte, pos int) (int, error) {
	ns := int(seg[0])
	if ns < 1 || ns > d.ncomp || len(seg) != 4+2*ns {
		return 0, formatError(fmt.Sprintf("scan header of %d bytes for %d components", len(seg), ns))
	}
	ss, se := int(seg[1+2*ns]), int(seg[2+2*ns])
	ah, al := int(seg[3+2*ns]>>4), int(seg[3+2*ns]&15)
	switch {
	case ss == 0 && se != 0:
		return 0, formatError(fmt.Sprintf("progressive DC scan with spectral selection 0..%d", se))
	case ss > se || se > 63:
		return 0, formatError(fmt.Sprintf("spectral selection %d..%d", ss, se))
	case ss > 0 && ns != 1:
		return 0, formatError(fmt.Sprintf("progressive AC scan of %d components", ns))
	case ah != 0 && al != ah-1, al > 13:
		return 0, formatError(fmt.Sprintf("successive approximation Ah %d, Al %d", ah, al))
	}
	s := &d.prog
	*s = progressiveScan{ss: ss, se: se, ah: uint(ah), al: uint(al), single: ns == 1,
		band: (uint64(2)<<se - 1) &^ (uint64(1)<<ss - 1)}
	var comps [3]*component
	hv := 0
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
		for _, o := range comps[:i] {
			if o == c {
				return 0, formatError(fmt.Sprintf("component %d twice in a scan", id))
			}
		}
		comps[i] = c
		td, ta := int(tables>>4), int(tables&15)
		if td > 3 || ta > 3 {
			return 0, formatError(fmt.Sprintf("Huffman tables %d, %d", td, ta))
		}
		if (ss == 0 && ah == 0 && !d.dc[td].usable()) || (ss > 0 && !d.ac[ta].usable()) {
			return 0, formatError(fmt.Sprintf("Huffman tables %d, %d not defined before the scan, or not valid", td, ta))
		}
		if !c.scanned {
			// The component's first scan latches its quantization table.
			if !d.quant[c.tq].defined {
				return 0, formatError(fmt.Sprintf("quantization table %d not defined before the scan", c.tq))
			}
			c.q = d.quant[c.tq].q
			c.scanned = true
		}
		if ss > 0 && c.al[0] < 0 {
			return 0, formatError(fmt.Sprintf("AC scan of component %d before its DC scan", id))
		}
		want := -1
		if ah > 0 {
			want = ah
		}
		for k := ss; k <= se; k++ {
			if int(c.al[k]) != want {
				return 0, formatError(fmt.Sprintf("scan of coefficients %d..%d of component %d with Ah %d after Al %d",
					ss, se, id, ah, c.al[k]))
			}
			c.al[k] = int8(al)
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
			s.blocks[s.nb] = scanBlock{comp: c, dc: &d.dc[td], ac: &d.ac[ta], pred: &s.preds[i], dx: j % h, dy: j / h}
			s.nb++
		}
	}
	mcusX, mcus := d.mxx, d.mxx*d.myy
	if ns == 1 {
		c := comps[0]
		mcusX, mcus = c.bw, c.bw*c.bh
		// image/jpeg visits, in a scan of one component, the blocks of
		// the MCU-padded grid inside the image's width and height, and
		// counts restart intervals in the MCUs of the interleaved scans:
		// the component's own blocks only where these are the same.
		if min(d.mxx*c.h, (d.width+7)/8) != c.bw || min(d.myy*c.v, (d.height+7)/8) != c.bh {
			return 0, unsupported(fmt.Sprintf("progressive scan of a component with sampling factors %dx%d of %dx%d",
				c.h, c.v, d.hmax, d.vmax))
		}
		if d.restart > 0 && c.h*c.v > 1 {
			return 0, unsupported("restart intervals in a non-interleaved scan of a component with several blocks an MCU")
		}
	}
	return d.decodeIntervals(pos, mcus, func(m, n int) error {
		s.preds, s.eobrun = [3]int32{}, 0
		if err := d.decodeProgressiveMCUs(s, m, n, mcusX); err != nil {
			return err
		}
		if s.eobrun > 0 {
			return formatError("EOB run past the end of its scan or restart interval")
		}
		return nil
	})
}

// decodeProgressiveMCUs decodes MCUs m0 to m0+n-1 of a progressive scan
// from d.bits, mcusX of them a row, into the coefficients.
func (d *decoder) decodeProgressiveMCUs(s *progressiveScan, m0, n, mcusX int) error {
	if s.ss > 0 {
		return d.decodeACBlocks(s, m0, n, mcusX)
	}
	br := &d.bits
	for m := m0; m < m0+n; m++ {
		mx, my := m%mcusX, m/mcusX
		for i := range s.blocks[:s.nb] {
			b := &s.blocks[i]
			c := b.comp
			bx, by := mx, my
			if !s.single {
				bx, by = mx*c.h+b.dx, my*c.v+b.dy
			}
			coef := (*[64]int16)(c.coef[64*(by*c.gw+bx):])
			if s.ah > 0 {
				refineDC(br, coef, s.al)
			} else if code := decodeDCFirst(br, coef, b.dc, b.pred, s.al); code < 0 {
				return blockError(code)
			}
		}
	}
	return nil
}

// decodeACBlocks decodes blocks m0 to m0+n-1 of an AC scan, of one
// component whose grid is bw blocks across, from d.bits.
func (d *decoder) decodeACBlocks(s *progressiveScan, m0, n, bw int) error {
	br := &d.bits
	c, t := s.blocks[0].comp, s.blocks[0].ac
	bx, by := m0%bw, m0/bw
	for m := m0; m < m0+n; m++ {
		if s.eobrun > 0 {
			// Blocks of an EOB run: nothing to do in a first scan, the
			// nonzero coefficients to correct in a refinement scan.
			run := min(s.eobrun, m0+n-m)
			if s.ah > 0 {
				refineRun(br, c, bx, by, bw, run, s)
			}
			s.eobrun -= run
			m += run - 1
			bx, by = (m+1)%bw, (m+1)/bw
			continue
		}
		i := by*c.gw + bx
		coef := (*[64]int16)(c.coef[64*i:])
		var code int
		if s.ah == 0 {
			code = decodeACFirst(br, coef, &c.nz[i], t, s)
		} else {
			code = refineAC(br, coef, &c.nz[i], t, s)
		}
		if code < 0 {
			return blockError(code)
		}
		if bx++; bx == bw {
			bx, by = 0, by+1
		}
	}
	return nil
}

// decodeDCFirst decodes the DC coefficient of a block in a DC first scan:
// a difference from the predictor pred, shifted left by al.
func decodeDCFirst(br *bitReader, coef *[64]int16, t *huffTable, pred *int32, al uint) int {
	buf, end := br.buf, br.end
	pos, acc, n := br.pos, br.acc, br.n
	if n < 32 {
		pos, acc, n = refill(buf, end, pos, acc, n)
	}
	diff, used := dcDiff(t, acc)
	if used == 0 {
		return int(diff)
	}
	acc <<= uint(used)
	n -= uint(used)
	dc := *pred + diff
	*pred = dc
	x := dc << al
	if !fits(x) {
		return errRange
	}
	coef[0] = int16(x)
	br.pos, br.acc, br.n = pos, acc, n
	return 0
}

// refineDC reads the next bit of a block's DC coefficient, bit al.
func refineDC(br *bitReader, coef *[64]int16, al uint) {
	if br.n == 0 {
		br.pos, br.acc, br.n = refill(br.buf, br.end, br.pos, br.acc, br.n)
	}
	if br.acc>>63 != 0 {
		coef[0] |= 1 << al
	}
	br.acc <<= 1
	br.n--
}

// decodeACFirst decodes a block's band s.ss..s.se in an AC first scan
// (T.81 G.1.2.2), the coefficients shifted left by s.al, and adds those
// nonzero to *nz; the band's end may start an EOB run of the blocks after.
func decodeACFirst(br *bitReader, coef *[64]int16, nz *uint64, t *huffTable, s *progressiveScan) int {
	buf, end := br.buf, br.end
	pos, acc, n := br.pos, br.acc, br.n
	se, al := s.se, s.al
	var set uint64
	for k := s.ss; k <= se; {
		if n < 32 {
			pos, acc, n = refill(buf, end, pos, acc, n)
		}
		e := t.fast[acc>>(64-lookBits)]
		if e&fastValue != 0 {
			k += int(e>>8) & 15
			l := uint(e & 31)
			acc <<= l
			n -= l
			if k > se {
				return errPastBand
			}
			x := e >> 16 << al
			if !fits(x) {
				return errRange
			}
			if x != 0 {
				coef[k] = int16(x)
				set |= 1 << k
			}
			k++
			continue
		}
		sym, l := symbol(t, e, acc)
		if l == 0 {
			return errBadCode
		}
		acc <<= l
		n -= l
		run, size := sym>>4, uint(sym&15)
		if size == 0 {
			if run == 15 { // sixteen zeros
				if k += 15; k > se {
					return errPastBand
				}
				k++
				continue
			}
			// End of band, of this block and of 2^run-1 more plus as many
			// as the next run bits say.
			eob, l := eobRun(run, acc)
			acc <<= l
			n -= l
			s.eobrun = eob - 1
			break
		}
		if size > 10 {
			return errBadSymbol
		}
		if k += run; k > se {
			return errPastBand
		}
		x := extendBits(int32(acc>>(64-size)), size) << al
		if !fits(x) {
			return errRange
		}
		coef[k] = int16(x)
		set |= 1 << k
		acc <<= size
		n -= size
		k++
	}
	*nz |= set
	br.pos, br.acc, br.n = pos, acc, n
	return 0
}

// refineAC decodes a block's band s.ss..s.se in an AC refinement scan
// (T.81 G.1.2.3): bit s.al of each coefficient already nonzero (in *nz),
// a correction bit, and new coefficients of ±1<<s.al, each after a run of
// zero coefficients, which it adds to *nz; or the block is one of an EOB
// run, which still corrects the nonzero ones.
func refineAC(br *bitReader, coef *[64]int16, nzp *uint64, t *huffTable, s *progressiveScan) int {
	buf, end := br.buf, br.end
	pos, acc, n := br.pos, br.acc, br.n
	se := s.se
	p1 := int16(1) << s.al
	nz := *nzp
	k := s.ss
	if s.eobrun == 0 {
		for k <= se {
			if n < 32 {
				pos, acc, n = refill(buf, end, pos, acc, n)
			}
			var run int
			var v int16
			e := t.fast[acc>>(64-lookBits)]
			if e&fastValue != 0 {
				// A new coefficient with its sign bit, or sixteen zeros.
				run = int(e>>8) & 15
				l := uint(e & 31)
				acc <<= l
				n -= l
				x := e >> 16
				if x > 1 || x < -1 {
					return errBadSymbol
				}
				v = int16(x) * p1
			} else {
				sym, l := symbol(t, e, acc)
				if l == 0 {
					return errBadCode
				}
				acc <<= l
				n -= l
				run = sym >> 4
				switch sym & 15 {
				case 0:
					if run < 15 {
						eob, l := eobRun(run, acc)
						acc <<= l
						n -= l
						s.eobrun = eob
					}
				case 1:
					v = -p1
					if acc>>63 != 0 {
						v = p1
					}
					acc <<= 1
					n--
				default:
					return errBadSymbol
				}
				if s.eobrun > 0 {
					break
				}
			}
			// The new coefficient's place (or the sixteenth zero's): the
			// zero coefficient after run others from k on. The nonzero
			// ones before it are corrected on the way.
			zeros := ^nz & s.band &^ (uint64(1)<<k - 1)
			for ; run > 0; run-- {
				zeros &= zeros - 1
			}
			if zeros == 0 {
				return errPastBand
			}
			at := bits.TrailingZeros64(zeros)
			for m := nz & (uint64(1)<<at - 1) &^ (uint64(1)<<k - 1); m != 0; m &= m - 1 {
				if n == 0 {
					pos, acc, n = refill(buf, end, pos, acc, n)
				}
				j := bits.TrailingZeros64(m) & 63
				coef[j] = correct(coef[j], p1, acc>>63)
				acc <<= 1
				n--
			}
			if v != 0 {
				coef[at&63] = v
				nz |= 1 << at
			}
			k = at + 1
		}
	}
	if s.eobrun > 0 {
		for m := nz & s.band &^ (uint64(1)<<k - 1); m != 0; m &= m - 1 {
			if n == 0 {
				pos, acc, n = refill(buf, end, pos, acc, n)
			}
			j := bits.TrailingZeros64(m) & 63
			coef[j] = correct(coef[j], p1, acc>>63)
			acc <<= 1
			n--
		}
		s.eobrun--
	}
	*nzp = nz
	br.pos, br.acc, br.n = pos, acc, n
	return 0
}

// checkFinished refuses, at EOI, a progressive frame whose first AC
// coefficients (zigzag 1 to 9) are not all coded to their last bit: there
// libjpeg smooths the blocks (its block smoothing, on by default in
// Pillow and TurboJPEG), estimating those coefficients from the DC
// coefficients of the blocks around.
func (d *decoder) checkFinished() error {
	for i := range d.ncomp {
		c := &d.comp[i]
		for k := 1; k <= 9; k++ {
			if c.al[k] != 0 {
				return unsupported(fmt.Sprintf("progressive JPEG whose coefficient %d of component %d is not fully coded, which libjpeg smooths", k, c.id))
			}
		}
	}
	return nil
}

// fits reports whether the coefficient x is within ±32767: one that is
// not is corrupt data (8-bit samples make coefficients of 12 bits at
// most), which libjpeg would truncate to 16 bits and image/jpeg not; and
// refinements cannot carry the others past 16 bits.
func fits(x int32) bool { return uint32(x+32767) <= 65534 }

// correct adds bit (0 or 1), as the bit p1 of its magnitude, to the
// nonzero coefficient x, unless that bit is set already (as libjpeg does).
func correct(x, p1 int16, bit uint64) int16 {
	inc := p1 & -int16(bit) &^ (x & p1)
	sgn := x >> 15 // -1 for negative x, else 0
	return x + (inc ^ sgn) - sgn
}

// refineRun corrects the nonzero coefficients of the band s.ss..s.se of
// count blocks of an EOB run in an AC refinement scan, from block bx, by
// of component c, whose grid (of this scan) is bw blocks across.
func refineRun(br *bitReader, c *component, bx, by, bw, count int, s *progressiveScan) {
	buf, end := br.buf, br.end
	pos, acc, n := br.pos, br.acc, br.n
	p1 := int16(1) << s.al
	for range count {
		i := by*c.gw + bx
		if m := c.nz[i] & s.band; m != 0 {
			coef := (*[64]int16)(c.coef[64*i:])
			for ; m != 0; m &= m - 1 {
				if n == 0 {
					pos, acc, n = refill(buf, end, pos, acc, n)
				}
				j := bits.TrailingZeros64(m) & 63
				coef[j] = correct(coef[j], p1, acc>>63)
				acc <<= 1
				n--
			}
		}
		if bx++; bx == bw {
			bx, by = 0, by+1
		}
	}
	br.pos, br.acc, br.n = pos, acc, n
}

// reconstruct dequantizes and transforms, at EOI, the coefficients of
// each component's blocks into its plane, with the table it latched,
// as libjpeg does.
func (d *decoder) reconstruct() {
	blk := &d.blk
	for i := range d.ncomp {
		c := &d.comp[i]
		for by := range c.bh {
			for bx := range c.bw {
				i := by*c.gw + bx
				coef := (*[64]int16)(c.coef[64*i:])
				blk[0] = int32(coef[0]) * c.q[0]
				nz, last := c.nz[i]&^1, 0
				if nz != 0 {
					last = 63 - bits.LeadingZeros64(nz)
				}
				for ; nz != 0; nz &= nz - 1 {
					k := bits.TrailingZeros64(nz) & 63
					blk[zigzag[k]] = int32(coef[k]) * c.q[k]
				}
				idctBlock(blk, last, c.plane[8*(by*c.stride+bx):], c.stride)
			}
		}
		c.clearPadding()
	}
}
