//go:build amd64 && gc && !purego

package halfdot

// tile runs impl's kernel (AVX-512 or AVX2), TileGeneric where impl is
// go or the kernels are off (DisableTile). d > 0.
func tile(a, b []float32, d int, t float32, out *[TileRows * TileCols]float32) bool {
	if tileOff {
		return TileGeneric(a, b, d, t, out)
	}
	switch impl {
	case "avx512":
		return tileAVX512(&a[0], &b[0], d, t, out)
	case "avx2":
		return tileAVX2(&a[0], &b[0], d, t, out)
	}
	return TileGeneric(a, b, d, t, out)
}

// tileAVX512 is Tile over d > 0 values: 24 zmm accumulators (12 rows × two
// of 16 columns); for each i two loads of b and twelve broadcasts of a
// feed 24 FMAs.
//
//go:noescape
func tileAVX512(a, b *float32, d int, t float32, out *[TileRows * TileCols]float32) bool

// tileAVX2 is Tile over d > 0 values in four sub-tiles of 6 rows × 16
// columns (rows 0–5 and 6–11 against columns 0–15 and 16–31), each a pass
// over the d values with 12 ymm accumulators (6 rows × two of 8 columns):
// for each i two loads of b and six broadcasts of a feed 12 FMAs. Each
// dot product is the same chain of FMAs, in the order of i from 0, as in
// tileAVX512, so the two kernels' outputs are equal to the bit.
//
//go:noescape
func tileAVX2(a, b *float32, d int, t float32, out *[TileRows * TileCols]float32) bool
