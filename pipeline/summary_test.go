package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"image"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/models"
)

// regionOf names the part of a 3×3 split of grid g that holds the point
// (x, y), given as fractions of the image's width and height.
func regionOf(g [2]int, x, y float64) string {
	row, col := int(y*float64(g[0])), int(x*float64(g[1]))
	return regionNames[row*3/g[0]][col*3/g[1]]
}

// objectWords are the words of scene s that name object k (its colour and
// its shape).
func objectWords(s scenes.Scene, k int) []string {
	var ws []string
	for _, r := range s.Refs {
		if r.Object == k {
			ws = append(ws, s.Words[r.Word])
		}
	}
	return ws
}

// firstWord returns the first word that RegionWords lists for the region
// named name.
func firstWord(t *testing.T, rs []Region, name string) string {
	t.Helper()
	for _, r := range rs {
		if r.Region == name && len(r.Words) > 0 {
			return r.Words[0].Name
		}
	}
	t.Fatalf("no region %q in %+v", name, rs)
	return ""
}

// TestRegionWordsLeadWithTheRegionsObject: on the README's example
// (testdata/scenes/images/scene_004.png, "a yellow circle and a red star",
// the built-in model), the region holding the star lists "star" first and
// the region holding the circle a word of the circle, although "circle"
// weighs more than "star" in the star's region (the words are ranked by
// lift, not by weight); and over generated two-object scenes, the region holding
// an object's centre leads with a word of that object for at least 80% of
// the objects.
func TestRegionWordsLeadWithTheRegionsObject(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(models.DefaultRef, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, Options{})
	ctx := context.Background()
	attend := func(img image.Image, caption string) *Attention {
		ps, err := eng.Prepare(ctx, caption)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := eng.AttendImages(ctx, []image.Image{img}, ps, AttendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &atts[0][0]
	}

	s := readScene(t, "../testdata/scenes/scenes.jsonl", 4)
	data, err := os.ReadFile("../testdata/scenes/images/scene_004.png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := eng.DecodeImage(data)
	if err != nil {
		t.Fatal(err)
	}
	a := attend(img, s.Caption)
	rs := a.RegionWords(3)
	g := [2]int{a.Grid.H, a.Grid.W}
	star, circle := regionOf(g, s.Objects[1].X, s.Objects[1].Y), regionOf(g, s.Objects[0].X, s.Objects[0].Y)
	// The premise: in the star's region "circle" weighs more than "star".
	for _, r := range a.RegionWords(len(s.Words)) {
		i := slices.IndexFunc(r.Words, func(w Scored) bool { return w.Name == "circle" })
		j := slices.IndexFunc(r.Words, func(w Scored) bool { return w.Name == "star" })
		if r.Region == star && (i < 0 || j < 0 || r.Words[i].Weight <= r.Words[j].Weight) {
			t.Errorf("in the star's region \"circle\" no longer outweighs \"star\": %+v", r.Words)
		}
	}
	if got := firstWord(t, rs, star); got != "star" {
		t.Errorf("%s: the star's region (%s) lists %q first, want \"star\": %+v", s.Caption, star, got, rs)
	}
	if got := firstWord(t, rs, circle); !slices.Contains(objectWords(s, 0), got) {
		t.Errorf("%s: the circle's region (%s) lists %q first, want a word of the circle: %+v", s.Caption, circle, got, rs)
	}
	for _, r := range rs {
		for i := 1; i < len(r.Words); i++ {
			if r.Words[i].Lift > r.Words[i-1].Lift {
				t.Errorf("region %s not in order of lift: %+v", r.Region, r.Words)
			}
		}
	}

	gen := scenes.Generator{Seed: 4242, MinObjects: 2, MaxObjects: 2, Distinct: true}
	const n = 20
	hits, byWeight, total := 0, 0, 0
	for k := range n {
		s := gen.Scene(k)
		a := attend(s.Render(eng.inH), s.Caption)
		rs := a.RegionWords(len(s.Words))
		g := [2]int{a.Grid.H, a.Grid.W}
		for o, obj := range s.Objects {
			name := regionOf(g, obj.X, obj.Y)
			if name == regionOf(g, s.Objects[1-o].X, s.Objects[1-o].Y) {
				continue // both objects' centres in one region
			}
			total++
			ws := objectWords(s, o)
			if slices.Contains(ws, firstWord(t, rs, name)) {
				hits++
			}
			for _, r := range rs {
				if r.Region == name {
					w := slices.Clone(r.Words)
					sort.SliceStable(w, func(i, j int) bool { return w[i].Weight > w[j].Weight })
					if slices.Contains(ws, w[0].Name) {
						byWeight++
					}
				}
			}
		}
	}
	t.Logf("a region holding an object's centre leads with a word of it: %d of %d (ranked by weight: %d)", hits, total, byWeight)
	if total < n || hits*5 < total*4 {
		t.Errorf("a region holding an object's centre leads with a word of it for %d of %d objects, want ≥ 80%%", hits, total)
	}
}

// readScene returns scene i of a scenes.jsonl file.
func readScene(t *testing.T, path string, i int) scenes.Scene {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for k := 0; sc.Scan(); k++ {
		if k == i {
			var s scenes.Scene
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatalf("%s: no scene %d", path, i)
	return scenes.Scene{}
}
