package vision

import (
	"fmt"
	"math"
)

// Grid is the layout of a vision transformer's patch tokens: H rows by W
// columns of patches, in row-major order after the class token. Patch p
// (0-based, not counting the class token) covers row p/W, column p%W.
type Grid struct {
	H, W int
}

// Patches returns H×W, the number of patch tokens.
func (g Grid) Patches() int { return g.H * g.W }

// Cell returns the row and column of patch p (0 ≤ p < Patches()).
func (g Grid) Cell(p int) (row, col int) { return p / g.W, p % g.W }

func (g Grid) String() string { return fmt.Sprintf("%dx%d", g.H, g.W) }

// GridFor returns the grid of an image of height×width pixels cut into
// patch×patch squares, as a convolution with stride patch does (a remainder
// smaller than a patch is dropped).
func GridFor(height, width, patch int) (Grid, error) {
	if height <= 0 || width <= 0 || patch <= 0 {
		return Grid{}, fmt.Errorf("vision: grid of a %dx%d image with %d-pixel patches: sizes must be positive", height, width, patch)
	}
	g := Grid{H: height / patch, W: width / patch}
	if g.H == 0 || g.W == 0 {
		return Grid{}, fmt.Errorf("vision: a %dx%d image is smaller than one %d-pixel patch", height, width, patch)
	}
	return g, nil
}

// InferGrid finds the grid of p patches for an image of height×width pixels
// when the patch size is unknown: of the factorisations H×W = p, the one
// whose aspect ratio is closest to the image's (square for a square image).
func InferGrid(p, height, width int) (Grid, error) {
	if p <= 0 || height <= 0 || width <= 0 {
		return Grid{}, fmt.Errorf("vision: grid of %d patches for a %dx%d image: sizes must be positive", p, height, width)
	}
	want := math.Log(float64(height) / float64(width))
	best, bestErr := Grid{}, math.Inf(1)
	for h := 1; h <= p; h++ {
		if p%h != 0 {
			continue
		}
		w := p / h
		if d := math.Abs(math.Log(float64(h)/float64(w)) - want); d < bestErr-1e-9 { // ties: the first (fewer rows)
			best, bestErr = Grid{H: h, W: w}, d
		}
	}
	return best, nil
}
