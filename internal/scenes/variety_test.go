package scenes

import (
	"bytes"
	"reflect"
	"testing"
)

// TestVariety: varied scenes are deterministic, valid, show every object,
// and vary what they are meant to vary.
func TestVariety(t *testing.T) {
	g := Generator{Seed: 11, MinObjects: 1, MaxObjects: 3, Variety: true}
	kinds := map[string]int{}
	var clean, outlined, cut, aliased, jpeg, sixPoints, rightAngled int
	const n = 300
	for i := 0; i < n; i++ {
		s := g.Scene(i)
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s, g.Scene(i)) {
			t.Fatalf("scene %d differs between two calls", i)
		}
		if i < 20 && !bytes.Equal(s.Render(32).Pix, g.Scene(i).Render(32).Pix) {
			t.Fatalf("scene %d renders differently twice", i)
		}
		kinds[s.Background.Kind]++
		if s.Style == nil {
			clean++
		} else {
			if s.Style.Aliased {
				aliased++
			}
			if s.Style.JPEG > 0 {
				jpeg++
			}
		}
		cov := s.Coverage(64, 8)
		for k, o := range s.Objects {
			if o.Stroke > 0 {
				outlined++
			}
			if o.Points == 6 {
				sixPoints++
			}
			if o.Shape == "triangle" && o.Apex > 0.74 || o.Apex < -0.74 {
				rightAngled++
			}
			if o.X-o.R < 0 || o.X+o.R > 1 || o.Y-o.R < 0 || o.Y+o.R > 1 {
				cut++
			}
			total := 0.0
			for _, c := range cov[k] {
				total += c
			}
			if total*64 < 8 {
				t.Fatalf("scene %d object %d (%+v) covers %.0f pixels", i, k, o, total*64)
			}
		}
	}
	for _, k := range []string{Plain, Gradient, Noisy, Stripes, Checker, Blotchy} {
		if kinds[k] == 0 {
			t.Errorf("no %s background in %d scenes", k, n)
		}
	}
	for name, c := range map[string]int{"clean": clean, "outlined": outlined, "cut by the border": cut, "aliased": aliased,
		"JPEG": jpeg, "six-pointed stars": sixPoints, "right-angled triangles": rightAngled} {
		if c == 0 {
			t.Errorf("no %s objects or scenes in %d scenes", name, n)
		}
	}
	if clean < n/10 || clean > n/3 {
		t.Errorf("%d of %d scenes drawn the generator's one way, want about %.0f%%", clean, n, 100*cleanShare)
	}
}

// TestVarietyOff: without Variety the generator's scenes are unchanged by
// the varied drawing's code (TestDemoFixtures checks their bytes).
func TestVarietyOff(t *testing.T) {
	for i := 0; i < 50; i++ {
		s := NewGenerator(12).Scene(i)
		if s.Style != nil {
			t.Fatalf("scene %d has a style", i)
		}
		for _, o := range s.Objects {
			if o.varied() {
				t.Fatalf("scene %d has varied proportions: %+v", i, o)
			}
		}
	}
}

// TestOutlineInk: an outlined object inks a band along its edge, not its
// middle, while its label covers the whole shape.
func TestOutlineInk(t *testing.T) {
	o := Object{Colour: "red", Shape: "square", RGB: [3]float64{220, 30, 30}, X: 0.5, Y: 0.5, R: 0.4, Stroke: 0.15}
	s := Scene{Background: Background{Kind: Plain, A: [3]float64{128, 128, 128}}, Objects: []Object{o}, Style: &Style{}}
	img := s.Render(64)
	centre := img.RGBAAt(32, 32)
	if centre.R != 128 || centre.G != 128 {
		t.Errorf("the middle of an outline is %v, want the background", centre)
	}
	edge := img.RGBAAt(32, 13) // the top edge is at y = 64·(0.5 − 0.8·0.4) = 11.5, the band 3.8 pixels deep
	if edge.R != 220 {
		t.Errorf("the edge of an outline is %v, want the object's colour", edge)
	}
	if l := s.Labels(64)[32*64+32]; l != 1 {
		t.Errorf("the middle of an outlined square is labelled %d, want 1", l)
	}
}
