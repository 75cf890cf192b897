package graphbuild

import (
	"slices"
	"strings"
	"testing"
)

// TestPEARLReadoutConfig: PEARL reads the layer's q, k and v projections;
// a dynamic graph with class rows (which it could not mask) and a DINOv2
// block are refused, naming what is wrong.
func TestPEARLReadoutConfig(t *testing.T) {
	c := ReadoutConfig{Kind: ReadoutPEARL, Width: 8, Heads: 2, Eps: 1e-5, Class: 1, GridH: 2, GridW: 2, Prefix: "l."}
	ts := c.ReadoutTensors()
	for _, p := range []string{"q_proj", "k_proj", "v_proj", "out_proj"} {
		if !slices.Equal(ts["l.self_attn."+p+".weight"], []int{8, 8}) || !slices.Equal(ts["l.self_attn."+p+".bias"], []int{8}) {
			t.Errorf("ReadoutTensors: %s missing or misshapen: %v", p, ts)
		}
	}
	if err := c.check(); err != nil {
		t.Errorf("a static PEARL readout: %v", err)
	}
	dyn := c
	dyn.Dynamic = true
	if err := dyn.check(); err == nil || !strings.Contains(err.Error(), "1 class rows") {
		t.Errorf("dynamic with a class row: %v", err)
	}
	dyn.Class = 0
	if err := dyn.check(); err != nil {
		t.Errorf("dynamic without class rows: %v", err)
	}
	dino := c
	dino.Dino = &DinoBlock{Inter: 16, Act: "gelu", Norm: "n", NormEps: 1e-6}
	if err := dino.check(); err == nil || !strings.Contains(err.Error(), "DINOv2") {
		t.Errorf("a DINOv2 block: %v", err)
	}
}
