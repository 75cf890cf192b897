package vision

import "testing"

// TestCropOffsetRound: with CropRound the crop starts where torchvision's
// CenterCrop starts it, int(round(d / 2.0)) with Python's round (halves to
// even; the values below are Python's); without it, d // 2.
func TestCropOffsetRound(t *testing.T) {
	python := []int{0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6} // [int(round(d / 2.0)) for d in range(12)]
	for d, want := range python {
		if got := cropOffset(d, true); got != want {
			t.Errorf("cropOffset(%d, round) = %d, Python's round gives %d", d, got, want)
		}
		if got := cropOffset(d, false); got != d/2 {
			t.Errorf("cropOffset(%d) = %d, want %d", d, got, d/2)
		}
	}
	if got := cropOffset(-3, true); got != -2 {
		t.Errorf("cropOffset(-3, round) = %d, want -2 (floored, as without it)", got)
	}
}
