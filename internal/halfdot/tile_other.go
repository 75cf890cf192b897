//go:build !amd64 || !gc || purego

package halfdot

func tile(a, b []float32, d int, t float32, out *[TileRows * TileCols]float32) bool {
	return TileGeneric(a, b, d, t, out)
}
