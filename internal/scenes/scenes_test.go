package scenes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func sceneFile(i int) string { return fmt.Sprintf("scene_%03d.png", i) }

func TestDeterministic(t *testing.T) {
	g := NewGenerator(42)
	for i := 0; i < 50; i++ {
		a, b := g.Scene(i), g.Scene(i)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("scene %d differs between two calls", i)
		}
		if !bytes.Equal(a.Render(32).Pix, b.Render(32).Pix) {
			t.Fatalf("scene %d renders differently twice", i)
		}
	}
	if reflect.DeepEqual(NewGenerator(1).Scene(0), NewGenerator(2).Scene(0)) {
		t.Fatal("seeds 1 and 2 give the same scene")
	}
}

func TestInvariants(t *testing.T) {
	counts := map[int]int{}
	kinds := map[string]int{}
	shared := 0
	for _, g := range []Generator{NewGenerator(1), {Seed: 5, MinObjects: 2, MaxObjects: 2}, {Seed: 6, MinObjects: 1, MaxObjects: 1}, {Seed: 7, MinObjects: 2, MaxObjects: 3, Distinct: true}} {
		for i := 0; i < 400; i++ {
			s := g.Scene(i)
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			n := len(s.Objects)
			if n < max(1, g.MinObjects) || n > min(3, g.MaxObjects) {
				t.Fatalf("scene %d: %d objects, generator allows %d-%d", i, n, g.MinObjects, g.MaxObjects)
			}
			counts[n]++
			kinds[s.Background.Kind]++
			if len(s.Refs) != 2*n {
				t.Fatalf("scene %d %q: %d refs for %d objects", i, s.Caption, len(s.Refs), n)
			}
			cols, shapes := map[string]bool{}, map[string]bool{}
			for k, o := range s.Objects {
				if cols[o.Colour] && shapes[o.Shape] || g.Distinct && (cols[o.Colour] || shapes[o.Shape]) {
					t.Fatalf("scene %d (distinct %v): colour or shape repeated: %+v", i, g.Distinct, s.Objects)
				}
				if cols[o.Colour] || shapes[o.Shape] {
					shared++
				}
				for _, p := range s.Objects[:k] {
					if p.Colour == o.Colour && p.Shape == o.Shape {
						t.Fatalf("scene %d: two %s %ss", i, o.Colour, o.Shape)
					}
				}
				cols[o.Colour], shapes[o.Shape] = true, true
				if o.X-o.R < 0 || o.X+o.R > 1 || o.Y-o.R < 0 || o.Y+o.R > 1 {
					t.Fatalf("scene %d object %d leaves the image: %+v", i, k, o)
				}
				for _, p := range s.Objects[:k] {
					if math.Hypot(o.X-p.X, o.Y-p.Y) < o.R+p.R {
						t.Fatalf("scene %d: objects overlap: %+v %+v", i, o, p)
					}
				}
				if d := dist(o.RGB, s.Background.A); d < minContrast {
					t.Fatalf("scene %d: %s object on background %v: contrast %.0f", i, o.Colour, s.Background.A, d)
				}
			}
			for _, w := range s.Words {
				if !slices.Contains(Vocabulary, w) {
					t.Fatalf("scene %d: word %q not in Vocabulary", i, w)
				}
			}
			checkRelation(t, s)
		}
	}
	if shared == 0 {
		t.Error("no scene has two objects sharing a colour or a shape")
	}
	for n := 1; n <= 3; n++ {
		if counts[n] == 0 {
			t.Errorf("no scene with %d objects", n)
		}
	}
	for _, k := range []string{Plain, Gradient, Noisy} {
		if kinds[k] == 0 {
			t.Errorf("no %s background", k)
		}
	}
}

// checkRelation checks that a spatial word of a caption is true of the scene.
func checkRelation(t *testing.T, s Scene) {
	t.Helper()
	c := s.Caption
	if len(s.Objects) == 1 {
		o := s.Objects[0]
		bad := strings.HasSuffix(c, "on the left") && o.X >= 0.33 ||
			strings.HasSuffix(c, "on the right") && o.X <= 0.67 ||
			strings.HasSuffix(c, "at the top") && o.Y >= 0.33 ||
			strings.HasSuffix(c, "at the bottom") && o.Y <= 0.67
		if bad {
			t.Fatalf("scene %d: %q but object at (%.2f, %.2f)", s.Index, c, o.X, o.Y)
		}
		return
	}
	if len(s.Objects) != 2 {
		return
	}
	first := s.Objects[s.Refs[0].Object]
	second := s.Objects[s.Refs[2].Object]
	bad := strings.Contains(c, " above ") && first.Y >= second.Y ||
		strings.Contains(c, " below ") && first.Y <= second.Y ||
		strings.Contains(c, " left of ") && first.X >= second.X ||
		strings.Contains(c, " right of ") && first.X <= second.X
	if bad {
		t.Fatalf("scene %d: %q does not hold: %+v", s.Index, c, s.Objects)
	}
}

func TestCaptionExamples(t *testing.T) {
	// Hand-written scenes, so the expected captions come from the grammar, not
	// from the generator's output.
	red := Object{Colour: "red", Shape: "circle", X: 0.5, Y: 0.2, R: 0.1}
	orange := Object{Colour: "orange", Shape: "star", X: 0.5, Y: 0.8, R: 0.1}
	for i := 0; i < 20; i++ {
		words, refs := caption(&rng{s: uint64(i)}, []Object{red, orange})
		c := join(words)
		ok := map[string]bool{
			"a red circle above an orange star": true, "an orange star below a red circle": true,
			"a red circle and an orange star": true, "an orange star and a red circle": true,
		}
		if !ok[c] {
			t.Fatalf("caption %q", c)
		}
		if len(refs) != 4 {
			t.Fatalf("%q: refs %v", c, refs)
		}
	}
	words, _ := caption(&rng{s: 3}, []Object{red, orange, {Colour: "blue", Shape: "cross", X: 0.2, Y: 0.5, R: 0.1}})
	if c := join(words); strings.Count(c, ",") != 1 || !strings.Contains(c, " and ") || strings.Contains(c, " ,") {
		t.Fatalf("three objects: %q", c)
	}
}

func TestLabelsMatchRender(t *testing.T) {
	g := NewGenerator(3)
	for i := 0; i < 30; i++ {
		s := g.Scene(i)
		const size = 64
		img := s.Render(size)
		lab := s.Labels(size)
		// Pixels whose 3×3 neighbourhood has one label are pure: inside an
		// object they have its colour, outside they differ from it.
		for y := 1; y < size-1; y++ {
			for x := 1; x < size-1; x++ {
				l := lab[y*size+x]
				pure := true
				for dy := -1; dy <= 1; dy++ {
					for dx := -1; dx <= 1; dx++ {
						pure = pure && lab[(y+dy)*size+x+dx] == l
					}
				}
				if !pure || l == 0 {
					continue
				}
				o := s.Objects[l-1]
				p := img.Pix[(y*size+x)*4:]
				got := [3]float64{float64(p[0]), float64(p[1]), float64(p[2])}
				if dist(got, o.RGB) > 2 {
					t.Fatalf("scene %d pixel (%d,%d) label %d: colour %v, object %v", i, x, y, l, got, o.RGB)
				}
			}
		}
		// Every object is visible.
		cov := s.Coverage(size, 8)
		for k := range s.Objects {
			total := 0.0
			for _, c := range cov[k] {
				total += c
			}
			if total*64 < 20 {
				t.Fatalf("scene %d object %d covers %.0f pixels", i, k, total*64)
			}
		}
	}
}

func TestRenderAnySize(t *testing.T) {
	s := NewGenerator(9).Scene(4)
	small, big := s.Labels(32), s.Labels(128)
	agree := 0
	for y := 0; y < 32; y++ {
		for x := 0; x < 32; x++ {
			if small[y*32+x] == big[(4*y+2)*128+4*x+2] {
				agree++
			}
		}
	}
	if agree < 32*32*9/10 {
		t.Fatalf("label maps at 32 and 128 agree on %d of %d pixels", agree, 32*32)
	}
}

// TestDemoFixtures regenerates testdata/scenes and compares it with the
// committed files: the default model was trained on this generator, so any
// change to its output must be deliberate.
func TestDemoFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "scenes")
	f, err := os.Open(filepath.Join(dir, "scenes.jsonl"))
	if err != nil {
		t.Fatalf("the committed demo fixtures are missing: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var want Scene
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		got := NewGenerator(want.Seed).Scene(want.Index)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Fatalf("scene %d:\n got %s\nwant %s", want.Index, gj, wj)
		}
		pf, err := os.Open(filepath.Join(dir, "images", sceneFile(want.Index)))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(pf)
		pf.Close()
		if err != nil {
			t.Fatal(err)
		}
		size := img.Bounds().Dx()
		r := got.Render(size)
		for y := 0; y < size; y++ {
			for x := 0; x < size; x++ {
				a, b := img.At(x, y), r.At(x, y)
				ar, ag, ab, _ := a.RGBA()
				br, bg, bb, _ := b.RGBA()
				if ar != br || ag != bg || ab != bb {
					t.Fatalf("%s: pixel (%d,%d) is %v, generator gives %v", sceneFile(want.Index), x, y, a, b)
				}
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("scenes.jsonl is empty")
	}
}
