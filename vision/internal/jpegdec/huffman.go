package jpegdec

import "fmt"

// lookBits is the number of bits a Huffman table's lookup resolves at once.
const lookBits = 9

// huffTable is a Huffman table prepared for decoding. fast, indexed by
// the next lookBits bits of the stream, holds for each code of up to
// lookBits bits either its symbol and length (sym<<8 | len), or, where the
// code and the extra bits of its coefficient fit together, the
// coefficient itself: value<<16 | run<<8 | fastValue | total length.
// 0 means the code is longer. Longer codes are found from maxcode and
// valoff, canonically (ITU T.81 F.2.2.3).
type huffTable struct {
	fast    [1 << lookBits]int32
	maxcode [18]int32 // maxcode[l]: the largest code of l bits, -1 if none
	valoff  [17]int32 // vals index of a code of l bits: code + valoff[l]
	vals    [256]uint8
	defined bool
	// bogus marks a table that libjpeg refuses once a scan uses it (not
	// when it is defined): one whose codes overflow their lengths or take
	// the all-ones code of one, or a DC table with a symbol over 15.
	bogus bool
}

// usable reports whether a scan may decode with t: defined, and not one
// libjpeg refuses.
func (t *huffTable) usable() bool { return t.defined && !t.bogus }

// fastValue marks a fast entry that holds a coefficient.
const fastValue = 0x80

// readDHT reads Huffman tables.
func (d *decoder) readDHT(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return formatError("short Huffman table segment (DHT)")
		}
		tc, th := seg[0]>>4, seg[0]&15
		if tc > 1 || th > 3 || (d.sof == markSOF0 && th > 1) {
			return formatError(fmt.Sprintf("Huffman table class %d, number %d", tc, th))
		}
		var counts [16]int
		total := 0
		for i := range counts {
			counts[i] = int(seg[1+i])
			total += counts[i]
		}
		if total == 0 || total > 256 || len(seg) < 17+total {
			return formatError(fmt.Sprintf("Huffman table of %d codes in %d bytes", total, len(seg)))
		}
		t := &d.dc[th]
		if tc == 1 {
			t = &d.ac[th]
		}
		if err := t.build(&counts, seg[17:17+total], tc == 0); err != nil {
			return err
		}
		seg = seg[17+total:]
	}
	return nil
}

// build prepares t from the number of codes of each length (1 to 16
// bits) and their symbols, in canonical order. A table libjpeg would
// refuse is kept as bogus, for the scans that use it to fail (see
// huffTable.bogus).
func (t *huffTable) build(counts *[16]int, vals []byte, dc bool) error {
	t.defined, t.bogus = true, false
	clear(t.fast[:])
	copy(t.vals[:], vals)
	if dc {
		for _, v := range vals {
			if v > 15 {
				t.bogus = true
				return nil
			}
		}
	}
	code, k := 0, 0
	for l := 1; l <= 16; l++ {
		n := counts[l-1]
		t.valoff[l] = int32(k - code)
		t.maxcode[l] = -1
		if n > 0 {
			if code+n >= 1<<l {
				// More codes than the length holds, or its all-ones code.
				t.bogus = true
				return nil
			}
			t.maxcode[l] = int32(code + n - 1)
		}
		for range n {
			if l <= lookBits {
				t.fill(code, l, vals[k], dc)
			}
			code++
			k++
		}
		code <<= 1
	}
	t.maxcode[17] = 1 << 30 // stops the search of a longer code
	return nil
}

// fill sets the fast entries of the l-bit code for sym.
func (t *huffTable) fill(code, l int, sym byte, dc bool) {
	run, size := int(sym>>4), int(sym&15)
	if dc {
		run, size = 0, int(sym)
	}
	free := lookBits - l
	base := code << free
	for x := 0; x < 1<<free; x++ {
		e := int32(sym)<<8 | int32(l)
		switch {
		case !dc && sym == 0xf0: // sixteen zeros
			e = 15<<8 | fastValue | int32(l)
		case !dc && size == 0: // end of block, or invalid in a baseline scan
		case size <= free && size <= 11:
			v := int32(x>>(free-size)) & (1<<size - 1)
			e = extend(v, size)<<16 | int32(run)<<8 | fastValue | int32(l+size)
		}
		t.fast[base|x] = e
	}
}

// extend turns the size bits v of a coefficient into its value (ITU T.81
// F.2.2.1): v below 2^(size-1) stands for v - 2^size + 1.
func extend(v int32, size int) int32 {
	if size == 0 {
		return 0
	}
	if v < 1<<(size-1) {
		v += -1<<size + 1
	}
	return v
}
