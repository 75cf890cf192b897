//go:build amd64 && gc && !purego

package halfdot

// tile runs the AVX-512 kernel where impl is avx512, TileGeneric
// otherwise. d > 0.
func tile(a, b []float32, d int, t float32, out *[TileRows * TileCols]float32) bool {
	if impl != "avx512" {
		return TileGeneric(a, b, d, t, out)
	}
	return tileAVX512(&a[0], &b[0], d, t, out)
}

// tileAVX512 is Tile over d > 0 values: 24 zmm accumulators (12 rows × two
// of 16 columns); for each i two loads of b and twelve broadcasts of a
// feed 24 FMAs.
//
//go:noescape
func tileAVX512(a, b *float32, d int, t float32, out *[TileRows * TileCols]float32) bool
