package main

import (
	"math"
	"testing"

	"github.com/conditionhq/condition/models/clip"
)

// TestParseReadouts: --readout empty is the engine's default, a list is
// split at commas, and names are checked.
func TestParseReadouts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"", []string{""}, false},
		{"clearclip", []string{"clearclip"}, false},
		{"raw, clearclip,naclip", []string{"raw", "clearclip", "naclip"}, false},
		{"raw,dense", nil, true},
		{"raw,", nil, true},
		{"naclip,naclip", nil, true},
	} {
		got, err := parseReadouts(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if !tc.bad && len(got) != len(tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if string(got[i]) != tc.want[i] {
				t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
			}
		}
	}
}

// TestCompareReadouts: each readout's encoder time over the first's, from
// the pairs of the same repeat: median, lowest and highest.
func TestCompareReadouts(t *testing.T) {
	arm := func(name string, rates, cpu []float64) *pipeArm {
		a := &pipeArm{res: pipeBenchResult{Readout: clip.Readout(name)}}
		for i, r := range rates {
			a.res.Pairs = append(a.res.Pairs, pipeBenchPair{EncoderPerSec: r, EncoderCPUms: cpu[i]})
		}
		a.finish()
		return a
	}
	// The machine slows down in the second repeat: both readouts see it.
	raw := arm("raw", []float64{10, 5, 10}, []float64{200, 200, 200})
	cc := arm("clearclip", []float64{9.6, 4.9, 9.5}, []float64{206, 204, 210})
	if compareReadouts([]*pipeArm{raw}) != nil {
		t.Error("one readout compared")
	}
	cmp := compareReadouts([]*pipeArm{raw, cc})
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if c := cmp[0]; c.Readout != "raw" || c.Ratio != 1 || c.RatioMin != 1 || c.RatioMax != 1 || c.CPURatio != 1 {
		t.Errorf("raw against itself: %+v", c)
	}
	c := cmp[1]
	if !near(c.Ratio, 10/9.6) || !near(c.RatioMin, 5/4.9) || !near(c.RatioMax, 10/9.5) {
		t.Errorf("clearclip: ratio %v [%v, %v], want %v [%v, %v]", c.Ratio, c.RatioMin, c.RatioMax, 10/9.6, 5/4.9, 10/9.5)
	}
	if !near(c.CPURatio, 1.03) || !near(c.CPURatioMin, 1.02) || !near(c.CPURatioMax, 1.05) {
		t.Errorf("clearclip CPU: %v [%v, %v]", c.CPURatio, c.CPURatioMin, c.CPURatioMax)
	}
	if !near(c.EncoderMs, 1000/9.5) {
		t.Errorf("clearclip ms/image %v, want %v (the median rate's)", c.EncoderMs, 1000/9.5)
	}
}
