package index_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

func openTiny(t testing.TB) *models.Model { return enginetest.TinyModel(t) }

// tinyEngine opens the engine of model m with opts, closed when the test
// ends.
func tinyEngine(t testing.TB, m *models.Model, opts pipeline.Options) *pipeline.Engine {
	t.Helper()
	eng, err := pipeline.New(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// fixtureImage is one image of an index fixture: its embedding and
// joint-space patches as the engine gives them.
type fixtureImage struct {
	path    string
	embeds  []float32 // [D], not yet normalised
	patches []float32 // [P, D]
	enc     *pipeline.ImageEncoding
}

// writeFixturePart writes one index part in the index writer's layout:
// embeds.npy, patches.npy (and the int8 scales), then index.json last.
func writeFixturePart(t testing.TB, dir string, meta index.Meta, imgs []fixtureImage) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n, d := len(imgs), meta.Dim
	p := meta.Grid[0] * meta.Grid[1]
	emb := make([]float32, 0, n*d)
	pat := make([]float32, 0, n*p*d)
	meta.Items = nil
	for i, im := range imgs {
		var s float64
		for _, v := range im.embeds {
			s += float64(v) * float64(v)
		}
		for _, v := range im.embeds {
			emb = append(emb, float32(float64(v)/math.Sqrt(s)))
		}
		pat = append(pat, im.patches...)
		meta.Items = append(meta.Items, index.Item{Row: i, Path: filepath.Base(im.path), Source: im.path, Status: batch.StatusOK})
	}
	meta.Rows = n
	writeArr := func(name string, vals []float32, shape []int, rowLen int) {
		var dt tensorio.DType
		var data []byte
		switch meta.DType {
		case "float32":
			dt = tensorio.DTypeF32
			data = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 4*len(vals))
		case "int8":
			dt = tensorio.DTypeI8
			scales := make([]float32, len(vals)/rowLen)
			data = make([]byte, len(vals))
			for r := range scales {
				mx := float32(0)
				for _, v := range vals[r*rowLen : (r+1)*rowLen] {
					mx = max(mx, float32(math.Abs(float64(v))))
				}
				scales[r] = mx / 127
				for i, v := range vals[r*rowLen : (r+1)*rowLen] {
					data[r*rowLen+i] = byte(int8(math.Round(float64(v / scales[r]))))
				}
			}
			sname := strings.TrimSuffix(name, ".npy") + "_scale.npy"
			h, _ := tensorio.NPYHeader(tensorio.DTypeF32, shape[:len(shape)-1], 0)
			sb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(scales))), 4*len(scales))
			if err := os.WriteFile(filepath.Join(dir, sname), append(h, sb...), 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			dt = tensorio.DTypeF16
			data = make([]byte, 2*len(vals))
			for i, v := range vals {
				h := tensorio.Float32ToF16(v)
				data[2*i], data[2*i+1] = byte(h), byte(h>>8)
			}
		}
		h, err := tensorio.NPYHeader(dt, shape, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(h, data...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeArr(index.EmbedsFile, emb, []int{n, d}, d)
	writeArr(index.PatchesFile, pat, []int{n, p, d}, d)
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, index.MetaFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// queryFixture encodes n made-up images with eng.
func queryFixture(t testing.TB, eng *pipeline.Engine, n int) []fixtureImage {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in")
	enginetest.MakeImages(t, in, n)
	var paths []string
	if err := batch.Walk(context.Background(), []string{in}, func(it batch.Item) error { paths = append(paths, it.Path); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	var out []fixtureImage
	var data [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
		out = append(out, fixtureImage{path: p})
	}
	encs, err := eng.EncodeImageData(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range encs {
		jp, err := eng.JointPatches(&encs[i])
		if err != nil {
			t.Fatal(err)
		}
		out[i].embeds, out[i].patches, out[i].enc = encs[i].Embeds, jp, &encs[i]
	}
	return out
}

// fixtureMeta is the index.json of eng's vectors.
func fixtureMeta(eng *pipeline.Engine, g vision.Grid, dtype string) index.Meta {
	return index.Meta{Format: index.Format, Model: eng.Model().Name(), Revision: eng.Model().Revision(), Settings: json.RawMessage(`"s1"`),
		DType: dtype, Dim: eng.JointDim(), Grid: [2]int{g.H, g.W}, LogitScale: eng.LogitScale()}
}

// bruteForce scores every image with the prompt from the float32
// embeddings: the logit, best first.
func bruteForce(t testing.TB, eng *pipeline.Engine, imgs []fixtureImage, prompt string) ([]int, []float64) {
	ps, err := eng.Prepare(context.Background(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	scores := make([]float64, len(imgs))
	for i, im := range imgs {
		scores[i] = eng.LogitScale() * pipeline.Cosine(im.embeds, ps[0].Embeds)
	}
	order := make([]int, len(imgs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	return order, scores
}

// queryEngine is the tiny model's engine, n made-up images encoded by it,
// and the output of a real job over them with the index in dtype, in
// parts of n/2 images.
func queryEngine(t testing.TB, n int, dtype string) (*pipeline.Engine, []fixtureImage, string) {
	eng := tinyEngine(t, openTiny(t), pipeline.Options{Threads: 1})
	imgs := queryFixture(t, eng, n)
	out := filepath.Join(t.TempDir(), "out")
	in := filepath.Dir(imgs[0].path)
	if filepath.Base(in) == "sub" {
		in = filepath.Dir(in)
	}
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"x"}, Out: out,
		Index: true, IndexDType: dtype, ShardSize: n / 2, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return eng, imgs, out
}

func TestSearchMatchesBruteForce(t *testing.T) {
	for _, dtype := range []string{"float16", "float32", "int8"} {
		t.Run(dtype, func(t *testing.T) {
			eng, imgs, out := queryEngine(t, 10, dtype)
			x, err := index.Open(context.Background(), out, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if x.Rows() != 10 || len(x.Parts()) != 2 {
				t.Fatalf("rows %d, parts %v", x.Rows(), x.Parts())
			}
			tol := 0.01 * eng.LogitScale() // float16 rounding of the embedding
			if dtype == "int8" {
				tol *= 4
			}
			for _, prompt := range []string{"a red car", "a photo of a cat", "blue"} {
				res, err := x.Search(context.Background(), eng, prompt, index.SearchOptions{Top: 10})
				if err != nil {
					t.Fatal(err)
				}
				order, scores := bruteForce(t, eng, imgs, prompt)
				if len(res.Hits) != 10 {
					t.Fatalf("%d hits", len(res.Hits))
				}
				for k, h := range res.Hits {
					want := imgs[order[k]]
					if h.Source != want.path {
						// Only a near tie may swap.
						got := slices.IndexFunc(imgs, func(im fixtureImage) bool { return im.path == h.Source })
						if math.Abs(scores[got]-scores[order[k]]) > tol {
							t.Errorf("%q rank %d: %s (%.4f), brute force %s (%.4f)", prompt, k, h.Source, scores[got], want.path, scores[order[k]])
						}
					}
					if d := math.Abs(float64(h.Score) - scores[order[k]]); d > tol {
						t.Errorf("%q rank %d: score %.5f, brute force %.5f", prompt, k, h.Score, scores[order[k]])
					}
					if k > 0 && h.Score > res.Hits[k-1].Score {
						t.Errorf("%q: hits out of order at %d", prompt, k)
					}
				}
			}
		})
	}
}

// TestSearchWordsEqualAttend: stage 2 over the stored patches gives the
// engine's Attend on the original images, within float16 rounding.
func TestSearchWordsEqualAttend(t *testing.T) {
	eng, imgs, out := queryEngine(t, 6, "float16")
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	const prompt = "a red car and a blue sky"
	res, err := x.Search(context.Background(), eng, prompt, index.SearchOptions{Top: 6, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := eng.Prepare(context.Background(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		i := slices.IndexFunc(imgs, func(im fixtureImage) bool { return im.path == h.Source })
		atts, err := eng.Attend(context.Background(), imgs[i].enc, ps, pipeline.AttendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, got := atts[0].Similarity, h.Attention.Similarity
		if len(want) != len(got) || len(got) == 0 {
			t.Fatalf("%s: similarity of %d values, Attend %d", h.Path, len(got), len(want))
		}
		for j := range want {
			if d := math.Abs(float64(want[j] - got[j])); d > 2e-3 {
				t.Fatalf("%s: similarity[%d] = %g, Attend %g", h.Path, j, got[j], want[j])
			}
		}
		ovs := atts[0].Overlays()
		if len(h.Words) != len(ovs) || len(ovs) == 0 {
			t.Fatalf("%s: %d words, Attend's overlays %d", h.Path, len(h.Words), len(ovs))
		}
		for k, w := range h.Words {
			if w.Word != ovs[k].Label || math.Abs(float64(w.Peak-ovs[k].Peak)) > 2e-3 {
				t.Errorf("%s: word %q peak %g, Attend %q %g", h.Path, w.Word, w.Peak, ovs[k].Label, ovs[k].Peak)
			}
			g := x.Grid()
			if w.Box[0] > w.Cell[0] || w.Box[2] < w.Cell[0] || w.Box[1] > w.Cell[1] || w.Box[3] < w.Cell[1] || w.Box[2] >= g.H || w.Box[3] >= g.W {
				t.Errorf("%s: word %q box %v does not hold its peak %v in a %s grid", h.Path, w.Word, w.Box, w.Cell, g)
			}
		}
		if _, err := h.Attention.Heatmap(pipeline.HeatmapBase{RGBA: image.NewRGBA(image.Rect(0, 0, pipeline.HeatmapPanel, pipeline.HeatmapPanel))}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWordBox(t *testing.T) {
	g := vision.Grid{H: 4, W: 4}
	m := []float32{
		0.9, 0.6, 0, 0.8,
		0.1, 0.5, 0, 0,
		0, 0.7, 0, 0,
		0, 0, 0, 0.2,
	}
	if b := index.WordBox(m, g, 0, 0, 0.45); b != [4]int{0, 0, 2, 1} {
		t.Errorf("box %v, want [0 0 2 1] (the 0.8 not connected)", b)
	}
	if b := index.WordBox(m, g, 3, 3, 0.1); b != [4]int{3, 3, 3, 3} {
		t.Errorf("box %v, want its own cell", b)
	}
}

func TestOpenIndexPartialAndTruncated(t *testing.T) {
	eng, imgs, out := queryEngine(t, 6, "float16")
	// A part the job has not finished: no index.json.
	unfinished := filepath.Join(out, "index", "part-2")
	writeFixturePart(t, unfinished, fixtureMeta(eng, imgs[0].enc.Grid, "float16"), imgs[:2])
	os.Remove(filepath.Join(unfinished, index.MetaFile))
	// A truncated part: patches cut short.
	cut := filepath.Join(out, "index", "part-3")
	writeFixturePart(t, cut, fixtureMeta(eng, imgs[0].enc.Grid, "float16"), imgs[:2])
	pp := filepath.Join(cut, index.PatchesFile)
	st, _ := os.Stat(pp)
	if err := os.Truncate(pp, st.Size()-100); err != nil {
		t.Fatal(err)
	}

	_, err := index.Open(context.Background(), out, index.Options{})
	if err == nil || !strings.Contains(err.Error(), "part-2") || !strings.Contains(err.Error(), "index.json") {
		t.Fatalf("open with an unfinished part: %v", err)
	}
	os.RemoveAll(unfinished)
	_, err = index.Open(context.Background(), out, index.Options{})
	if err == nil || !strings.Contains(err.Error(), "part-3") || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("open with a truncated part: %v", err)
	}
	writeFixturePart(t, unfinished, fixtureMeta(eng, imgs[0].enc.Grid, "float16"), imgs[:2])
	os.Remove(filepath.Join(unfinished, index.MetaFile))

	x, err := index.Open(context.Background(), out, index.Options{Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	sk := x.Skipped()
	if len(sk) != 2 || sk[0].Name != "part-2" || sk[1].Name != "part-3" {
		t.Fatalf("skipped %v", sk)
	}
	if x.Rows() != 6 {
		t.Fatalf("rows %d, want the complete parts' 6", x.Rows())
	}
	res, err := x.Search(context.Background(), eng, "red", index.SearchOptions{Top: 100})
	if err != nil || len(res.Hits) != 6 {
		t.Fatalf("search: %v, %d hits", err, len(res.Hits))
	}
}

func TestIndexRefusals(t *testing.T) {
	eng, imgs, out := queryEngine(t, 4, "float16")
	other := fixtureMeta(eng, imgs[0].enc.Grid, "float16")
	other.Model, other.Revision = "org/other", "abc123"
	writeFixturePart(t, filepath.Join(out, "index", "part-9"), other, imgs[:1])
	_, err := index.Open(context.Background(), out, index.Options{Partial: true})
	if err == nil || !strings.Contains(err.Error(), "org/other@abc123") || !strings.Contains(err.Error(), eng.Model().Name()) {
		t.Fatalf("open with a part of another model: %v", err)
	}
	// An index of another model than the engine's.
	x, err := index.Open(context.Background(), filepath.Join(out, "index", "part-9"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	_, err = x.Search(context.Background(), eng, "red", index.SearchOptions{})
	if err == nil || !strings.Contains(err.Error(), "org/other@abc123") || !strings.Contains(err.Error(), eng.Model().Name()) {
		t.Fatalf("search with another model's engine: %v", err)
	}
	for _, o := range []index.SearchOptions{{Top: -1}, {Top: index.MaxSearchTop + 1}, {Box: 1.5}} {
		if _, err := x.Search(context.Background(), eng, "red", o); err == nil {
			t.Errorf("search %+v: no error", o)
		}
	}
	if _, err := index.Open(context.Background(), t.TempDir(), index.Options{}); err == nil {
		t.Error("an empty folder opened as an index")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := x.Search(context.Background(), eng, "red", index.SearchOptions{}); !errors.Is(err, index.ErrClosed) {
		t.Fatalf("search after Close: %v", err)
	}
}

func TestSearchConcurrent(t *testing.T) {
	eng, _, out := queryEngine(t, 8, "float16")
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	prompts := []string{"red", "a blue car", "green", "a photo of a cat"}
	want := map[string]string{}
	for _, p := range prompts {
		res, err := x.Search(context.Background(), eng, p, index.SearchOptions{Top: 5, Words: true})
		if err != nil {
			t.Fatal(err)
		}
		want[p] = fmt.Sprint(hitKeys(res))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 4 {
				p := prompts[(g+i)%len(prompts)]
				res, err := x.Search(context.Background(), eng, p, index.SearchOptions{Top: 5, Words: true})
				if err != nil {
					errs <- err
					return
				}
				if got := fmt.Sprint(hitKeys(res)); got != want[p] {
					errs <- fmt.Errorf("%q: %s, alone %s", p, got, want[p])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func hitKeys(r *index.SearchResult) []string {
	var out []string
	for _, h := range r.Hits {
		out = append(out, fmt.Sprintf("%s/%d:%.4f", h.Part, h.Row, h.Score))
	}
	return out
}

// TestOpenStoreNeedsStore checks that an object-store index is refused,
// with the reason, when no Store is given.
func TestOpenStoreNeedsStore(t *testing.T) {
	for _, u := range []string{"s3://bucket/out/", "gs://bucket/out", "azblob://bucket/out/index/"} {
		_, err := index.Open(context.Background(), u, index.Options{})
		if err == nil || !strings.Contains(err.Error(), "no object-store opener given") || !strings.HasPrefix(err.Error(), "index: open ") {
			t.Errorf("Open(%s) without a Store: %v", u, err)
		}
	}
	x := &index.Index{}
	if _, err := x.ReadImage(context.Background(), &index.Hit{Source: "s3://bucket/a.jpg"}); err == nil || !strings.Contains(err.Error(), "no object-store opener given") {
		t.Errorf("ReadImage of an object without a Store: %v", err)
	}
}
