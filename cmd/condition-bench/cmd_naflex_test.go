package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestBenchNaFlex runs `naflex` on the tiny models (testdata/tinysiglip, a
// 4x4 grid; testdata/tinynaflex, its graphs built on open into a temporary
// cache): three cases per batch, every ratio against the fixed encoder at
// the same batch. The timings themselves are not checked.
func TestBenchNaFlex(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	td := filepath.Join("..", "..", "testdata")
	code, out, errs := runCLI(t, "naflex", "--fixed", filepath.Join(td, "tinysiglip"), "--naflex", filepath.Join(td, "tinynaflex"),
		"--grids", "2x7,4x4,3x5", "--images", "2", "--batch", "2,1", "--rounds", "2", "--calls", "1", "--threads", "1", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var res struct {
		Patches int              `json:"patches"`
		Cases   []naflexBenchRow `json:"cases"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Patches != 16 || len(res.Cases) != 6 {
		t.Fatalf("%d patches, %d cases; want 16 and 6:\n%s", res.Patches, len(res.Cases), out)
	}
	for i, c := range res.Cases {
		want := []string{"fixed 32x32 px", "naflex 4x4", "naflex 2x7,4x4,3x5"}[i%3]
		if c.Case != want || c.Batch != []int{2, 1}[i/3] || len(c.RoundsMS) != 2 || c.MedianMS <= 0 || c.Ratio <= 0 {
			t.Errorf("case %d: %+v; want %q at batch %d", i, c, want, []int{2, 1}[i/3])
		}
		if i%3 == 0 && (c.Ratio != 1 || c.RatioMin != 1 || c.RatioMax != 1) {
			t.Errorf("case %d: the fixed encoder's ratio is %v [%v, %v]", i, c.Ratio, c.RatioMin, c.RatioMax)
		}
		if !(c.RatioMin <= c.Ratio && c.Ratio <= c.RatioMax) {
			t.Errorf("case %d: ratio %v outside [%v, %v]", i, c.Ratio, c.RatioMin, c.RatioMax)
		}
		// The patch sizes differ (8 and 4): no comparison of outputs.
		if c.MaxRelDiff != nil {
			t.Errorf("case %d: compared with the fixed encoder's outputs", i)
		}
	}
	for _, args := range [][]string{{"naflex"}, {"naflex", "--fixed", "a"}, {"naflex", "--fixed", "a", "--naflex", "b", "--batch", "3"},
		{"naflex", "--fixed", "a", "--naflex", "b", "extra"}} {
		if code, _, errs := runCLI(t, args...); code != exitUsage || !strings.Contains(errs, "naflex") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestParseGrids: ROWSxCOLUMNS lists, each within the budget.
func TestParseGrids(t *testing.T) {
	g, err := parseGrids("11x23, 16x16", 256)
	if err != nil || len(g) != 2 || g[0] != [2]int{11, 23} || g[1] != [2]int{16, 16} {
		t.Errorf("%v %v", g, err)
	}
	for _, s := range []string{"17x16", "0x4", "4", "4x", "ax4"} {
		if _, err := parseGrids(s, 256); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

// TestPatchify: pixel (c, y, x) of patch (gy, gx) lands at row gy·side+gx,
// column (y·p+x)·ch+c.
func TestPatchify(t *testing.T) {
	const n, ch, side, p = 2, 3, 2, 2
	s := side * p
	px := make([]float32, n*ch*s*s)
	for i := range px {
		px[i] = float32(i)
	}
	dst := make([]float32, n*side*side*ch*p*p)
	patchify(dst, px, n, ch, side, p)
	for i := 0; i < n; i++ {
		for gy := 0; gy < side; gy++ {
			for gx := 0; gx < side; gx++ {
				for y := 0; y < p; y++ {
					for x := 0; x < p; x++ {
						for c := 0; c < ch; c++ {
							got := dst[((i*side*side+gy*side+gx)*p*p+y*p+x)*ch+c]
							if want := px[((i*ch+c)*s+gy*p+y)*s+gx*p+x]; got != want {
								t.Fatalf("image %d patch (%d,%d) pixel (%d,%d,%d): %v, want %v", i, gy, gx, c, y, x, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestPairedRatios: each round's ratio, then their median and range.
func TestPairedRatios(t *testing.T) {
	med, lo, hi := pairedRatios([]float64{2, 3, 8}, []float64{2, 2, 4})
	if med != 1.5 || lo != 1 || hi != 2 {
		t.Errorf("%v [%v, %v], want 1.5 [1, 2]", med, lo, hi)
	}
	if med, _, _ := pairedRatios([]float64{1}, nil); med != 0 {
		t.Errorf("unpaired: %v", med)
	}
	if med, lo, hi := pairedRatios([]float64{1, 3}, []float64{0, 2}); med != 1.5 || lo != 1.5 || hi != 1.5 {
		t.Errorf("a round of no time: %v [%v, %v], want 1.5", med, lo, hi)
	}
	if med, _, _ := pairedRatios([]float64{1}, []float64{0}); med != 0 {
		t.Errorf("no time at all: %v", med)
	}
}
