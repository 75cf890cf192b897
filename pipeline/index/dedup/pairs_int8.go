package dedup

import (
	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// filtered is the searcher of the int8 filter: the outer block quantized
// as panels of TileRows rows (halfdot.PackUint8), the inner blocks read
// from the index quantized once (quantized), every panel of one against
// every panel of the other in int8 (halfdot.TileInt8); a tile whose
// coarse values reach the floor of its two panels (coarseFloor) is
// compared again in float32 (halfdot.Tile) from the rows as the float32
// search packs them, and its pairs are those of that search, bit for bit:
// no tile below the floor holds a pair at or above the threshold.
type filtered struct {
	qz       *quantized
	a0, ka   int
	a        []uint8   // the outer block, packed
	sa       []float32 // its rows' scales, whole panels
	pa       []norms   // its panels' largest norms
	rows     []float32 // rows as read: a chunk of the outer block, or a tile's
	q        []int8    // a chunk quantized, row-major
	nm       []norms   // a chunk's rows' norms
	fa, fb   []float32 // a tile's rows packed in float32, for halfdot.Tile
	out      [halfdot.TileRows * halfdot.TileCols]int32
	fout     [halfdot.TileRows * halfdot.TileCols]float32
	rescored int64 // pairs of the tiles compared again
}

func newFiltered(qz *quantized, bs int) *filtered {
	const tr, tc = halfdot.TileRows, halfdot.TileCols
	bo := outerBlocks * bs
	np := (bo + tr - 1) / tr
	chunk := max(bs, tc)
	return &filtered{qz: qz, a: make([]uint8, halfdot.PackedLenInt8(bo, qz.d, tr)), sa: make([]float32, np*tr), pa: make([]norms, np),
		rows: make([]float32, chunk*qz.d), q: make([]int8, bo*qz.d), nm: make([]norms, chunk),
		fa: make([]float32, tr*qz.d), fb: make([]float32, tc*qz.d)}
}

// outer reads rows [r0, r0+k), quantizes and packs them, a chunk at a
// time.
func (s *filtered) outer(x *index.Index, v *vectors, r0, k int) error {
	const tr = halfdot.TileRows
	d, chunk := v.d, len(s.nm)
	s.a0, s.ka = r0, k
	clear(s.pa)
	for c0 := 0; c0 < k; c0 += chunk {
		n := min(chunk, k-c0)
		if err := readQuantized(x, v, r0+c0, n, s.rows, s.q[c0*d:], s.sa[c0:], s.nm); err != nil {
			return err
		}
		for i, m := range s.nm[:n] {
			s.pa[(c0+i)/tr].raise(m)
		}
	}
	clear(s.sa[k:])
	halfdot.PackUint8(s.a, s.q, k, d)
	return nil
}

// inner compares the outer block with the inner rows [b0, b0+kb): the
// panels of the quantized index that hold them, each column outside them
// left out of the pairs.
func (s *filtered) inner(x *index.Index, v *vectors, b0, kb int, t float32, out []Pair) ([]Pair, error) {
	const tr, tc = halfdot.TileRows, halfdot.TileCols
	qz, d := s.qz, v.d
	alen, blen := halfdot.PackedLenInt8(tr, d, tr), halfdot.PackedLenInt8(tc, d, tc)
	for p := 0; p*tr < s.ka; p++ {
		ra0 := s.a0 + p*tr
		pa, sa := s.a[p*alen:(p+1)*alen], (*[tr]float32)(s.sa[p*tr:])
		for q := b0 / tc; q*tc < b0+kb; q++ {
			lo, hi := max(b0, q*tc), min(b0+kb, q*tc+tc)
			if hi-1 <= ra0 {
				continue // no inner row after an outer one
			}
			floor, na := coarseFloor(t, s.pa[p], qz.panels[q], d), min(tr, s.a0+s.ka-ra0)
			sb := (*[tc]float32)(qz.scale[q*tc:])
			if !halfdot.TileInt8(pa, qz.q[q*blen:(q+1)*blen], d, (*[tc]int32)(qz.sums[q*tc:]), sa, sb, floor, &s.out) {
				continue
			}
			if (lo <= ra0+na-1 || lo > q*tc || hi < q*tc+tc) && !s.passes(floor, sa, sb, ra0, na, q*tc, lo, hi) {
				continue // the tile reached the floor only at pairs it leaves out
			}
			var err error
			if out, err = s.rescore(x, v, t, ra0, na, q*tc, lo, hi, out); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// passes says whether a coarse value of the tile in s.out (outer rows
// from ra0, inner rows from rb0) at a pair it keeps (an inner row in
// [lo, hi) after the outer row) reaches floor: TileInt8's test over
// those pairs only, for the tiles that straddle the diagonal or the
// inner block's ends.
func (s *filtered) passes(floor float32, sa *[halfdot.TileRows]float32, sb *[halfdot.TileCols]float32, ra0, na, rb0, lo, hi int) bool {
	for r := range na {
		for c := max(lo, ra0+r+1) - rb0; c < hi-rb0; c++ {
			if float32(float32(float32(s.out[r*halfdot.TileCols+c])*sb[c])*sa[r]) >= floor {
				return true
			}
		}
	}
	return false
}

// rescore compares the outer rows [ra0, ra0+na) with the inner rows of
// the panel from rb0 in float32, as the float32 search does (halfdot.Pack
// of the rows as read, times 1/‖v‖; halfdot.Tile), and appends the pairs
// of an inner row in [lo, hi) after an outer row at or above t.
func (s *filtered) rescore(x *index.Index, v *vectors, t float32, ra0, na, rb0, lo, hi int, out []Pair) ([]Pair, error) {
	const tr, tc = halfdot.TileRows, halfdot.TileCols
	d := v.d
	nb := min(tc, v.n-rb0)
	if err := x.ReadEmbeds(ra0, s.rows[:na*d], nil); err != nil {
		return out, err
	}
	halfdot.Pack(s.fa, s.rows, v.inv[ra0:ra0+na], na, d, tr)
	if err := x.ReadEmbeds(rb0, s.rows[:nb*d], nil); err != nil {
		return out, err
	}
	halfdot.Pack(s.fb, s.rows, v.inv[rb0:rb0+nb], nb, d, tc)
	for r := range na {
		s.rescored += int64(max(0, hi-max(lo, ra0+r+1)))
	}
	if !halfdot.Tile(s.fa, s.fb, d, t, &s.fout) {
		return out, nil
	}
	for r := range na {
		for c := lo - rb0; c < hi-rb0; c++ {
			ra, rb := ra0+r, rb0+c
			if cos := s.fout[r*tc+c]; cos >= t && rb > ra && v.ok[ra] && v.ok[rb] {
				out = append(out, Pair{ra, rb, cos})
			}
		}
	}
	return out, nil
}
