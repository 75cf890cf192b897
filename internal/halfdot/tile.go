package halfdot

// TileRows and TileCols are the shape of the block of dot products Tile
// computes: TileRows rows of one panel against TileCols of another.
const (
	TileRows = 12
	TileCols = 32
)

// Pack writes rows [0, k) of src (k float32 rows of d values, row-major)
// scaled by scale[r] (nil: 1) into dst as panels of w rows, the layout
// Tile reads: panel p holds rows [p·w, p·w+w) at dst[p·w·d:], value i of
// its row r at dst[p·w·d+i·w+r]; the rows of the last panel past k are 0.
// dst needs PackedLen(k, d, w) values.
func Pack(dst, src []float32, scale []float32, k, d, w int) {
	np := (k + w - 1) / w
	dst = dst[:np*w*d]
	for p := range np {
		panel := dst[p*w*d : (p+1)*w*d]
		for r := range w {
			row := p*w + r
			if row >= k {
				for i := range d {
					panel[i*w+r] = 0
				}
				continue
			}
			s := float32(1)
			if scale != nil {
				s = scale[row]
			}
			for i, v := range src[row*d : (row+1)*d] {
				panel[i*w+r] = v * s
			}
		}
	}
}

// PackedLen is the length of k rows of d values packed as panels of w
// rows (Pack).
func PackedLen(k, d, w int) int { return (k + w - 1) / w * w * d }

// Tile sets out[r·TileCols+c] = Σ_{i<d} a[i·TileRows+r]·b[i·TileCols+c]
// for r < TileRows, c < TileCols: one packed panel of TileRows rows
// against one of TileCols rows (Pack), every product accumulated in
// float32 in the order of i (a fused multiply-add each in the assembly
// kernels), and reports whether any of them is ≥ t. It panics when a or b
// is shorter than a panel of d values.
func Tile(a, b []float32, d int, t float32, out *[TileRows * TileCols]float32) bool {
	if d < 0 || len(a) < TileRows*d || len(b) < TileCols*d {
		panic("halfdot: Tile: a or b shorter than a panel of d values")
	}
	if d == 0 {
		*out = [TileRows * TileCols]float32{}
		return 0 >= t
	}
	return tile(a, b, d, t, out)
}

// TileGeneric is Tile in pure Go.
func TileGeneric(a, b []float32, d int, t float32, out *[TileRows * TileCols]float32) bool {
	*out = [TileRows * TileCols]float32{}
	for i := range d {
		av := a[i*TileRows : (i+1)*TileRows : (i+1)*TileRows]
		bv := b[i*TileCols : (i+1)*TileCols : (i+1)*TileCols]
		for r, x := range av {
			o := out[r*TileCols : (r+1)*TileCols : (r+1)*TileCols]
			for c, y := range bv {
				o[c] += x * y
			}
		}
	}
	any := false
	for _, v := range out {
		any = any || v >= t
	}
	return any
}

// HasTileKernel says Tile runs an assembly kernel on this CPU and build
// (AVX-512F, or AVX2 with FMA and F16C as Dot's AVX2 kernel, on amd64
// without the purego tag); otherwise it is TileGeneric. Both kernels give
// the same outputs to the bit. DisableTile makes it false.
func HasTileKernel() bool { return !tileOff && (impl == "avx512" || impl == "avx2") }
