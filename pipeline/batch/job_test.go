package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
	"github.com/conditionhq/condition/tensorio"
)

var tinyModel = enginetest.TinyDir()

func openTiny(t testing.TB) *models.Model { return enginetest.TinyModel(t) }

func makeImages(t testing.TB, dir string, n int) { enginetest.MakeImages(t, dir, n) }

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

func readManifest(t testing.TB, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	es, err := ParseManifest(f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestRunOutputsAndFailures(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 5)
	os.WriteFile(filepath.Join(in, "corrupt.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644)
	os.WriteFile(filepath.Join(in, "empty.jpg"), nil, 0o644)
	os.WriteFile(filepath.Join(in, "text.webp"), []byte("hello, I am text"), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	prompts := []string{"a red circle", "blue"}
	var progress []Progress
	sum, err := Run(context.Background(), Config{
		Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{in}, Prompts: prompts, Out: out, Heatmaps: true, PerHead: true,
		Batch: 2, Workers: 2, Version: "test",
		Progress: func(p Progress) { progress = append(progress, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 5 || sum.Failed != 3 || sum.Skipped != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if len(progress) != 8 || !progress[7].Walked || progress[7].Seen != 8 {
		t.Errorf("progress calls: %d, last %+v", len(progress), progress[len(progress)-1])
	}
	entries := readManifest(t, sum.Manifest)
	if len(entries) != 8 {
		t.Fatalf("%d manifest entries", len(entries))
	}
	cfg := m.Config()
	p := (cfg.VisionConfig.ImageSize / cfg.VisionConfig.PatchSize) * (cfg.VisionConfig.ImageSize / cfg.VisionConfig.PatchSize)
	for _, e := range entries {
		if strings.HasPrefix(e.Path, "img-") || strings.HasPrefix(e.Path, "sub/img-") {
			if e.Status != StatusOK || len(e.Outputs) != 3 || len(e.Scores) != 2 {
				t.Errorf("entry %+v", e)
				continue
			}
			checkOutput(t, filepath.Join(in, e.Path), filepath.Join(out, e.Outputs[0]), e, p, cfg.VisionConfig.HiddenSize, len(prompts))
			f, err := os.Open(filepath.Join(out, e.Outputs[1]))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(f); err != nil {
				t.Errorf("heatmap %s: %v", e.Outputs[1], err)
			}
			f.Close()
			continue
		}
		if e.Status != StatusError || e.Error == "" || len(e.Outputs) != 0 {
			t.Errorf("bad input recorded as %+v", e)
		}
	}
}

// checkOutput checks one image's output file against what the job promises:
// tensors, shapes, rows of attention that sum to 1, metadata.
func checkOutput(t *testing.T, src, path string, e Entry, p, dv, nPrompts int) {
	t.Helper()
	ts, meta, err := tensorio.ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(src)
	h := sha256.Sum256(b)
	if meta["source_sha256"] != hex.EncodeToString(h[:]) || e.SHA256 != meta["source_sha256"] {
		t.Errorf("%s: sha256 %q, file has %x", path, meta["source_sha256"], h)
	}
	for _, k := range []string{"model", "prompts", "tokens", "preprocessing", "program_version", "settings", "revision", "jpeg_decoder"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("%s: metadata lacks %q", path, k)
		}
	}
	if sh := ts["patch_features"].Shape; len(sh) != 2 || sh[0] != p || sh[1] != dv {
		t.Errorf("patch_features shape %v, want [%d %d]", sh, p, dv)
	}
	for k := range nPrompts {
		pre := fmt.Sprintf("prompt.%d.", k)
		ids := ts[pre+"input_ids"]
		tl := ids.Shape[0]
		for _, c := range []struct {
			name       string
			rows, cols int
		}{{"image_to_text", p, tl}, {"text_to_image", tl, p}} {
			a := ts[pre+c.name]
			if len(a.Shape) != 2 || a.Shape[0] != c.rows || a.Shape[1] != c.cols {
				t.Fatalf("%s%s shape %v, want [%d %d]", pre, c.name, a.Shape, c.rows, c.cols)
			}
			v := a.Data.([]float32)
			for r := range c.rows {
				s := 0.0
				for _, x := range v[r*c.cols : (r+1)*c.cols] {
					s += float64(x)
				}
				if math.Abs(s-1) > 1e-4 {
					t.Fatalf("%s%s row %d sums to %v", pre, c.name, r, s)
				}
			}
			heads := ts[pre+c.name+"_heads"]
			if len(heads.Shape) != 3 || heads.Shape[1] != c.rows || heads.Shape[2] != c.cols {
				t.Errorf("%s%s_heads shape %v", pre, c.name, heads.Shape)
			}
		}
		for _, name := range []string{"conditioned_patches", "conditioned_tokens"} {
			if _, ok := ts[pre+name]; !ok {
				t.Errorf("no %s%s", pre, name)
			}
		}
	}
}

// TestNumPyLoadsOutputs checks both formats with numpy itself; it skips where
// python3 with numpy is not installed (the format is checked above anyway).
func TestNumPyLoadsOutputs(t *testing.T) {
	py := pythonWithNumPy()
	if py == "" {
		t.Skip("python3 with numpy is not installed; TestRunOutputsAndFailures checked the files in Go")
	}
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 2)
	for _, format := range []string{"safetensors", "npz"} {
		out := filepath.Join(t.TempDir(), format)
		if _, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out, Format: format}); err != nil {
			t.Fatal(err)
		}
		script := `
import sys, json, struct, numpy as np
path, fmt = sys.argv[1], sys.argv[2]
if fmt == "npz":
    z = np.load(path)
    t = {k: z[k] for k in z.files}
    meta = json.loads(bytes(t["metadata_json"]).decode())
else:
    # safetensors.numpy.load_file does exactly this; the safetensors package is not installed here.
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8+n])
    meta = hdr.pop("__metadata__")
    dt = {"F32": np.float32, "I64": np.int64}
    t = {k: np.frombuffer(b[8+n+v["data_offsets"][0]:8+n+v["data_offsets"][1]], dtype=dt[v["dtype"]]).reshape(v["shape"]) for k, v in hdr.items()}
a = t["prompt.0.text_to_image"]
assert a.dtype == np.float32 and a.ndim == 2, a.shape
assert np.allclose(a.sum(axis=1), 1, atol=1e-4)
assert meta["prompts"] == '["red"]', meta["prompts"]
print("ok", a.shape)
`
		name := "img-001.png." + format
		outp, err := exec.Command(py, "-c", script, filepath.Join(out, name), format).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(outp), "ok") {
			t.Fatalf("%s: numpy: %v\n%s", format, err, outp)
		}
	}
}

func TestRunResumeSkipsDone(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 4)
	out := filepath.Join(t.TempDir(), "out")
	cfg := Config{Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Change one image and remove another's output: only those two rerun.
	os.WriteFile(filepath.Join(in, "img-001.png"), mustRead(t, filepath.Join(in, "img-002.png")), 0o644)
	os.Remove(filepath.Join(out, "img-002.png.safetensors"))
	cfg.Resume = true
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 2 || sum.Skipped != 2 {
		t.Fatalf("resume: %+v", sum)
	}
	// Other settings: nothing is skipped.
	cfg.Prompts = []string{"blue"}
	if sum, _ := Run(context.Background(), cfg); sum.Skipped != 0 || sum.Done != 4 {
		t.Fatalf("resume with other prompts: %+v", sum)
	}
	if got := Latest(readManifest(t, filepath.Join(out, "manifest.jsonl"))); len(got) != 4 {
		t.Fatalf("manifest after resumes: %d images", len(got))
	}
}

func TestRunCancelled(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 30)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	sum, err := Run(ctx, Config{Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: filepath.Join(t.TempDir(), "out"), Batch: 1, Workers: 1,
		Progress: func(Progress) {
			if n++; n == 3 {
				cancel()
			}
		}})
	if err != context.Canceled || sum == nil || !sum.Interrupted || sum.Done >= 30 || sum.Done < 3 {
		t.Fatalf("cancelled run: %+v, %v", sum, err)
	}
	if got := len(readManifest(t, sum.Manifest)); got != sum.Done+sum.Failed {
		t.Fatalf("manifest has %d entries for %+v", got, sum)
	}
}

func TestRunBadConfig(t *testing.T) {
	m := openTiny(t)
	eng := tinyEngine(t, m, pipeline.Options{})
	in := t.TempDir()
	for name, cfg := range map[string]Config{
		"no engine":    {Inputs: []string{in}, Prompts: []string{"red"}, Out: t.TempDir()},
		"no prompts":   {Engine: eng, Inputs: []string{in}, Out: t.TempDir()},
		"empty prompt": {Engine: eng, Inputs: []string{in}, Prompts: []string{"  "}, Out: t.TempDir()},
		"long prompt":  {Engine: eng, Inputs: []string{in}, Prompts: []string{strings.Repeat("red ", 40)}, Out: t.TempDir()},
		"format":       {Engine: eng, Inputs: []string{in}, Prompts: []string{"red"}, Out: t.TempDir(), Format: "csv"},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// Layers the engine cannot build.
	for name, opts := range map[string]pipeline.Options{
		"joint with heads":     {Layer: pipeline.Layer{Heads: 2}},
		"identity with prefix": {Layer: pipeline.Layer{Weights: "identity", Prefix: "attn2."}},
		"negative heads":       {Layer: pipeline.Layer{Weights: "identity", Heads: -1}},
		"missing weights file": {Layer: pipeline.Layer{Weights: filepath.Join(in, "none.safetensors")}},
	} {
		if _, err := pipeline.New(context.Background(), m, opts); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pythonWithNumPy returns a Python interpreter that has numpy (the first
// python3 on PATH, then the system's), or "".
func pythonWithNumPy() string {
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	return ""
}

// TestRunStreams runs one job with one encoder stream and with three, and
// with one stream decoding its batches on two goroutines from a folder where
// files that are not images sit between the images (so batches lose images
// in the middle and close the gaps): every image is done once, and the
// outputs agree with one stream's on the clean folder (batches of different
// make-up may round differently in the last bits, hence the tolerance).
func TestRunStreams(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 11)
	inBad := filepath.Join(t.TempDir(), "in")
	makeImages(t, inBad, 11)
	for _, name := range []string{"img-001x.png", "img-004x.png", filepath.Join("sub", "img-000x.png")} {
		if err := os.WriteFile(filepath.Join(inBad, name), []byte("not a png"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outs := map[string]string{}
	for _, tc := range []struct {
		name                    string
		in                      string
		streams, threads, batch int
		readAhead               int64
		failed                  int
	}{
		{"1 stream", in, 1, 1, 2, 0, 0},
		{"3 streams", in, 3, 1, 2, 0, 0},
		{"1 stream of 2 threads, bad files", inBad, 1, 2, 4, 0, 3},
		// Each file passes alone, once the one before is decoded (a byte
		// not given back would stop the job with an error).
		{"2 streams, 1 byte read ahead, bad files", inBad, 2, 1, 4, 1, 3},
	} {
		out := filepath.Join(t.TempDir(), "out")
		eng := tinyEngine(t, m, pipeline.Options{Threads: tc.threads, NoSpinning: true})
		sum, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{tc.in}, Prompts: []string{"a red circle"},
			Out: out, Batch: tc.batch, Streams: tc.streams, ReadAhead: tc.readAhead})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if sum.Done != 11 || sum.Failed != tc.failed {
			t.Fatalf("%s: summary %+v, want 11 done, %d failed", tc.name, sum, tc.failed)
		}
		seen := map[string]int{}
		for _, e := range readManifest(t, sum.Manifest) {
			seen[e.Path]++
		}
		if len(seen) != 11+tc.failed {
			t.Errorf("%s: manifest has %d images, want %d: %v", tc.name, len(seen), 11+tc.failed, seen)
		}
		for p, n := range seen {
			if n != 1 {
				t.Errorf("%s: %s in the manifest %d times", tc.name, p, n)
			}
		}
		outs[tc.name] = out
	}
	ref := outs["1 stream"]
	files, err := filepath.Glob(filepath.Join(ref, "*.safetensors"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no outputs in %s (%v)", ref, err)
	}
	sub, _ := filepath.Glob(filepath.Join(ref, "sub", "*.safetensors"))
	for _, f := range append(files, sub...) {
		rel, _ := filepath.Rel(ref, f)
		a, _, err := tensorio.ReadSafetensors(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range []string{"3 streams", "1 stream of 2 threads, bad files", "2 streams, 1 byte read ahead, bad files"} {
			b, _, err := tensorio.ReadSafetensors(filepath.Join(outs[other], rel))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"patch_features", "image_embeds", "prompt.0.image_to_text", "prompt.0.text_to_image"} {
				x, y := a[name].Data.([]float32), b[name].Data.([]float32)
				if len(x) == 0 || len(x) != len(y) {
					t.Fatalf("%s %s: %d and %d values", rel, name, len(x), len(y))
				}
				for i := range x {
					if d := math.Abs(float64(x[i] - y[i])); d > 1e-5*(1+math.Abs(float64(x[i]))) {
						t.Fatalf("%s %s[%d]: %v with one stream, %v with %s", rel, name, i, x[i], y[i], other)
					}
				}
			}
		}
	}
}

// TestRunSameOutputName gives two folders of the same name: their images
// would write the same outputs, so the second folder's fail, each recorded
// in the manifest under its own path with the reason.
func TestRunSameOutputName(t *testing.T) {
	m := openTiny(t)
	a, b := filepath.Join(t.TempDir(), "imgs"), filepath.Join(t.TempDir(), "imgs")
	makeImages(t, a, 2)
	makeImages(t, b, 2)
	sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{Threads: 1}), Inputs: []string{a, b}, Prompts: []string{"red"},
		Out: filepath.Join(t.TempDir(), "out"), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 2 || sum.Failed != 2 {
		t.Fatalf("summary %+v, want 2 done, 2 failed", sum)
	}
	failed := 0
	for _, e := range readManifest(t, sum.Manifest) {
		if e.Status != StatusError {
			continue
		}
		failed++
		if !strings.HasPrefix(e.Path, "imgs/") || !strings.HasPrefix(e.Source, b) || !strings.Contains(e.Error, "two inputs map to the output name") {
			t.Errorf("failed entry %+v: want its path under imgs/, its source under %s and the reason", e, b)
		}
	}
	if failed != 2 {
		t.Errorf("%d failed entries in the manifest, want 2", failed)
	}
}

// TestRunCountsAhead: the progress knows the total early, from a walk that
// only lists, long before the job's own walk (held back by its bounded
// queue) ends.
func TestRunCountsAhead(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 60)
	var calls []Progress
	_, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{Threads: 1}), Inputs: []string{in}, Prompts: []string{"red"},
		Out: filepath.Join(t.TempDir(), "out"), Batch: 1, Workers: 1, Streams: 1,
		Progress: func(p Progress) {
			calls = append(calls, p)
			if len(calls) == 1 {
				// The job is held here, its queue full: the counting walk,
				// another goroutine, gets a second even on a machine busy
				// with other tests. Without it, five tiny images can finish
				// before that goroutine first runs.
				time.Sleep(time.Second)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 60 || !calls[59].Walked || calls[59].Seen != 60 {
		t.Fatalf("%d progress calls, last %+v", len(calls), calls[len(calls)-1])
	}
	if p := calls[4]; !p.Walked || p.Seen != 60 {
		t.Errorf("after 5 of 60 images the total is not known: %+v", p)
	}
}
