//go:build !amd64 || !gc || purego

package halfdot

// hasVNNI is false: this build has no assembly kernels.
const hasVNNI = false

func tileInt8(a []uint8, b []int8, d int, sums *[TileCols]int32, sa *[TileRows]float32, sb *[TileCols]float32, t float32, out *[TileRows * TileCols]int32) bool {
	return TileInt8Generic(a, b, d, sums, sa, sb, t, out)
}
