package index_test

import (
	"context"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
)

// wideLayouts place a 64×64 scene in one third of a 3:1 or 1:3 image (its
// other two thirds the scene's plain background): the image's size and
// the scene's offset in 8-pixel cells.
var wideLayouts = []struct {
	name       string
	w, h       int
	row0, col0 int
}{
	{"left", 192, 64, 0, 0}, {"right", 192, 64, 0, 16}, {"top", 64, 192, 0, 0}, {"bottom", 64, 192, 16, 0},
}

// TestSearchQualityWideNaFlex: the SigLIP 2 NaFlex scene model
// (testdata/naflex-scenes, 8-pixel patches, a budget of 192) indexes wide
// and tall images of one object in one third through a real job; searched
// for "a <colour> <shape>", each image's hit has its own grid (8×24 or
// 24×8) and the shape word's peak falls on a cell the object covers at
// least half of, in most scenes. CONDITION_QUERY_SCENES sets how many
// scenes (default 40).
func TestSearchQualityWideNaFlex(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes and searches scenes")
	}
	orttest.Load(t)
	n := 40
	if v, err := strconv.Atoi(os.Getenv("CONDITION_QUERY_SCENES")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	m, err := models.Open(filepath.Join("..", "..", "testdata", "naflex-scenes"), models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	g := scenes.Generator{Seed: 3003, MinObjects: 1, MaxObjects: 1, Distinct: true}
	in := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	all := make([]scenes.Scene, n)
	for k := range n {
		s := g.Scene(k)
		s.Background = scenes.Background{Kind: scenes.Plain, A: s.Background.A}
		all[k] = s
		l := wideLayouts[k%len(wideLayouts)]
		empty := s
		empty.Objects = nil
		img := image.NewRGBA(image.Rect(0, 0, l.w, l.h))
		draw.Draw(img, img.Bounds(), &image.Uniform{C: empty.Render(64).At(0, 0)}, image.Point{}, draw.Src)
		draw.Draw(img, image.Rect(8*l.col0, 8*l.row0, 8*l.col0+64, 8*l.row0+64), s.Render(64), image.Point{}, draw.Src)
		f, err := os.Create(filepath.Join(in, fmt.Sprintf("%05d.png", k)))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(ctx, batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"x"}, Out: out, Index: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	inside := map[string]int{}
	for k, s := range all {
		l := wideLayouts[k%len(wideLayouts)]
		o := s.Objects[0]
		res, err := x.Search(ctx, eng, "a "+o.Colour+" "+o.Shape, index.SearchOptions{Top: n, Words: true})
		if err != nil {
			t.Fatal(err)
		}
		var hit *index.Hit
		for i := range res.Hits {
			if res.Hits[i].Path == fmt.Sprintf("%05d.png", k) {
				hit = &res.Hits[i]
			}
		}
		if hit == nil {
			t.Fatalf("scene %d: not among the %d hits", k, len(res.Hits))
		}
		if want := [2]int{l.h / 8, l.w / 8}; hit.Grid != want {
			t.Fatalf("scene %d (%s): grid %v, want %v", k, l.name, hit.Grid, want)
		}
		cov := s.Coverage(64, 8)[0]
		found := false
		for _, w := range hit.Words {
			if !strings.EqualFold(w.Word, o.Shape) {
				continue
			}
			found = true
			if len(w.Map) != hit.Grid[0]*hit.Grid[1] {
				t.Fatalf("scene %d: a map of %d cells on %v", k, len(w.Map), hit.Grid)
			}
			r, c := w.Cell[0]-l.row0, w.Cell[1]-l.col0
			if r >= 0 && r < 8 && c >= 0 && c < 8 && cov[r*8+c] >= 0.5 {
				inside[l.name]++
			}
		}
		if !found {
			t.Fatalf("scene %d: no word %q in %+v", k, o.Shape, hit.Words)
		}
	}
	total := 0
	for _, l := range wideLayouts {
		total += inside[l.name]
	}
	t.Logf("%d scenes: the shape word's peak inside the object in %.1f%% (by layout: %v)", n, 100*float64(total)/float64(n), inside)
	if float64(total) < 0.8*float64(n) {
		t.Errorf("the shape word's peak inside the object in %d of %d scenes (floor 80%%)", total, n)
	}
}
