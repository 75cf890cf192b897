package halfdot

import (
	"fmt"
	"slices"
)

// Impls names the kernels this CPU and build can run, fastest first:
// "avx512", "avx2" (where the CPU has AVX2, FMA and F16C, AVX-512 or not)
// and "go".
func Impls() []string { return available() }

// SetImpl makes Dot, Dot4, Dot4x2, Tile and TileInt8 run the named kernel
// (one of Impls) until restore is called: for tests and benchmarks, which
// run an AVX2 CPU's kernels on an AVX-512 one ("avx2": no VNNI tile
// either). It must not be called while kernels run on other goroutines.
func SetImpl(name string) (restore func(), err error) {
	if have := Impls(); !slices.Contains(have, name) {
		return nil, fmt.Errorf("halfdot: kernel %q not available on this CPU and build (have %q)", name, have)
	}
	prev := impl
	impl = name
	return func() { impl = prev }, nil
}

// tileOff turns the Tile kernels off (DisableTile).
var tileOff bool

// DisableTile makes HasTileKernel false and Tile run TileGeneric until
// restore is called: for benchmarks that time a caller's search without
// the tile kernel (its row-by-row path) in the same run. It must not be
// called while kernels run on other goroutines.
func DisableTile() (restore func()) {
	prev := tileOff
	tileOff = true
	return func() { tileOff = prev }
}
