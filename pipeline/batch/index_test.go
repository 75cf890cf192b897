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

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn"
)

// f16Reference pairs float32 bits with the IEEE half bits numpy 1.24.2
// gives them (numpy.float32(x).astype(numpy.float16), round to nearest
// even): zeros, ties between two halves (1+2^-11 → 1, 1+3·2^-11 → 1+2^-9,
// 2049 → 2048, 2051 → 2052), the largest half and the first value that
// overflows (65520), subnormals and the tie at half the smallest (2^-25 → 0,
// 3·2^-26 → 2^-24), the edge of the normals, infinities, then 60 values of
// a unit vector's size and 30 of every magnitude, drawn with numpy's
// default_rng(7).
var f16Reference = [][2]uint32{
	{0x00000000, 0x0000}, {0x80000000, 0x8000}, {0x3f800000, 0x3c00}, {0xc0000000, 0xc000}, {0x3f000000, 0x3800}, {0x3dcccccd, 0x2e66},
	{0xbdcccccd, 0xae66}, {0x3eaaaaab, 0x3555}, {0x40490fdb, 0x4248}, {0xc0490fdb, 0xc248}, {0x477fe000, 0x7bff}, {0x477fef00, 0x7bff},
	{0x477ff000, 0x7c00}, {0x47c35000, 0x7c00}, {0xc7c35000, 0xfc00}, {0x33800000, 0x0001}, {0x33000000, 0x0000}, {0x33400000, 0x0001},
	{0x33000001, 0x0001}, {0x337d6730, 0x0001}, {0x322bcc77, 0x0000}, {0x38800000, 0x0400}, {0x387fe000, 0x0400}, {0x387fda40, 0x03ff},
	{0x387ba882, 0x03ef}, {0x358637bd, 0x0011}, {0xb58637bd, 0x8011}, {0x3f801000, 0x3c00}, {0x3f803000, 0x3c02}, {0x3f802000, 0x3c01},
	{0x3f801001, 0x3c01}, {0x45001000, 0x6800}, {0x45003000, 0x6802}, {0x3f7fbe77, 0x3bfe}, {0x3f7fe000, 0x3bff}, {0x3f7ff000, 0x3c00},
	{0xbf3504f3, 0xb9a8}, {0x7f800000, 0x7c00}, {0xff800000, 0xfc00}, {0x3980fdae, 0x0c08}, {0x3d74bb7b, 0x2ba6}, {0xbd6092e0, 0xab05},
	{0xbe3664aa, 0xb1b3}, {0xbdba3bb0, 0xadd2}, {0xbe4b16d7, 0xb259}, {0x3c45141c, 0x2229}, {0x3e893cf0, 0x344a}, {0xbdc99b98, 0xae4d},
	{0xbdfe2582, 0xaff1}, {0x3dc8a3aa, 0x2e45}, {0x3d922e51, 0x2c91}, {0x3cacb5f1, 0x2566}, {0xbe3e8f53, 0xb1f4}, {0xbbbfb46b, 0x9dfe},
	{0x3e0e65ea, 0x3073}, {0xbe89a5c7, 0xb44d}, {0xbdbb707e, 0xaddc}, {0xbec2af6a, 0xb615}, {0xbe840c76, 0xb420}, {0xbebc97fb, 0xb5e5},
	{0xbd40962f, 0xaa05}, {0xbe81c95a, 0xb40e}, {0x3d5e3842, 0x2af2}, {0x3d006916, 0x2803}, {0xbd192243, 0xa8c9}, {0xbf00dbac, 0xb807},
	{0xbddca60b, 0xaee5}, {0xbc1eed8b, 0xa0f7}, {0x3cb9a53c, 0x25cd}, {0xbe9caf97, 0xb4e5}, {0xbdc3b010, 0xae1e}, {0xbe486695, 0xb243},
	{0xbe25a65e, 0xb12d}, {0x3e5945a5, 0x32ca}, {0xbe256213, 0xb12b}, {0xbbd5225f, 0x9ea9}, {0x3e351f80, 0x31a9}, {0xbdef0af2, 0xaf78},
	{0xbcb70332, 0xa5b8}, {0x3cb4fc05, 0x25a8}, {0x3c510008, 0x2288}, {0xbe7ae435, 0xb3d7}, {0x3c797f0f, 0x23cc}, {0x3e8b24be, 0x3459},
	{0xbe9e6d78, 0xb4f3}, {0x3e300067, 0x3180}, {0x3cc38cb5, 0x261c}, {0xbe035f86, 0xb01b}, {0x3eccd7b8, 0x3667}, {0x3e1c1c5d, 0x30e1},
	{0xbe759d47, 0xb3ad}, {0x3c742cbf, 0x23a1}, {0x3dec364a, 0x2f62}, {0xbd1aa67b, 0xa8d5}, {0x3e0bdc2b, 0x305f}, {0xbc59f6c7, 0xa2d0},
	{0x3e08a6fd, 0x3045}, {0x3e934e02, 0x349a}, {0xbe0a602a, 0xb053}, {0x45d00391, 0x6e80}, {0xc46d36a7, 0xe36a}, {0x3d0252a7, 0x2813},
	{0xbc97f5fe, 0xa4c0}, {0xc2144d1c, 0xd0a2}, {0xbcc8e799, 0xa647}, {0x3c661564, 0x2331}, {0x391296a2, 0x0895}, {0xbc29695c, 0xa14b},
	{0xc24b6daf, 0xd25b}, {0x33259b76, 0x0001}, {0xb37f079d, 0x8001}, {0xc0ed249a, 0xc769}, {0xb8c73e5e, 0x863a}, {0x43a0e5de, 0x5d07},
	{0x32b07cc6, 0x0000}, {0xc5278884, 0xe93c}, {0xb43cb5fb, 0x8003}, {0xba00199d, 0x9001}, {0x47430303, 0x7a18}, {0xb3db2616, 0x8002},
	{0xbf9b7bff, 0xbcdc}, {0x4134868e, 0x49a4}, {0xb9f7567f, 0x8fbb}, {0xb2ca04e0, 0x8000}, {0xbd8e99c1, 0xac75}, {0xb83cc48a, 0x82f3},
	{0xc4631d14, 0xe319}, {0x411543ad, 0x48aa}, {0x392730cf, 0x093a},
}

// TestIndexF16MatchesNumPy: the index's float16 values are numpy's
// float32 → float16 cast, bit for bit, ties to even, subnormals and
// overflow included.
func TestIndexF16MatchesNumPy(t *testing.T) {
	src := make([]float32, len(f16Reference))
	for i, c := range f16Reference {
		src[i] = math.Float32frombits(c[0])
	}
	b := indexOutAppendF16(nil, src)
	for i, c := range f16Reference {
		got := uint16(b[2*i]) | uint16(b[2*i+1])<<8
		if got != uint16(c[1]) {
			t.Errorf("%g (0x%08x): 0x%04x, numpy 0x%04x", src[i], c[0], got, c[1])
		}
	}
	if h := tensorio.Float32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN: 0x%04x, not a NaN", h)
	}
}

// TestIndexQuantize: int8 values times the scale are within half a step of
// each value; the largest magnitude is ±127; a zero vector is zeros with
// scale 0.
func TestIndexQuantize(t *testing.T) {
	x := []float32{0.5, -0.25, 0.125, -0.5, 0.0001, 0.3}
	q := make([]byte, len(x))
	s := indexOutQuantize(q, x)
	if s != float32(0.5)/127 {
		t.Errorf("scale %g, want 0.5/127", s)
	}
	for i, v := range x {
		if d := math.Abs(float64(int8(q[i]))*float64(s) - float64(v)); d > float64(s)/2+1e-9 {
			t.Errorf("x[%d] = %g: %d·%g is %g off", i, v, int8(q[i]), s, d)
		}
	}
	if int8(q[0]) != 127 || int8(q[3]) != -127 {
		t.Errorf("the largest magnitudes are %d and %d, want ±127", int8(q[0]), int8(q[3]))
	}
	z := []byte{1, 2}
	if s := indexOutQuantize(z, []float32{0, 0}); s != 0 || z[0] != 0 || z[1] != 0 {
		t.Errorf("zero vector: scale %g, values %v", s, z)
	}
}

// indexPartData is one index part, read back.
type indexPartData struct {
	meta    indexOutMeta
	embeds  []float32 // [N, D], dequantised
	patches []float32 // [N, P, D], dequantised
	steps   []float32 // [N·(1+P)]: each vector's int8 step (its scale), or 0
	grids   []int32   // [N, 2], a part of per-image grids only
}

// readIndexPart reads index part dir, checking its arrays' shapes against
// its index.json.
func readIndexPart(t *testing.T, dir string) indexPartData {
	t.Helper()
	var d indexPartData
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d.meta); err != nil {
		t.Fatalf("%s/index.json: %v", dir, err)
	}
	n, p, dim := d.meta.Rows, d.meta.Grid[0]*d.meta.Grid[1], d.meta.Dim
	if d.meta.MaxPatches > 0 {
		p = d.meta.MaxPatches
	}
	load := func(name string, dt tensorio.DType, shape ...int) tensorio.Tensor {
		x, err := tensorio.ReadNPY(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if x.DType != dt || fmt.Sprint(x.Shape) != fmt.Sprint(shape) {
			t.Fatalf("%s/%s: %s %v, want %s %v", dir, name, x.DType, x.Shape, dt, shape)
		}
		return x
	}
	values := func(x tensorio.Tensor) []float32 {
		switch v := x.Data.(type) {
		case []float32:
			return v
		case []uint16:
			out := make([]float32, len(v))
			for i, h := range v {
				out[i] = tensorio.F16ToFloat32(h)
			}
			return out
		case []int8:
			out := make([]float32, len(v))
			for i, q := range v {
				out[i] = float32(q)
			}
			return out
		}
		t.Fatalf("%s: data %T", dir, x.Data)
		return nil
	}
	dt := indexOutElem(d.meta.DType)
	d.embeds = values(load("embeds.npy", dt, n, dim))
	d.patches = values(load("patches.npy", dt, n, p, dim))
	if d.meta.DType == indexOutInt8 {
		es := load("embeds_scale.npy", tensorio.DTypeF32, n).Data.([]float32)
		ps := load("patches_scale.npy", tensorio.DTypeF32, n, p).Data.([]float32)
		for r := range n {
			for k := range dim {
				d.embeds[r*dim+k] *= es[r]
			}
			d.steps = append(d.steps, es[r])
			for q := range p {
				for k := range dim {
					d.patches[(r*p+q)*dim+k] *= ps[r*p+q]
				}
				d.steps = append(d.steps, ps[r*p+q])
			}
		}
	} else if _, err := os.Stat(filepath.Join(dir, "embeds_scale.npy")); err == nil {
		t.Errorf("%s: a %s index has scales", dir, d.meta.DType)
	}
	if d.meta.MaxPatches > 0 {
		d.grids = load("grids.npy", tensorio.DTypeI32, n, 2).Data.([]int32)
	} else if _, err := os.Stat(filepath.Join(dir, "grids.npy")); err == nil {
		t.Errorf("%s: a part of one grid has grids.npy", dir)
	}
	return d
}

// indexTolerance is how far a stored value of a unit vector may be from the
// float32 one: float16 rounds to 11 significant bits (half a step is
// 2^-11 relative, at most 2^-12 absolute for values below 1), int8 to half
// its step, float32 a float32's noise.
func indexTolerance(dtype string, x, step float32) float64 {
	switch dtype {
	case indexOutF16:
		return math.Abs(float64(x))*math.Exp2(-11) + 1e-7
	case indexOutInt8:
		return float64(step)/2 + 1e-6
	}
	return 1e-6
}

// checkIndexAgainstJob checks every index part under out against what the
// job wrote and what the engine computes: rows in walk order (parts of
// size), items naming each image's path, source, sha256 and status as the
// manifest does, embeds its image_embeds normalised, patches its
// JointPatches; a failed image's rows are zeros. ref gives each image's
// image_embeds [D] and encoding.
func checkIndexAgainstJob(t *testing.T, out string, eng *pipeline.Engine, order []string, size int, dtype string, byPath map[string]Entry,
	ref func(path string) ([]float32, *pipeline.ImageEncoding)) {
	t.Helper()
	parts := (len(order) + size - 1) / size
	settings := ""
	for _, e := range byPath {
		settings = e.Settings
	}
	for i := range parts {
		dir := filepath.Join(out, "index", fmt.Sprintf("%06d", i))
		d := readIndexPart(t, dir)
		m := d.meta
		n := min(size, len(order)-i*size)
		g := eng.Model().Config().VisionConfig
		if m.Format != "condition-index/v1" || m.Model != eng.Model().Name() || m.Revision != eng.Model().Revision() || m.Settings != settings ||
			m.DType != dtype || m.Dim != eng.JointDim() || m.Grid != [2]int{g.ImageSize / g.PatchSize, g.ImageSize / g.PatchSize} ||
			m.LogitScale != eng.LogitScale() || m.Rows != n || len(m.Items) != n {
			t.Fatalf("%s/index.json: %+v", dir, m)
		}
		p, dim := m.Grid[0]*m.Grid[1], m.Dim
		for r, it := range m.Items {
			e := byPath[order[i*size+r]]
			if it.Row != r || it.Path != e.Path || it.Source != e.Source || it.SHA256 != e.SHA256 || it.Status != e.Status || it.Member != "" {
				t.Errorf("%s item %d: %+v, manifest %+v", dir, r, it, e)
			}
			emb, pat := d.embeds[r*dim:(r+1)*dim], d.patches[r*p*dim:(r+1)*p*dim]
			if it.Status != StatusOK {
				for _, v := range append(append([]float32(nil), emb...), pat...) {
					if v != 0 {
						t.Fatalf("%s row %d (%s, failed): not zeros", dir, r, it.Path)
					}
				}
				continue
			}
			want, enc := ref(it.Path)
			var ss float64
			for _, v := range want {
				ss += float64(v) * float64(v)
			}
			var norm float64
			for k, v := range emb {
				norm += float64(v) * float64(v)
				w := float32(float64(want[k]) / math.Sqrt(ss))
				step := float32(0)
				if d.steps != nil {
					step = d.steps[r*(1+p)]
				}
				if diff := math.Abs(float64(v - w)); diff > indexTolerance(dtype, w, step)+1e-6 {
					t.Fatalf("%s row %d embeds[%d] = %g, the normalised image_embeds %g", dir, r, k, v, w)
				}
			}
			if tol := map[string]float64{indexOutF32: 1e-5, indexOutF16: 2e-3, indexOutInt8: 1e-2}[dtype]; math.Abs(math.Sqrt(norm)-1) > tol {
				t.Errorf("%s row %d: embeds' norm %g", dir, r, math.Sqrt(norm))
			}
			jp, err := eng.JointPatches(enc)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range pat {
				step := float32(0)
				if d.steps != nil {
					step = d.steps[r*(1+p)+1+k/dim]
				}
				if diff := math.Abs(float64(v - jp[k])); diff > indexTolerance(dtype, jp[k], step)+1e-5 {
					t.Fatalf("%s row %d patches[%d] = %g, JointPatches %g (off %g)", dir, r, k, v, jp[k], diff)
				}
			}
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(out, "index")); len(ents) != parts {
		t.Errorf("%d index parts, want %d", len(ents), parts)
	}
}

// indexFixture is a folder of images (one of them corrupt) and the
// engine's own encodings of them.
type indexFixture struct {
	in    string
	eng   *pipeline.Engine
	order []string // the walk's order
}

func newIndexFixture(t *testing.T, n int) *indexFixture {
	t.Helper()
	f := &indexFixture{in: filepath.Join(t.TempDir(), "in"), eng: tinyEngine(t, openTiny(t), pipeline.Options{Threads: 1})}
	makeImages(t, f.in, n)
	os.WriteFile(filepath.Join(f.in, "img-0025-corrupt.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644)
	Walk(context.Background(), []string{f.in}, func(it Item) error { f.order = append(f.order, it.Rel); return nil }, nil)
	return f
}

// ref returns path's image_embeds and encoding, from the engine.
func (f *indexFixture) ref(t *testing.T) func(string) ([]float32, *pipeline.ImageEncoding) {
	return func(p string) ([]float32, *pipeline.ImageEncoding) {
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
}

func latestByPath(t *testing.T, manifest string) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	for _, e := range Latest(readManifest(t, manifest)) {
		out[e.Path] = e
	}
	return out
}

// TestRunIndexFilesLayout: a files-layout job with an index in each dtype
// writes parts of ShardSize rows in walk order, which hold every image's
// normalised image_embeds and JointPatches within the dtype's rounding,
// zeros for the corrupt one; the per-image files are those of the job
// without an index, byte for byte, and that job's settings hash does not
// change.
func TestRunIndexFilesLayout(t *testing.T) {
	f := newIndexFixture(t, 6)
	prompts := []string{"a photo of a cat", "a red car"}
	plain := filepath.Join(t.TempDir(), "plain")
	psum, err := Run(context.Background(), Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: prompts, Out: plain, ShardSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	plainEntries := latestByPath(t, psum.Manifest)
	for _, dtype := range []string{"", indexOutF32, indexOutInt8} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: prompts, Out: out, ShardSize: 3,
			Batch: 2, Streams: 2, Index: true, IndexDType: dtype})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Done != 6 || sum.Failed != 1 {
			t.Fatalf("%q: %+v", dtype, sum)
		}
		want := dtype
		if want == "" {
			want = indexOutF16
		}
		byPath := latestByPath(t, sum.Manifest)
		engRef := f.ref(t)
		checkIndexAgainstJob(t, out, f.eng, f.order, 3, want, byPath, func(p string) ([]float32, *pipeline.ImageEncoding) {
			// The job's own image_embeds, and the engine's encoding.
			ts, _, err := tensorio.ReadSafetensors(filepath.Join(out, p+".safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			_, enc := engRef(p)
			return ts["image_embeds"].Data.([]float32), enc
		})
		for p, e := range byPath {
			pe := plainEntries[p]
			if e.Settings == pe.Settings {
				t.Errorf("%q: the index leaves the settings hash %s as without it", dtype, e.Settings)
			}
			if e.Status != StatusOK {
				continue
			}
			if !bytes.Equal(mustRead(t, filepath.Join(out, p+".safetensors")), mustRead(t, filepath.Join(plain, p+".safetensors"))) {
				// The metadata's settings differ; the tensors must not.
				a, _, _ := tensorio.ReadSafetensors(filepath.Join(out, p+".safetensors"))
				b, _, _ := tensorio.ReadSafetensors(filepath.Join(plain, p+".safetensors"))
				for name, x := range b {
					if fmt.Sprint(a[name].Data) != fmt.Sprint(x.Data) {
						t.Errorf("%q: %s: %s differs from the job without an index", dtype, p, name)
					}
				}
			}
			if n := len(e.Outputs); n < 2 || e.Outputs[n-1] != fmt.Sprintf("index/%06d/index.json", slicesIndex(f.order, p)/3) {
				t.Errorf("%q: %s outputs %v: no index part", dtype, p, e.Outputs)
			}
		}
		rep, err := Merge(context.Background(), out, nil)
		if err != nil || len(rep.IndexMissing) != 0 {
			t.Errorf("%q: merge %+v, %v; want no index part missing", dtype, rep, err)
		}
	}
}

func slicesIndex(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// TestRunIndexShardsLayout: a shards-layout job with an int8 index, split
// over two processes: each process's parts are named as its shards, hold
// its images (dequantised within half a step), and VerifyShards proves the
// whole; a part deleted, one truncated and one without index.json are
// each named.
func TestRunIndexShardsLayout(t *testing.T) {
	f := newIndexFixture(t, 9)
	prompts := []string{"a photo of a cat"}
	out := filepath.Join(t.TempDir(), "out")
	for p := range 2 {
		if _, err := Run(context.Background(), Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: prompts, Out: out, Layout: "shards", ShardSize: 2,
			Batch: 2, Streams: 2, Index: true, IndexDType: indexOutInt8, Shard: Shard{Index: p, Count: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := VerifyShards(context.Background(), out, []string{f.in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() || rep.IndexParts != rep.Shards || rep.Images != 10 {
		t.Fatalf("verify: %+v; want complete, one index part per shard", rep)
	}
	// Each part against its shard's metadata, and its values.
	ents, _ := os.ReadDir(filepath.Join(out, "index"))
	rows := 0
	for _, e := range ents {
		name := e.Name()
		if _, err := os.Stat(filepath.Join(out, "metadata", "metadata_"+name+".parquet")); err != nil {
			t.Errorf("index part %s has no shard of its name", name)
			continue
		}
		meta := metaRows(t, mustRead(t, filepath.Join(out, "metadata", "metadata_"+name+".parquet")))
		d := readIndexPart(t, filepath.Join(out, "index", name))
		if len(meta) != d.meta.Rows || d.meta.DType != indexOutInt8 {
			t.Fatalf("index part %s: %d rows (%s), its shard %d", name, d.meta.Rows, d.meta.DType, len(meta))
		}
		p, dim := d.meta.Grid[0]*d.meta.Grid[1], d.meta.Dim
		for r, it := range d.meta.Items {
			if it.Path != meta[r].Key || it.SHA256 != meta[r].SHA256 || it.Status != meta[r].Status {
				t.Errorf("index part %s row %d: %+v, shard row %+v", name, r, it, meta[r])
			}
			rows++
			if it.Status != StatusOK {
				continue
			}
			_, enc := f.ref(t)(it.Path)
			jp, _ := f.eng.JointPatches(enc)
			for k, v := range d.patches[r*p*dim : (r+1)*p*dim] {
				if diff := math.Abs(float64(v - jp[k])); diff > indexTolerance(indexOutInt8, 0, d.steps[r*(1+p)+1+k/dim])+1e-5 {
					t.Fatalf("index part %s row %d patches[%d] = %g, JointPatches %g", name, r, k, v, jp[k])
				}
			}
		}
	}
	if rows != 10 {
		t.Errorf("the index parts hold %d rows, want 10", rows)
	}

	// A part deleted, one cut short, one without its index.json.
	names := []string{ents[0].Name(), ents[1].Name(), ents[2].Name()}
	os.RemoveAll(filepath.Join(out, "index", names[0]))
	pf := filepath.Join(out, "index", names[1], "patches.npy")
	st, _ := os.Stat(pf)
	os.Truncate(pf, st.Size()-64)
	os.Remove(filepath.Join(out, "index", names[2], "index.json"))
	rep, err = VerifyShards(context.Background(), out, []string{f.in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete() || len(rep.Broken) != 3 {
		t.Fatalf("verify after damage: %+v; want 3 broken index parts", rep)
	}
	for i, want := range []string{"missing", "patches.npy", "no index.json"} {
		found := false
		for _, b := range rep.Broken {
			found = found || strings.HasPrefix(b, "index/"+names[i]+": ") && strings.Contains(b, want)
		}
		if !found {
			t.Errorf("index part %s (%s): not named in %q", names[i], want, rep.Broken)
		}
	}
}

// TestRunIndexResume: jobs stopped midway (both layouts) leave index
// parts whole or absent; resumed, they keep the whole ones, redo every
// image of the others, and end with the bytes of a job never stopped.
func TestRunIndexResume(t *testing.T) {
	f := newIndexFixture(t, 20) // and the corrupt one: 7 parts of 3
	const total, parts = 21, 7
	prompts := []string{"a photo of a cat"}
	for _, layout := range []string{"files", "shards"} {
		run := func(out string, ctx context.Context, resume bool, progress func(Progress)) *Summary {
			sum, err := Run(ctx, Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: prompts, Out: out, Layout: layout, ShardSize: 3,
				Batch: 2, Streams: 2, Resume: resume, Progress: progress, Index: true})
			if err != nil && ctx.Err() == nil {
				t.Fatal(err)
			}
			return sum
		}
		// The files layout tries its failed image again (and fails); the
		// shards layout skips whole shards.
		retried := 0
		if layout == "files" {
			retried = 1
		}
		corruptPart := slicesIndex(f.order, "img-0025-corrupt.png") / 3
		whole := filepath.Join(t.TempDir(), "whole")
		run(whole, context.Background(), false, nil)
		if sum := run(whole, context.Background(), true, nil); sum.Done != 0 || sum.Skipped != total-retried || sum.Failed != retried {
			t.Errorf("%s: resumed when complete: %+v, want %d skipped", layout, sum, total-retried)
		}
		stopped := filepath.Join(t.TempDir(), "stopped")
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		run(stopped, ctx, false, func(Progress) {
			if n++; n == 2 {
				cancel()
			}
		})
		kept, skip := 0, 0
		ents, _ := os.ReadDir(filepath.Join(stopped, "index"))
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(stopped, "index", e.Name(), "index.json")); err != nil {
				t.Errorf("%s: index part %s is half there after the stop", layout, e.Name())
				continue
			}
			kept++
			skip += 3
			if e.Name() == fmt.Sprintf("%06d", corruptPart) {
				skip -= retried
			}
		}
		t.Logf("%s: %d of %d parts whole after the stop", layout, kept, parts)
		if kept == parts {
			t.Logf("%s: every part was finished before the stop took effect", layout)
		}
		sum := run(stopped, context.Background(), true, nil)
		if sum.Skipped != skip || sum.Done+sum.Failed != total-skip {
			t.Errorf("%s: resumed: %+v; want the %d images of the %d whole parts skipped, the others done again", layout, sum, skip, kept)
		}
		want, got := treeBytes(t, filepath.Join(whole, "index")), treeBytes(t, filepath.Join(stopped, "index"))
		if len(want) == 0 || len(want) != len(got) {
			t.Fatalf("%s: %d index files after stop and resume, %d uninterrupted", layout, len(got), len(want))
		}
		for name, b := range want {
			if !bytes.Equal(b, got[name]) {
				t.Errorf("%s: index/%s differs after stop and resume", layout, name)
			}
		}
		if ents, _ := filepath.Glob(filepath.Join(stopped, ".tmp-index-*")); len(ents) != 0 {
			t.Errorf("%s: temporary index folders left: %v", layout, ents)
		}
		if layout == "files" {
			os.Remove(filepath.Join(stopped, "index", "000001", "index.json"))
			rep, err := Merge(context.Background(), stopped, nil)
			if err != nil || fmt.Sprint(rep.IndexMissing) != "[index/000001]" {
				t.Errorf("merge with index/000001 incomplete: %+v, %v", rep, err)
			}
		}
	}
}

// TestRunIndexNeedsJointSpace: an index over an engine that is not in the
// joint space both ways, or of an unknown dtype, fails before any work.
func TestRunIndexNeedsJointSpace(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 1)
	for name, c := range map[string]struct {
		opts  pipeline.Options
		dtype string
		want  string
	}{
		"one direction": {pipeline.Options{Direction: xattn.TextToImage}, "", "joint space"},
		"image to text": {pipeline.Options{Direction: xattn.ImageToText}, "", "joint space"},
		"dtype":         {pipeline.Options{}, "bfloat16", `"bfloat16"`},
	} {
		out := filepath.Join(t.TempDir(), "out")
		_, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, c.opts), Inputs: []string{in}, Prompts: []string{"red"}, Out: out, Index: true, IndexDType: c.dtype})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %s", name, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: the output folder was made", name)
		}
	}
}
