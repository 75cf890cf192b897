package index_test

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/scenes"
	_ "github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
)

// searchQuality is how well the built-in model's index finds generated
// scenes: over one prompt "a <colour> <shape>" per colour and shape (40),
// the share of the top 10 whose scene holds such an object, and over those
// hits the share of word peaks (colour and shape words alike) whose cell
// the named object covers at least a quarter of.
type searchQuality struct {
	Scenes, Prompts    int
	PrecisionAt10      float64
	Ceiling            float64 // the best precision@10 the scenes allow (fewer than 10 may hold an object)
	PeakInMask         float64
	relevant, peaksHit int
}

// sceneSet is n generated scenes of the held-out seed, written as PNGs
// into a folder, and the built-in model's engine.
type sceneSet struct {
	eng *pipeline.Engine
	all []scenes.Scene
	in  string
}

func newSceneSet(t testing.TB, n int) *sceneSet {
	ctx := context.Background()
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	g := scenes.Generator{Seed: 4242, MinObjects: 1, MaxObjects: 3}
	in := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	all := make([]scenes.Scene, n)
	for i := range n {
		all[i] = g.Scene(i)
		f, err := os.Create(filepath.Join(in, fmt.Sprintf("%05d.png", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, all[i].Render(64)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return &sceneSet{eng: eng, all: all, in: in}
}

// measureSearchQuality indexes n scenes of the held-out seed with the
// built-in model through a real job and searches them.
func measureSearchQuality(t testing.TB, n int) searchQuality {
	ctx := context.Background()
	ss := newSceneSet(t, n)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(ctx, batch.Config{Engine: ss.eng, Inputs: []string{ss.in}, Prompts: []string{"x"}, Out: out, Index: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	return ss.quality(t, x, index.SearchOptions{Top: 10, Words: true})
}

// quality searches x for every colour and shape with opts.
func (ss *sceneSet) quality(t testing.TB, x *index.Index, opts index.SearchOptions) searchQuality {
	ctx, eng, all := context.Background(), ss.eng, ss.all
	n := len(all)
	grid := x.Grid()
	q := searchQuality{Scenes: n}
	for _, colour := range scenes.Colours {
		for _, shape := range scenes.Shapes {
			q.Prompts++
			have := 0
			for _, s := range all {
				for _, o := range s.Objects {
					if o.Colour == colour && o.Shape == shape {
						have++
						break
					}
				}
			}
			q.Ceiling += float64(min(have, 10)) / 10
			res, err := x.Search(ctx, eng, "a "+colour+" "+shape, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range res.Hits {
				i, _ := strconv.Atoi(strings.TrimSuffix(h.Path, ".png"))
				s := all[i]
				var objs []int
				for k, o := range s.Objects {
					if o.Colour == colour && o.Shape == shape {
						objs = append(objs, k)
					}
				}
				if len(objs) == 0 {
					continue
				}
				q.relevant++
				cov := s.Coverage(64, grid.W)
				for _, w := range h.Words {
					cell := w.Cell[0]*grid.W + w.Cell[1]
					for _, k := range objs {
						if cov[k][cell] >= 0.25 {
							q.peaksHit++
							break
						}
					}
				}
			}
		}
	}
	q.PrecisionAt10 = float64(q.relevant) / float64(10*q.Prompts)
	q.Ceiling /= float64(q.Prompts)
	if q.relevant > 0 {
		q.PeakInMask = float64(q.peaksHit) / float64(2*q.relevant)
	}
	return q
}

// TestSearchQualityScenes measures search on generated scenes with the
// built-in model and holds it to a loose floor. CONDITION_QUERY_SCENES
// sets how many scenes (default 300).
func TestSearchQualityScenes(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes hundreds of scenes")
	}
	n := 300
	if v, err := strconv.Atoi(os.Getenv("CONDITION_QUERY_SCENES")); err == nil && v > 0 {
		n = v
	}
	q := measureSearchQuality(t, n)
	t.Logf("%d scenes, %d prompts: precision@10 %.3f (at most %.3f with these scenes), word peaks inside the named object %.3f (%d relevant hits)", q.Scenes, q.Prompts, q.PrecisionAt10, q.Ceiling, q.PeakInMask, q.relevant)
	if q.PrecisionAt10 < 0.3 || q.PeakInMask < 0.4 {
		t.Errorf("precision@10 %.3f (floor 0.3), peaks in mask %.3f (floor 0.4)", q.PrecisionAt10, q.PeakInMask)
	}
}
