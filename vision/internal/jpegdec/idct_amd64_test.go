//go:build amd64 && gc && !purego

package jpegdec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestIDCTAVX2 checks idctAVX2 against its Go twin on random blocks: sparse
// and dense, of coefficients in the range of valid files and of any int32
// (where the products wrap, alike), for every last.
func TestIDCTAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("this CPU has no AVX2")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const stride = 24
	for i := range 20000 {
		var blk [64]int32
		last := 1 + rng.IntN(63)
		bound := []int32{64, 1 << 11, 1 << 16}[i%3]
		for k := 0; k <= last; k++ {
			if i%4 == 0 || rng.IntN(3) == 0 {
				switch {
				case i%5 == 4:
					blk[zigzag[k]] = int32(rng.Uint32())
				default:
					blk[zigzag[k]] = rng.Int32N(2*bound) - bound
				}
			}
		}
		a, b := blk, blk
		want := bytes.Repeat([]byte{0xa5}, 8*stride)
		got := bytes.Clone(want)
		idctGeneric(&a, last, want, stride)
		idctAVX2(&b, &got[0], stride)
		if !bytes.Equal(got, want) {
			t.Fatalf("block %d (last %d) %v:\nAVX2 %v\nGo   %v", i, last, blk, got, want)
		}
		if b != ([64]int32{}) || a != ([64]int32{}) {
			t.Fatalf("block %d: not zeroed", i)
		}
	}
}
