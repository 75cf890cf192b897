package jpegdec

import "encoding/binary"

// zigzag[k] is the natural (row-major) index of the k-th coefficient in
// the order they are coded (ITU T.81 figure A.6): anti-diagonals, the
// first going right along row 0, alternating direction. zigzagCols[k] is
// how many columns, from the left, the first k+1 coefficients touch, and
// zigzagRows[k] how many rows from the top.
var zigzag, zigzagCols, zigzagRows [64]uint8

func init() {
	k := 0
	for s := 0; s < 15; s++ { // s = row + column
		for i := 0; i <= s; i++ {
			r := i // odd diagonals go down, from the top row
			if s%2 == 0 {
				r = s - i // even ones go up, from the left column
			}
			c := s - r
			if r < 8 && c < 8 {
				zigzag[k] = uint8(8*r + c)
				k++
			}
		}
	}
	cols, rows := 0, 0
	for k, n := range zigzag {
		cols, rows = max(cols, int(n%8)+1), max(rows, int(n/8)+1)
		zigzagCols[k], zigzagRows[k] = uint8(cols), uint8(rows)
	}
}

// putRow stores the 8 bytes of w, low byte first.
func putRow(out []byte, w uint64) { binary.LittleEndian.PutUint64(out, w) }
