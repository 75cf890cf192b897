package graphbuild

import (
	"math"
	"testing"
)

// TestTipsPositionsOffGrid compares the positions tipsPositions gives the
// tiny TIPSv2's patch rows with torch's (testdata/tinytips/
// generate_offgrid.py, Tipsv2VisionEmbeddings' resize): at 24x20 and 12x8
// pixels resized to the grid's size, and at 24x20 with
// interpolate_offset 0.1 resized by DINOv2's scale factors ((6+0.1)/4,
// (5+0.1)/4), whose values differ from the former's by up to 0.22. All
// bit for bit.
func TestTipsPositionsOffGrid(t *testing.T) {
	cfg := readTipsConfig(t, tinyTipsDir+"/config.json")
	ck, err := OpenCheckpoint(tinyTipsDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, k := range []struct {
		golden string
		h, w   int
		offset float64
	}{{"offgrid_24x20", 24, 20, 0}, {"offgrid_12x8", 12, 8, 0}, {"offgrid_offset_24x20", 24, 20, 0.1}} {
		c := cfg
		c.Height, c.Width, c.Vision.InterpolateOffset = k.h, k.w, k.offset
		if err := c.check(); err != nil {
			t.Fatalf("%s: %v", k.golden, err)
		}
		pos, err := tipsPositions(ck, c)
		if err != nil {
			t.Fatal(err)
		}
		want := floats(t, readNPYIn(t, tinyTipsDir, k.golden+"_positions"))[c.Vision.HiddenSize:]
		if len(pos) != len(want) {
			t.Fatalf("%s: %d position values, torch %d", k.golden, len(pos), len(want))
		}
		for i := range want {
			if math.Float32bits(pos[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: position value %d is %g, torch %g", k.golden, i, pos[i], want[i])
			}
		}
	}
}
