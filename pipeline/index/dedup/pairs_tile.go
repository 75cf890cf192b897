package dedup

import (
	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// outerBlocks is how many inner blocks of rows make the tiled searcher's
// outer block: its packed panels are read from memory once per inner
// block, and the inner block's packing (scalar Go) is paid once per
// outerBlocks·BlockRows outer rows.
const outerBlocks = 32

// tiled is the searcher of the halfdot.Tile kernel: the outer block as
// panels of TileRows normalised float32 rows, each inner block as panels
// of TileCols, every panel of one against every panel of the other with
// the rows of both in registers; the dot products of a tile are looked at
// only when one of them reaches the threshold.
type tiled struct {
	d      int
	rows   []float32 // rows as read, float32: an inner block or a chunk of the outer one
	chunk  int       // rows of a chunk of the outer block: a multiple of TileRows, at least an inner block
	a, b   []float32 // the outer and inner blocks, packed and normalised
	a0, ka int
	out    [halfdot.TileRows * halfdot.TileCols]float32
}

func newTiled(d, bs int) *tiled {
	bo := outerBlocks * bs
	chunk := (bs + halfdot.TileRows - 1) / halfdot.TileRows * halfdot.TileRows
	return &tiled{d: d, chunk: chunk, rows: make([]float32, chunk*d),
		a: make([]float32, halfdot.PackedLen(bo, d, halfdot.TileRows)),
		b: make([]float32, halfdot.PackedLen(bs, d, halfdot.TileCols))}
}

// outer reads rows [r0, r0+k), normalises and packs them, a chunk at a
// time.
func (s *tiled) outer(x *index.Index, v *vectors, r0, k int) error {
	s.a0, s.ka = r0, k
	for c0 := 0; c0 < k; c0 += s.chunk {
		n := min(s.chunk, k-c0)
		if err := x.ReadEmbeds(r0+c0, s.rows[:n*s.d], nil); err != nil {
			return err
		}
		halfdot.Pack(s.a[c0*s.d:], s.rows, v.inv[r0+c0:r0+c0+n], n, s.d, halfdot.TileRows)
	}
	return nil
}

// inner reads rows [b0, b0+kb), normalises and packs them, and appends
// the pairs of an outer row and a later inner row whose cosine is at
// least t. Rows that failed have 1/‖v‖ = 0: all-zero rows, cosine 0 < t.
func (s *tiled) inner(x *index.Index, v *vectors, b0, kb int, t float32, out []Pair) ([]Pair, error) {
	d := s.d
	if err := x.ReadEmbeds(b0, s.rows[:kb*d], nil); err != nil {
		return out, err
	}
	halfdot.Pack(s.b, s.rows, v.inv[b0:b0+kb], kb, d, halfdot.TileCols)
	const tr, tc = halfdot.TileRows, halfdot.TileCols
	for p := 0; p*tr < s.ka; p++ {
		ra0 := s.a0 + p*tr
		pa := s.a[p*tr*d : (p+1)*tr*d]
		for q := 0; q*tc < kb; q++ {
			rb0 := b0 + q*tc
			if min(rb0+tc, b0+kb)-1 <= ra0 {
				continue // no inner row after an outer one
			}
			if halfdot.Tile(pa, s.b[q*tc*d:(q+1)*tc*d], d, t, &s.out) {
				out = s.collect(v, t, ra0, min(tr, s.a0+s.ka-ra0), rb0, min(tc, b0+kb-rb0), out)
			}
		}
	}
	return out, nil
}

// collect appends the pairs of the tile in s.out (ra rows from ra0, nb
// columns from rb0) at or above t, inner row after outer row.
func (s *tiled) collect(v *vectors, t float32, ra0, na, rb0, nb int, out []Pair) []Pair {
	for r := range na {
		for c := range nb {
			ra, rb := ra0+r, rb0+c
			if cos := s.out[r*halfdot.TileCols+c]; cos >= t && rb > ra && v.ok[ra] && v.ok[rb] {
				out = append(out, Pair{ra, rb, cos})
			}
		}
	}
	return out
}
