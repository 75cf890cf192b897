package eval

import (
	"math"
	"testing"
)

// TestMapIoU: DAAM's IoU in closed form: a 2×2 map hot on its left column,
// bilinear to 4×4 pixels, covers the left half exactly (0.75 at the second
// pixel, 0.25 at the third, against the threshold 0.4).
func TestMapIoU(t *testing.T) {
	m := []float32{3, -1, 3, -1}
	left, right, top := make([]float64, 16), make([]float64, 16), make([]float64, 16)
	for i := range 16 {
		if i%4 < 2 {
			left[i] = 1
		} else {
			right[i] = 1
		}
		if i < 8 {
			top[i] = 1
		}
	}
	for _, c := range []struct {
		name string
		obj  []float64
		want float64
	}{{"left", left, 1}, {"right", right, 0}, {"top", top, 4.0 / 12}} {
		if got := mapIoU(m, 2, 2, c.obj, 4, 4); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: IoU %g, want %g", c.name, got, c.want)
		}
	}
	if got := mapIoU([]float32{1, 1, 1, 1}, 2, 2, left, 4, 4); got != 0 {
		t.Errorf("a flat map: IoU %g, want 0 (nothing above the threshold)", got)
	}
}
