//go:build amd64 && gc && !purego

package halfdot

import "golang.org/x/sys/cpu"

// hasVNNI says the CPU has AVX512-VNNI (VPDPBUSD).
var hasVNNI = cpu.X86.HasAVX512VNNI

// tileInt8 runs the VNNI kernel where HasInt8TileKernel, TileInt8Generic
// otherwise. d > 0.
func tileInt8(a []uint8, b []int8, d int, sums *[TileCols]int32, sa *[TileRows]float32, sb *[TileCols]float32, t float32, out *[TileRows * TileCols]int32) bool {
	if !HasInt8TileKernel() {
		return TileInt8Generic(a, b, d, sums, sa, sb, t, out)
	}
	return tileInt8VNNI(&a[0], &b[0], (d+3)/4, sums, sa, sb, t, out)
}

// tileInt8VNNI is TileInt8 over n > 0 groups of four values: 24 zmm
// accumulators (12 rows × two of 16 columns) start at −128·sums; for each
// group two loads of b and twelve broadcasts of a feed 24 VPDPBUSD.
//
//go:noescape
func tileInt8VNNI(a *uint8, b *int8, n int, sums *[TileCols]int32, sa *[TileRows]float32, sb *[TileCols]float32, t float32, out *[TileRows * TileCols]int32) bool
