package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/weaviate"
	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
	"github.com/conditionhq/condition/vision"
)

// naflexFixture is a folder of images of several aspects (one of them
// corrupt) for the tiny SigLIP 2 NaFlex model (a budget of 24 patches of 4
// pixels), and its engine.
type naflexFixture struct {
	in    string
	eng   *pipeline.Engine
	order []string          // the walk's order
	sizes map[string][2]int // each image's width and height
}

// naflexSizes are the fixture's images: 3:1, 1:3, 2:1, square and one
// smaller than a few patches (width, height).
var naflexSizes = map[string][2]int{
	"wide.png": {96, 32}, "tall.png": {32, 96}, "half.png": {64, 32}, "square.png": {48, 48}, "tiny.png": {5, 3},
}

func newNaflexFixture(t *testing.T) *naflexFixture {
	t.Helper()
	orttest.Load(t)
	m, err := models.Open(filepath.Join("..", "..", "testdata", "tinynaflex"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Config().NaFlex() {
		t.Fatal("testdata/tinynaflex is not a NaFlex model")
	}
	f := &naflexFixture{in: filepath.Join(t.TempDir(), "in"), eng: tinyEngine(t, m, pipeline.Options{Threads: 1}), sizes: naflexSizes}
	if err := os.MkdirAll(f.in, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range f.sizes {
		if err := os.WriteFile(filepath.Join(f.in, name), enginetest.EncodeImage(t, s[0], s[1], "png"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(f.in, "corrupt.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644)
	Walk(context.Background(), []string{f.in}, func(it Item) error { f.order = append(f.order, it.Rel); return nil }, nil)
	return f
}

// ref returns path's image_embeds and encoding, from the engine.
func (f *naflexFixture) ref(t *testing.T, p string) ([]float32, *pipeline.ImageEncoding) {
	t.Helper()
	img, err := f.eng.DecodeImage(mustRead(t, filepath.Join(f.in, p)))
	if err != nil {
		t.Fatal(err)
	}
	encs, err := f.eng.EncodeImages(context.Background(), []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	return encs[0].Embeds, &encs[0]
}

// grid returns path's grid as the engine encodes it, checked against the
// preprocessor's NaFlex size for the image's width and height.
func (f *naflexFixture) grid(t *testing.T, p string) (vision.Grid, *pipeline.ImageEncoding) {
	t.Helper()
	_, enc := f.ref(t, p)
	s := f.sizes[p]
	g, err := f.eng.Preprocessor().NaFlexGrid(s[0], s[1])
	if err != nil {
		t.Fatal(err)
	}
	if enc.Grid != g {
		t.Fatalf("%s: the engine's grid %s, the preprocessor's %s", p, enc.Grid, g)
	}
	return g, enc
}

// naflexBudget is testdata/tinynaflex's max_num_patches.
const naflexBudget = 24

// checkNaflexIndex checks the index parts of a NaFlex job under out
// (parts of size rows) against the engine: each part of format
// condition-index/v2 with max_patches and no grid, each row's grid the
// image's own, its first H·W patch vectors its JointPatches within the
// dtype's rounding and the rest zeros (their int8 scales too); a failed
// image's rows and grid zeros.
func checkNaflexIndex(t *testing.T, f *naflexFixture, out string, size int, dtype string, byPath map[string]Entry) {
	t.Helper()
	parts := (len(f.order) + size - 1) / size
	padded, wide, tall := 0, 0, 0
	for i := range parts {
		dir := filepath.Join(out, "index", fmt.Sprintf("%06d", i))
		raw := mustRead(t, filepath.Join(dir, "index.json"))
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		if _, ok := fields["grid"]; ok {
			t.Errorf("%s/index.json has a grid: %s", dir, fields["grid"])
		}
		d := readIndexPart(t, dir)
		m := d.meta
		n := min(size, len(f.order)-i*size)
		if m.Format != index.FormatGrids || m.MaxPatches != naflexBudget || m.Grid != [2]int{} || m.Dim != f.eng.JointDim() ||
			m.DType != dtype || m.Rows != n || len(d.grids) != 2*n || m.LogitBias != f.eng.LogitBias() {
			t.Fatalf("%s/index.json: %+v", dir, m)
		}
		p, dim := m.MaxPatches, m.Dim
		for r, it := range m.Items {
			e := byPath[f.order[i*size+r]]
			if it.Row != r || it.Path != e.Path || it.Status != e.Status || it.SHA256 != e.SHA256 {
				t.Errorf("%s item %d: %+v, manifest %+v", dir, r, it, e)
			}
			gh, gw := int(d.grids[2*r]), int(d.grids[2*r+1])
			pat := d.patches[r*p*dim : (r+1)*p*dim]
			if it.Status != StatusOK {
				if gh != 0 || gw != 0 {
					t.Errorf("%s row %d (%s, failed): grid %dx%d, want 0x0", dir, r, it.Path, gh, gw)
				}
				for _, v := range append(append([]float32(nil), d.embeds[r*dim:(r+1)*dim]...), pat...) {
					if v != 0 {
						t.Fatalf("%s row %d (%s, failed): not zeros", dir, r, it.Path)
					}
				}
				continue
			}
			g, enc := f.grid(t, it.Path)
			if gh != g.H || gw != g.W {
				t.Errorf("%s row %d (%s, %dx%d pixels): grid %dx%d, the engine's %s", dir, r, it.Path, f.sizes[it.Path][0], f.sizes[it.Path][1], gh, gw, g)
				continue
			}
			if g.W > g.H {
				wide++
			}
			if g.H > g.W {
				tall++
			}
			jp, err := f.eng.JointPatches(enc)
			if err != nil {
				t.Fatal(err)
			}
			k := g.Patches() * dim
			if len(jp) != k {
				t.Fatalf("%s: JointPatches gives %d values for a %s grid of %d", it.Path, len(jp), g, dim)
			}
			for j, v := range pat[:k] {
				step := float32(0)
				if d.steps != nil {
					step = d.steps[r*(1+p)+1+j/dim]
				}
				if diff := math.Abs(float64(v - jp[j])); diff > indexTolerance(dtype, jp[j], step)+1e-5 {
					t.Fatalf("%s row %d (%s) patches[%d] = %g, JointPatches %g (off %g)", dir, r, it.Path, j, v, jp[j], diff)
				}
			}
			if k < len(pat) {
				padded++
			}
			for j, v := range pat[k:] {
				if v != 0 {
					t.Fatalf("%s row %d (%s, %s grid): padding value %d is %g, want 0", dir, r, it.Path, g, j, v)
				}
			}
			if d.steps != nil {
				for q := g.Patches(); q < p; q++ {
					if s := d.steps[r*(1+p)+1+q]; s != 0 {
						t.Fatalf("%s row %d: padding patch %d has scale %g, want 0", dir, r, q, s)
					}
				}
			}
		}
	}
	if padded == 0 || wide == 0 || tall == 0 {
		t.Errorf("the fixture gave %d padded rows, %d wide grids, %d tall ones; want some of each", padded, wide, tall)
	}
}

// checkNaflexSearch searches the index (or collection) at where with the
// fixture's engine and checks each hit's grid against its image's, each
// word's map against the engine's attention over the stored patches
// (tol: from the float32 JointPatches), and its cell and box within the
// grid. It returns the result.
func checkNaflexSearch(t *testing.T, f *naflexFixture, x *index.Index, prompt string, tol float64, opts index.SearchOptions) *index.SearchResult {
	t.Helper()
	ctx := context.Background()
	opts.Words, opts.Top = true, 10
	res, err := x.Search(ctx, f.eng, prompt, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != len(f.sizes) {
		t.Fatalf("%d hits, want the %d ok images", len(res.Hits), len(f.sizes))
	}
	ps, err := f.eng.Prepare(ctx, prompt)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		g, enc := f.grid(t, h.Path)
		if h.Grid != [2]int{g.H, g.W} || h.Attention == nil || h.Attention.Grid != g {
			t.Fatalf("%s: hit grid %v, want %s", h.Path, h.Grid, g)
		}
		if len(h.Words) == 0 {
			t.Fatalf("%s: no words", h.Path)
		}
		jp, err := f.eng.JointPatches(enc)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := f.eng.AttendJoint(ctx, jp, g, ps)
		if err != nil {
			t.Fatal(err)
		}
		ovs := atts[0].Overlays()
		if len(ovs) != len(h.Words) {
			t.Fatalf("%s: %d words, the engine's attention %d", h.Path, len(h.Words), len(ovs))
		}
		for k, w := range h.Words {
			if len(w.Map) != g.Patches() {
				t.Fatalf("%s: word %q has a map of %d cells, want %s = %d", h.Path, w.Word, len(w.Map), g, g.Patches())
			}
			if w.Cell[0] < 0 || w.Cell[0] >= g.H || w.Cell[1] < 0 || w.Cell[1] >= g.W ||
				w.Box[0] < 0 || w.Box[1] < 0 || w.Box[2] >= g.H || w.Box[3] >= g.W || w.Box[0] > w.Cell[0] || w.Box[2] < w.Cell[0] {
				t.Errorf("%s: word %q cell %v, box %v outside its %s grid", h.Path, w.Word, w.Cell, w.Box, g)
			}
			for c, v := range w.Map {
				if d := math.Abs(float64(v - ovs[k].Map[c])); d > tol {
					t.Fatalf("%s: word %q map[%d] = %g from the index, %g from JointPatches (off %g)", h.Path, w.Word, c, v, ovs[k].Map[c], d)
				}
			}
		}
	}
	return res
}

// TestRunIndexNaFlex: a job of the tiny SigLIP 2 NaFlex model over images
// of several aspects writes index parts whose rows hold each image's own
// grid and patches (padded with zeros to the budget), in each dtype; the
// index opens, gives each row's patches on its grid, searches with
// per-hit grids and maps of H·W cells, and draws each hit's sheet; the
// scores are the job's logits.
func TestRunIndexNaFlex(t *testing.T) {
	f := newNaflexFixture(t)
	ctx := context.Background()
	const prompt = "a red square"
	for _, dtype := range []string{indexOutF16, indexOutF32, indexOutInt8} {
		t.Run(dtype, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			sum, err := Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{prompt}, Out: out, ShardSize: 4, Batch: 3,
				Index: true, IndexDType: dtype})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Done != len(f.sizes) || sum.Failed != 1 {
				t.Fatalf("done %d, failed %d; want %d and the corrupt image", sum.Done, sum.Failed, len(f.sizes))
			}
			byPath := latestByPath(t, sum.Manifest)
			checkNaflexIndex(t, f, out, 4, dtype, byPath)
			x, err := index.Open(ctx, out, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if m := x.Meta(); !m.PerImageGrids() || m.MaxPatches != naflexBudget || x.Grid() != (vision.Grid{}) {
				t.Fatalf("index meta %+v, grid %s", m, x.Grid())
			}
			tol := map[string]float64{indexOutF32: 1e-5, indexOutF16: 2e-3, indexOutInt8: 2e-2}[dtype]
			res := checkNaflexSearch(t, f, x, prompt, tol, index.SearchOptions{})
			for _, h := range res.Hits {
				g, _ := f.grid(t, h.Path)
				ps, pg, err := x.Patches(h.Part, h.Row)
				if err != nil || pg != g || len(ps) != g.Patches()*x.Meta().Dim {
					t.Fatalf("%s: Patches gives %d values on %s (%v), want %s", h.Path, len(ps), pg, err, g)
				}
				e := byPath[h.Path]
				if len(e.Scores) != 1 || math.Abs(float64(h.Score)-e.Scores[0].Score) > 50*tol {
					t.Errorf("%s: query score %v, the job's %+v", h.Path, h.Score, e.Scores)
				}
			}
			pngs, unread, err := x.Sheets(ctx, f.eng, res.Hits)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range pngs {
				if len(b) == 0 || unread[i] != nil {
					t.Errorf("%s: sheet of %d bytes, unread %v", res.Hits[i].Path, len(b), unread[i])
				}
			}
		})
	}
}

// TestRunIndexNaFlexShards: in the shards layout (int8), a NaFlex job's
// index parts pass the shards' verification, whole; damaged grids are
// refused by the reader, naming the file and the row.
func TestRunIndexNaFlexShards(t *testing.T) {
	f := newNaflexFixture(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: out, Layout: "shards", ShardSize: 4,
		Index: true, IndexDType: indexOutInt8}); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyShards(ctx, out, []string{f.in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() || rep.IndexParts != 2 || rep.IndexParts != rep.Shards {
		t.Fatalf("verify: %+v; want complete, one index part per shard", rep)
	}
	// An ok row's grid over the budget.
	d := readIndexPart(t, filepath.Join(out, "index", "000000"))
	row := -1
	for _, it := range d.meta.Items {
		if it.Status == StatusOK {
			row = it.Row
		}
	}
	gf := filepath.Join(out, "index", "000000", "grids.npy")
	b := mustRead(t, gf)
	bad := bytes.Clone(b)
	bad[len(bad)-8*(d.meta.Rows-row)] = 99 // its H
	if err := os.WriteFile(gf, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = index.Open(ctx, out, index.Options{})
	t.Logf("a damaged grid: %v", err)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("grids.npy row %d (%s) is a 99x", row, d.meta.Items[row].Path)) {
		t.Errorf("a grid of 99 rows: %v; want an error naming grids.npy, the row and its image", err)
	}
	// grids.npy missing: the part is incomplete, for the reader and verify.
	os.Remove(gf)
	if _, err := index.Open(ctx, out, index.Options{}); err == nil || !strings.Contains(err.Error(), "grids.npy is missing") {
		t.Errorf("no grids.npy: %v", err)
	}
	rep, err = VerifyShards(ctx, out, []string{f.in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete() || len(rep.Broken) == 0 || !strings.Contains(strings.Join(rep.Broken, "\n"), "grids.npy") {
		t.Errorf("verify without grids.npy: %+v", rep)
	}
}

// TestRunIndexNaFlexResume: a resumed NaFlex job keeps its whole parts as
// they are and writes the part that was not whole again, ending with the
// bytes of the job run once.
func TestRunIndexNaFlexResume(t *testing.T) {
	f := newNaflexFixture(t)
	ctx := context.Background()
	run := func(out string, resume bool) *Summary {
		sum, err := Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: out, ShardSize: 2, Index: true, Resume: resume})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	out := filepath.Join(t.TempDir(), "out")
	run(out, false)
	want := treeBytes(t, filepath.Join(out, "index"))
	// Part 1 loses its index.json (as a job stopped before finishing it
	// leaves it); parts 0 and 2 stay whole.
	os.Remove(filepath.Join(out, "index", "000001", "index.json"))
	mtimes := map[string]time.Time{}
	for _, p := range []string{"000000", "000002"} {
		st, err := os.Stat(filepath.Join(out, "index", p, "patches.npy"))
		if err != nil {
			t.Fatal(err)
		}
		mtimes[p] = st.ModTime()
	}
	time.Sleep(20 * time.Millisecond)
	sum := run(out, true)
	retried := 0
	if c := slicesIndex(f.order, "corrupt.png"); c/2 != 1 {
		retried = 1 // the files layout tries a failed image of a kept part again
	}
	if sum.Skipped != len(f.order)-2-retried || sum.Done+sum.Failed != 2+retried {
		t.Errorf("resumed: %+v; want part 1's two images done again, the others skipped", sum)
	}
	for p, mt := range mtimes {
		st, _ := os.Stat(filepath.Join(out, "index", p, "patches.npy"))
		if !st.ModTime().Equal(mt) {
			t.Errorf("index part %s was written again", p)
		}
	}
	got := treeBytes(t, filepath.Join(out, "index"))
	if len(got) != len(want) {
		t.Fatalf("%d index files after the resume, %d before", len(got), len(want))
	}
	for name, b := range want {
		if !bytes.Equal(b, got[name]) {
			t.Errorf("index/%s differs after the resume", name)
		}
	}
}

// TestIndexNaFlexMixed: an index holding a part of one grid (tiny CLIP)
// and a part of per-image grids (tiny NaFlex) is refused, naming both.
func TestIndexNaFlexMixed(t *testing.T) {
	f := newNaflexFixture(t)
	fixed := newIndexFixture(t, 2)
	ctx := context.Background()
	mix := filepath.Join(t.TempDir(), "mix")
	for i, eng := range []*pipeline.Engine{fixed.eng, f.eng} {
		in := fixed.in
		if i == 1 {
			in = f.in
		}
		out := filepath.Join(t.TempDir(), "out")
		if _, err := Run(ctx, Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a cat"}, Out: out, Index: true}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(mix, "index"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(out, "index", "000000"), filepath.Join(mix, "index", fmt.Sprintf("%06d", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err := index.Open(ctx, mix, index.Options{})
	t.Logf("mixed: %v", err)
	g := gridOf(t, fixed)
	if err == nil || !strings.Contains(err.Error(), "own grid of at most 24 patches") || !strings.Contains(err.Error(), fmt.Sprintf("a %dx%d grid", g[0], g[1])) {
		t.Errorf("an index of a fixed-grid part and a NaFlex part: %v; want an error naming both", err)
	}
}

// TestRunCollectionNaFlex: a NaFlex job into a collection on a real
// Weaviate node stores each image's own grid and its H·W patch vectors;
// searches (by the pooled vector and by the patches) give per-hit grids
// and the file index's words; a collection of one grid and one of
// per-image grids refuse each other's jobs, naming both.
func TestRunCollectionNaFlex(t *testing.T) {
	node := weaviatetest.Start(t)
	f := newNaflexFixture(t)
	ctx := context.Background()
	const prompt = "a red square"
	url := collURL(node, "Naflex")
	sum, err := Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{prompt}, Out: filepath.Join(t.TempDir(), "out"), Batch: 2,
		Collection: &CollectionConfig{URL: url, Batch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != len(f.sizes) || sum.Failed != 1 {
		t.Fatalf("done %d, failed %d; want %d and the corrupt image", sum.Done, sum.Failed, len(f.sizes))
	}
	tg, _ := weaviate.Parse(url)
	cl := weaviate.New(tg.Host, "")
	for p, e := range latestByPath(t, sum.Manifest) {
		if e.Status != StatusOK {
			continue
		}
		s, err := cl.Get(ctx, tg.Collection, index.CollectionID(e.Source, ""), "")
		if err != nil || s == nil {
			t.Fatalf("%s: %v", p, err)
		}
		g, enc := f.grid(t, p)
		if s.Properties["grid"] != g.String() {
			t.Errorf("%s: grid property %v, the engine's %s", p, s.Properties["grid"], g)
		}
		jp, err := f.eng.JointPatches(enc)
		if err != nil {
			t.Fatal(err)
		}
		d := f.eng.JointDim()
		if len(s.Patches) != g.Patches() {
			t.Fatalf("%s: %d patch vectors, want %s = %d", p, len(s.Patches), g, g.Patches())
		}
		for k, row := range s.Patches {
			for i, v := range row {
				if math.Abs(float64(v-jp[k*d+i])) > 1e-5 {
					t.Fatalf("%s: patch %d [%d] %g, want %g", p, k, i, v, jp[k*d+i])
				}
			}
		}
	}
	x, err := index.Open(ctx, url, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if m := x.Meta(); !m.PerImageGrids() || m.MaxPatches != naflexBudget || m.Format != index.CollectionFormatGrids {
		t.Fatalf("collection meta %+v, want per-image grids of at most %d patches, format %s", m, naflexBudget, index.CollectionFormatGrids)
	}
	res := checkNaflexSearch(t, f, x, prompt, 1e-5, index.SearchOptions{})
	byPatches := checkNaflexSearch(t, f, x, prompt, 1e-5, index.SearchOptions{ByPatches: true})
	if len(byPatches.Hits) != len(res.Hits) {
		t.Errorf("by patches: %d hits, by the pooled vector %d", len(byPatches.Hits), len(res.Hits))
	}
	// The file index of the same job (float32) gives the same hits, grids
	// and words.
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{prompt}, Out: out, Index: true, IndexDType: indexOutF32}); err != nil {
		t.Fatal(err)
	}
	fx, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	fres, err := fx.Search(ctx, f.eng, prompt, index.SearchOptions{Top: 10, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range res.Hits {
		fh := fres.Hits[i]
		if h.Path != fh.Path || h.Grid != fh.Grid || math.Abs(float64(h.Score-fh.Score)) > 1e-4 || len(h.Words) != len(fh.Words) {
			t.Fatalf("hit %d: collection %s %v %v, file index %s %v %v", i, h.Path, h.Grid, h.Score, fh.Path, fh.Grid, fh.Score)
		}
		for k, w := range h.Words {
			if w.Cell != fh.Words[k].Cell || w.Box != fh.Words[k].Box {
				t.Errorf("%s: word %q cell %v box %v, the file index's %v %v", h.Path, w.Word, w.Cell, w.Box, fh.Words[k].Cell, fh.Words[k].Box)
			}
		}
	}

	// A fixed-grid job into the NaFlex collection, and a NaFlex job into a
	// fixed-grid one: refused, naming both.
	fixed := newIndexFixture(t, 2)
	g := gridOf(t, fixed)
	fixedGrid := fmt.Sprintf("a %dx%d grid", g[0], g[1])
	nfGrid := "each image's own grid of at most 24 patches"
	_, err = Run(ctx, Config{Engine: fixed.eng, Inputs: []string{fixed.in}, Prompts: []string{"a cat"}, Out: filepath.Join(t.TempDir(), "out"),
		Collection: &CollectionConfig{URL: url}})
	t.Logf("a fixed-grid job into a NaFlex collection: %v", err)
	if err == nil || !strings.Contains(err.Error(), nfGrid) || !strings.Contains(err.Error(), fixedGrid) {
		t.Errorf("a fixed-grid job into a NaFlex collection: %v; want an error naming both grids", err)
	}
	fixedURL := collURL(node, "Fixed")
	if _, err := Run(ctx, Config{Engine: fixed.eng, Inputs: []string{fixed.in}, Prompts: []string{"a cat"}, Out: filepath.Join(t.TempDir(), "out"),
		Collection: &CollectionConfig{URL: fixedURL}}); err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: filepath.Join(t.TempDir(), "out"),
		Collection: &CollectionConfig{URL: fixedURL}})
	t.Logf("a NaFlex job into a fixed-grid collection: %v", err)
	if err == nil || !strings.Contains(err.Error(), nfGrid) || !strings.Contains(err.Error(), fixedGrid) {
		t.Errorf("a NaFlex job into a fixed-grid collection: %v; want an error naming both grids", err)
	}
}
