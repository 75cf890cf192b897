package graphbuild

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// TestNACLIPBias: G equals torch's transcription of NACLIP's construction
// (testdata/tinyclip/make_readout_golden.py: a 4x4 grid and a class token,
// σ = 5), and its class row and column are zero.
func TestNACLIPBias(t *testing.T) {
	g, err := tensorio.ReadNPY(filepath.Join("..", "..", "testdata", "tinyclip", "golden", "readout_naclip_bias.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want := g.Data.([]float64)
	got := NACLIPBias(1, 4, 4, NACLIPSigma)
	if len(got) != len(want) {
		t.Fatalf("%d values, torch has %d", len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-7 {
			t.Fatalf("G[%d][%d] = %g, torch %g", i/17, i%17, got[i], want[i])
		}
	}
	for k := range 17 {
		if got[k] != 0 || got[k*17] != 0 {
			t.Fatalf("class row or column not zero at %d", k)
		}
	}
	// A non-square grid: the Gaussian of the row and column distance.
	g2 := NACLIPBias(1, 2, 3, 2)
	if v, w := g2[(1+0)*7+1+5], math.Exp(-(1.0+4.0)/8); math.Abs(float64(v)-w) > 1e-7 {
		t.Errorf("2x3 grid, patches (0,0) and (1,2): %g, want %g", v, w)
	}
}

// TestNACLIPBiasNoClass: without a class token G is the patches' Gaussian
// alone, as torch's transcription of NACLIP's construction gives it for
// SigLIP (testdata/tinysiglip/make_readout_golden.py: a 4x4 grid, σ = 5).
func TestNACLIPBiasNoClass(t *testing.T) {
	g, err := tensorio.ReadNPY(filepath.Join("..", "..", "testdata", "tinysiglip", "golden", "readout_naclip_bias.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want := g.Data.([]float64)
	got := NACLIPBias(0, 4, 4, NACLIPSigma)
	if len(got) != len(want) || len(want) != 16*16 {
		t.Fatalf("%d values, torch has %d", len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-7 {
			t.Fatalf("G[%d][%d] = %g, torch %g", i/16, i%16, got[i], want[i])
		}
	}
}

// TestReadoutGraphRefuses: an unknown kind, heads that do not divide the
// width, a tensor of the wrong size: errors naming what is wrong.
func TestReadoutGraphRefuses(t *testing.T) {
	c := ReadoutConfig{Kind: ReadoutClearCLIP, Width: 8, Heads: 2, Eps: 1e-5, Class: 1, GridH: 2, GridW: 2, Prefix: "l."}
	read := func(name string) ([]float32, error) { return make([]float32, 8), nil } // [8] for every tensor: weights too small
	if _, err := ReadoutGraph(c, read); err == nil || !strings.Contains(err.Error(), "self_attn") {
		t.Errorf("wrong-size weight: %v", err)
	}
	bad := c
	bad.Kind = "dense"
	if _, err := ReadoutGraph(bad, read); err == nil || !strings.Contains(err.Error(), `readout "dense"`) {
		t.Errorf("unknown kind: %v", err)
	}
	bad = c
	bad.Heads = 3
	if _, err := ReadoutGraph(bad, read); err == nil || !strings.Contains(err.Error(), "3 heads") {
		t.Errorf("heads: %v", err)
	}
	bad = c
	bad.PostLayerNorm = "post"
	if _, err := ReadoutGraph(bad, read); err == nil || !strings.Contains(err.Error(), "post's epsilon is 0") {
		t.Errorf("post_layernorm without epsilon: %v", err)
	}
	// The post layer norm's tensors are read, under their own names.
	bad.PostEps = 1e-6
	ts := bad.ReadoutTensors()
	if !slices.Equal(ts["post.weight"], []int{8}) || !slices.Equal(ts["post.bias"], []int{8}) {
		t.Errorf("ReadoutTensors with PostLayerNorm: %v", ts)
	}
}
