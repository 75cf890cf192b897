package vision_test

import (
	"testing"

	"github.com/conditionhq/condition/vision"
)

func TestGridFor(t *testing.T) {
	for _, c := range []struct {
		h, w, p int
		want    vision.Grid
	}{
		{224, 224, 32, vision.Grid{H: 7, W: 7}},
		{224, 224, 16, vision.Grid{H: 14, W: 14}},
		{336, 336, 14, vision.Grid{H: 24, W: 24}},
		{32, 64, 8, vision.Grid{H: 4, W: 8}},
		{230, 224, 32, vision.Grid{H: 7, W: 7}}, // remainder dropped, as a strided convolution does
	} {
		g, err := vision.GridFor(c.h, c.w, c.p)
		if err != nil || g != c.want {
			t.Errorf("GridFor(%d, %d, %d) = %v, %v; want %v", c.h, c.w, c.p, g, err, c.want)
		}
	}
	for _, bad := range [][3]int{{0, 224, 32}, {224, 224, 0}, {16, 224, 32}} {
		if _, err := vision.GridFor(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("GridFor%v: no error", bad)
		}
	}
}

func TestInferGrid(t *testing.T) {
	for _, c := range []struct {
		p, h, w int
		want    vision.Grid
	}{
		{49, 224, 224, vision.Grid{H: 7, W: 7}},
		{196, 224, 224, vision.Grid{H: 14, W: 14}},
		{32, 32, 64, vision.Grid{H: 4, W: 8}},
		{32, 64, 32, vision.Grid{H: 8, W: 4}},
		{7, 224, 224, vision.Grid{H: 1, W: 7}},
	} {
		g, err := vision.InferGrid(c.p, c.h, c.w)
		if err != nil || g != c.want {
			t.Errorf("InferGrid(%d, %d, %d) = %v, %v; want %v", c.p, c.h, c.w, g, err, c.want)
		}
	}
	g := vision.Grid{H: 3, W: 5}
	if r, c := g.Cell(7); r != 1 || c != 2 || g.Patches() != 15 {
		t.Errorf("Cell(7) of 3x5 = %d,%d; Patches %d", r, c, g.Patches())
	}
}
