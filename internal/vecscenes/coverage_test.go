package vecscenes

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/vision"
)

// TestStretchCoverage checks the coverage of a preprocessor that resizes the
// whole image: by hand on an 8×4 mask, and against CropCoverage on square
// scenes, where the crop is the whole image too.
func TestStretchCoverage(t *testing.T) {
	// Object 1 fills the left half; object 2 two pixels of the top right
	// cell (4×2 pixels at grid 2).
	lab := make([]uint8, 8*4)
	for y := range 4 {
		for x := range 8 {
			if x < 4 {
				lab[y*8+x] = 1
			}
		}
	}
	lab[0*8+6], lab[0*8+7] = 2, 2
	got := stretchCoverage(lab, 8, 4, 2, 2)
	want := [][]float64{{1, 0, 1, 0}, {0, 0.25, 0, 0}}
	for k := range want {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("object %d: %v, want %v", k, got[k], want[k])
		}
	}

	g := Generator{Seed: 2002, Objects: 2}
	square := 0
	for i := 0; square < 3 && i < 200; i++ {
		s := g.Scene(i)
		if s.W != s.H {
			continue
		}
		square++
		for _, grid := range []int{4, 8} {
			crop, st := s.CropCoverage(64, grid), s.StretchCoverage(grid)
			for k := range crop {
				for j := range crop[k] {
					// A pixel whose centre is on a cell edge may fall
					// either side in floating point.
					if d := math.Abs(crop[k][j] - st[k][j]); d > 2*float64(grid)/float64(s.W) {
						t.Errorf("scene %d (%dx%d), grid %d, object %d, cell %d: %.4f, CropCoverage %.4f", i, s.W, s.H, grid, k, j, st[k][j], crop[k][j])
					}
				}
			}
		}
	}
	if square == 0 {
		t.Fatal("no square scene among the first 200")
	}
}

// TestCoverage: Coverage is CropCoverage at the crop's side for CLIP's
// preprocessing and StretchCoverage for SigLIP's, which differ on scenes
// that are not square.
func TestCoverage(t *testing.T) {
	clip := vision.DefaultPreprocessor()
	clip.Size.ShortestEdge, clip.CropSize = 64, vision.Size{Height: 64, Width: 64}
	siglip := vision.SiglipPreprocessor()
	g := Generator{Seed: 2002, Objects: 2}
	wide, checked := 0, 0
	for i := range 20 {
		s := g.Scene(i)
		for _, grid := range []int{4, 8} {
			got, err := s.Coverage(clip, grid)
			if err != nil {
				t.Fatal(err)
			}
			crop := s.CropCoverage(64, grid)
			if !reflect.DeepEqual(got, crop) {
				t.Errorf("scene %d, grid %d, CLIP: %v, want CropCoverage %v", i, grid, got, crop)
			}
			got, err = s.Coverage(siglip, grid)
			if err != nil {
				t.Fatal(err)
			}
			st := s.StretchCoverage(grid)
			if !reflect.DeepEqual(got, st) {
				t.Errorf("scene %d, grid %d, SigLIP: %v, want StretchCoverage %v", i, grid, got, st)
			}
			checked++
			if s.W != s.H && !reflect.DeepEqual(crop, st) {
				wide++
			}
		}
	}
	if wide == 0 {
		t.Fatalf("the crop's and the stretch's coverage agree on all %d scenes and grids: the test cannot tell them apart", checked)
	}
}

// TestCheckPreprocessor: CLIP's and SigLIP's preprocessing are taken;
// others, whose crop the scenes' coverage would not follow, are refused by
// CheckPreprocessor and Coverage alike.
func TestCheckPreprocessor(t *testing.T) {
	clip, siglip := vision.DefaultPreprocessor(), vision.SiglipPreprocessor()
	larger := *clip
	larger.Size.ShortestEdge = 256
	plain := *siglip
	plain.DoResize = false
	edge := *siglip
	edge.Size = vision.Size{ShortestEdge: 224}
	wide := *siglip
	wide.Size = vision.Size{Height: 224, Width: 320}
	empty := *siglip
	empty.Size = vision.Size{}
	s := Generator{Seed: 2001, Objects: 1}.Scene(0)
	for _, c := range []struct {
		name string
		pre  *vision.Preprocessor
		ok   bool
	}{
		{"CLIP", clip, true},
		{"SigLIP", siglip, true},
		{"shortest edge 256, crop 224", &larger, false},
		{"no resize", &plain, false},
		{"shortest edge, no crop", &edge, false},
		{"224x320", &wide, false},
		{"no size", &empty, false},
		{"nil", nil, false},
	} {
		err := CheckPreprocessor(c.pre)
		cov, cerr := s.Coverage(c.pre, 4)
		if c.ok && (err != nil || cerr != nil || len(cov) != 1) {
			t.Errorf("%s: %v, %v; want it taken", c.name, err, cerr)
		}
		if !c.ok {
			if err == nil || !strings.Contains(err.Error(), "preprocessor_config.json") {
				t.Errorf("%s: error %v, want one naming preprocessor_config.json", c.name, err)
			}
			if cerr == nil || err == nil || cerr.Error() != err.Error() || cov != nil {
				t.Errorf("%s: Coverage gave %v, %v; want CheckPreprocessor's error %v", c.name, cov, cerr, err)
			}
		}
	}
}
