package vecscenes

import (
	"bytes"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestScenes(t *testing.T) {
	sizes := map[bool]int{}
	for _, g := range []Generator{{Seed: 1, Objects: 1}, {Seed: 2, Objects: 2}} {
		shapes := map[string]int{}
		for i := 0; i < 200; i++ {
			s := g.Scene(i)
			s2 := g.Scene(i)
			if !reflect.DeepEqual(s.Objects, s2.Objects) || s.Caption != s2.Caption || s.W != s2.W || s.H != s2.H {
				t.Fatalf("scene %d differs between two calls", i)
			}
			if i < 10 && !bytes.Equal(s.Render().Pix, s2.Render().Pix) {
				t.Fatalf("scene %d renders differently twice", i)
			}
			if s.W < 64 || s.W > 224 || s.H < 64 || s.H > 224 {
				t.Fatalf("scene %d is %dx%d", i, s.W, s.H)
			}
			sizes[s.W == s.H]++
			if len(s.Objects) != g.Objects || len(s.Refs) != 2*g.Objects || strings.Join(s.Words, " ") != s.Caption {
				t.Fatalf("scene %d: %d objects, refs %v, words %q, caption %q", i, len(s.Objects), s.Refs, s.Words, s.Caption)
			}
			for _, r := range s.Refs {
				o := s.Objects[r.Object]
				want := o.Shape
				if r.Kind == "colour" {
					want = o.Colour
				}
				if s.Words[r.Word] != want {
					t.Fatalf("scene %d: word %d is %q, want %q", i, r.Word, s.Words[r.Word], want)
				}
			}
			side := float64(min(s.W, s.H))
			x0, y0 := (float64(s.W)-side)/2, (float64(s.H)-side)/2
			for k, o := range s.Objects {
				shapes[o.Shape]++
				b := o.Box
				if b[0] < x0 || b[1] < y0 || b[2] > x0+side || b[3] > y0+side {
					t.Fatalf("scene %d object %d box %v leaves the centre square of a %dx%d image", i, k, b, s.W, s.H)
				}
			}
			if g.Objects == 2 {
				a, b := s.Objects[0], s.Objects[1]
				if a.Colour == b.Colour || a.Shape == b.Shape {
					t.Fatalf("scene %d: objects share a word: %q", i, s.Caption)
				}
				if !apart(a.Box, b.Box, 0) {
					t.Fatalf("scene %d: boxes overlap: %v %v", i, a.Box, b.Box)
				}
			}
			for k, c := range s.CropCoverage(64, 8) {
				most := 0.0
				for _, v := range c {
					most = math.Max(most, v)
				}
				if most < 0.25 {
					t.Fatalf("scene %d object %d covers no patch to a quarter: %v", i, k, c)
				}
			}
		}
		for _, sh := range Shapes {
			if shapes[sh] == 0 {
				t.Errorf("seed %d: no %s in 200 scenes", g.Seed, sh)
			}
		}
	}
	if sizes[true] == 0 || sizes[false] == 0 {
		t.Errorf("square and other images: %v", sizes)
	}
}

// TestInk: away from its edges a filled object has its colour and the
// backdrop stays outside it.
func TestInk(t *testing.T) {
	g := Generator{Seed: 3, Objects: 1}
	checked := 0
	for i := 0; i < 40; i++ {
		s := g.Scene(i)
		o := s.Objects[0]
		if o.Stroke > 0 || s.JPEG > 0 {
			continue
		}
		img, lab := s.Render(), s.Labels()
		for y := 2; y < s.H-2; y++ {
			for x := 2; x < s.W-2; x++ {
				pure := true
				for dy := -2; dy <= 2; dy++ {
					for dx := -2; dx <= 2; dx++ {
						pure = pure && lab[(y+dy)*s.W+x+dx] == lab[y*s.W+x]
					}
				}
				if !pure {
					continue
				}
				c := img.RGBAAt(x, y)
				if in := lab[y*s.W+x] == 1; in != (c == o.RGB) {
					t.Fatalf("scene %d pixel (%d,%d): label %v, colour %v, object %v", i, x, y, in, c, o.RGB)
				}
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d filled scenes without JPEG", checked)
	}
}

// TestCropCoverage: on a square image of the crop's size the coverage is
// each 8×8 block's share of labelled pixels; on others it follows the
// centre crop.
func TestCropCoverage(t *testing.T) {
	s := Generator{Seed: 4, Objects: 2}.Scene(0)
	s.W, s.H = 64, 64
	for k := range s.Objects {
		s.Objects[k].Path = path(nil, "square", s.Objects[k].Box)
	}
	s.Objects[0].Box = [4]float64{8, 8, 24, 40}
	s.Objects[0].Path = [][2]float64{{8, 8}, {24, 8}, {24, 40}, {8, 40}}
	s.Objects[1].Box = [4]float64{40, 44, 60, 60}
	s.Objects[1].Path = [][2]float64{{40, 44}, {60, 44}, {60, 60}, {40, 60}}
	cov := s.CropCoverage(64, 8)
	if cov[0][1*8+1] != 1 || cov[0][1*8+3] != 0 || cov[1][5*8+5] != 0.5 || cov[1][7*8+7] != 0.25 {
		t.Fatalf("64x64: %v", cov)
	}
	// Twice as wide: the crop is the middle 64 of 128 columns.
	s.W, s.H = 128, 64
	for k := range s.Objects {
		for j := range s.Objects[k].Path {
			s.Objects[k].Path[j][0] += 32
		}
	}
	if got := s.CropCoverage(64, 8); !reflect.DeepEqual(got, cov) {
		t.Fatalf("128x64 moved by 32: %v, want %v", got, cov)
	}
	// Twice as large: the same shares.
	s.W, s.H = 256, 128
	for k := range s.Objects {
		for j := range s.Objects[k].Path {
			s.Objects[k].Path[j][0] *= 2
			s.Objects[k].Path[j][1] *= 2
		}
	}
	if got := s.CropCoverage(64, 8); !reflect.DeepEqual(got, cov) {
		t.Fatalf("256x128: %v, want %v", got, cov)
	}
}

// TestIndependent: this renderer shares no code with the training data's
// generator.
func TestIndependent(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasSuffix(p, "/internal/scenes") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
