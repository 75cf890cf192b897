package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// peGolden reads dir/golden/name.npy (the golden of a tiny OpenCLIP or
// PE-Core folder) as float32 values and its shape.
func peGolden(t *testing.T, dir, name string) ([]float32, []int) {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(dir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := x.Data.([]int64); ok {
		f := make([]float32, len(v))
		for i := range v {
			f[i] = float32(v[i])
		}
		return f, x.Shape
	}
	return x.Data.([]float32), x.Shape
}

// peClose checks got against want: each value within 1e-5, cosine ≥
// 0.99999; it returns the largest difference and the cosine.
func peClose(t *testing.T, what string, got, want []float32) (float64, float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var worst, dot, gg, ww float64
	for k := range want {
		worst = max(worst, math.Abs(float64(got[k]-want[k])))
		dot += float64(got[k]) * float64(want[k])
		gg += float64(got[k]) * float64(got[k])
		ww += float64(want[k]) * float64(want[k])
	}
	c := dot / math.Sqrt(gg*ww)
	if worst > 1e-5 || c < 0.99999 {
		t.Errorf("%s: largest difference %.3g, cosine %.9f; want within 1e-5, cosine ≥ 0.99999", what, worst, c)
	}
	return worst, c
}

// TestPECore opens testdata/tinypecore and tinypecore-nocls, PE-Core
// models in OpenCLIP's layout alone (a timm vit_pe_core_* tower sized by
// timm_model_kwargs, CustomTextCLIP's text tower): the graphs are built on
// open, and the token ids, pixel values (OpenCLIP's PE transform: squash,
// bilinear, mean and std 0.5), image and text embeddings, logits and each
// patch's joint-space vector (the attention pool's value path, then the
// head) are those of scripts/openclip/make_tiny_pecore.py's float64
// transcription of OpenCLIP and timm; so are each readout's joint-space
// patches (the last block recomputed with q and k turned by its RoPE);
// raw is the default. So they are with the graphs rebuilt with q, k, v
// as one MatMul and a Split (models.BuildOptions.QKV "split").
func TestPECore(t *testing.T) {
	orttest.Load(t)
	for _, tc := range []struct {
		dir string
		cls int
		qkv string
	}{{"tinypecore", 1, ""}, {"tinypecore-nocls", 0, ""}, {"tinypecore", 1, "split"}, {"tinypecore-nocls", 0, "split"}} {
		t.Run(tc.dir+"/"+cmp.Or(tc.qkv, "separate"), func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			dir := filepath.Join("..", "testdata", tc.dir)
			m, err := models.Open(dir, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.qkv != "" {
				if _, err := m.Build(context.Background(), models.BuildOptions{QKV: tc.qkv}); err != nil {
					t.Fatal(err)
				}
				if m, err = models.Open(dir, models.Options{}); err != nil {
					t.Fatal(err)
				}
				if !graphHas(t, m.Path(models.VisionModelFile), "Split") {
					t.Fatalf("the vision graph rebuilt with q, k, v %s has no Split", tc.qkv)
				}
			}
			if !m.OpenCLIP() || !m.Built() || m.Config().VisionConfig.PECore == nil {
				t.Fatalf("OpenCLIP %v, built %v, PE-Core %v; want a PE-Core model with built graphs", m.OpenCLIP(), m.Built(), m.Config().VisionConfig.PECore)
			}
			eng := tinyEngine(t, m, Options{Threads: 1, Truncate: true})
			if eng.cls != tc.cls || eng.opts.Readout != ReadoutRaw {
				t.Errorf("%d class rows, readout %s; want %d, raw (the default)", eng.cls, eng.opts.Readout, tc.cls)
			}
			checkPECore(t, eng, m, dir)
			for _, r := range []clip.Readout{ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP, ReadoutPEARL} {
				checkPEReadout(t, tinyEngine(t, m, Options{Threads: 1, Readout: r}), dir, r)
			}
		})
	}
}

func checkPECore(t *testing.T, eng *Engine, m *models.Model, dir string) {
	ctx := context.Background()
	var prompts []string
	b, err := os.ReadFile(filepath.Join(dir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &prompts); err != nil {
		t.Fatal(err)
	}
	texts, err := eng.EncodeTexts(ctx, prompts)
	if err != nil {
		t.Fatal(err)
	}
	ids, shape := peGolden(t, dir, "input_ids")
	for i, te := range texts {
		row := ids[i*shape[1] : (i+1)*shape[1]]
		for j := range row {
			got := float32(0)
			if j < len(te.IDs) {
				got = float32(te.IDs[j])
			}
			if got != row[j] {
				t.Fatalf("prompt %q: ids %v, OpenCLIP's tokenizer %v", prompts[i], te.IDs, row)
			}
		}
	}
	var data [][]byte
	pre, err := vision.LoadPreprocessor(m.FS())
	if err != nil {
		t.Fatal(err)
	}
	wp, _ := peGolden(t, dir, "pixel_values")
	for i, f := range []string{"square.png", "wide.png", "odd.png"} {
		b, err := os.ReadFile(filepath.Join(dir, "golden", f))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
		img, err := vision.Decode(b, vision.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		px, _, _, err := pre.Apply(img)
		if err != nil {
			t.Fatal(err)
		}
		want := wp[i*len(px) : (i+1)*len(px)]
		for k := range px {
			if math.Abs(float64(px[k]-want[k])) > 1e-5 {
				t.Fatalf("image %d: pixel_values[%d] %v, OpenCLIP's transform %v", i, k, px[k], want[k])
			}
		}
	}
	wi, ishape := peGolden(t, dir, "image_embeds")
	wt, _ := peGolden(t, dir, "text_embeds")
	wj, jshape := peGolden(t, dir, "patch_embeds")
	d, p := ishape[1], jshape[1]
	for _, batch := range []int{3, 1} {
		var imgs []ImageEncoding
		for i := 0; i < len(data); i += batch {
			got, err := eng.EncodeImageData(ctx, data[i:i+batch])
			if err != nil {
				t.Fatal(err)
			}
			imgs = append(imgs, got...)
		}
		for i := range imgs {
			w, c := peClose(t, fmt.Sprintf("batch %d: image_embeds %d", batch, i), imgs[i].Embeds, wi[i*d:(i+1)*d])
			t.Logf("batch %d: image_embeds %d within %.2g, cosine %.9f", batch, i, w, c)
			jp, err := eng.JointPatches(&imgs[i])
			if err != nil {
				t.Fatal(err)
			}
			for r := range p {
				want := unit(wj[(i*p+r)*d : (i*p+r+1)*d])
				peClose(t, fmt.Sprintf("batch %d: image %d patch %d in the joint space", batch, i, r), jp[r*d:(r+1)*d], want)
			}
		}
		if batch == 3 {
			_, logits, err := eng.Similarity(imgs, texts)
			if err != nil {
				t.Fatal(err)
			}
			wl, _ := peGolden(t, dir, "logits_per_image")
			for i := range logits {
				for j, v := range logits[i] {
					if math.Abs(float64(v-wl[i*len(prompts)+j])) > 1e-4 {
						t.Errorf("logit [%d][%d] %v, the transcription's %v", i, j, v, wl[i*len(prompts)+j])
					}
				}
			}
		}
	}
	for i := range texts {
		w, c := peClose(t, fmt.Sprintf("text_embeds %q", prompts[i]), texts[i].Embeds, wt[i*d:(i+1)*d])
		t.Logf("text_embeds %d within %.2g, cosine %.9f", i, w, c)
	}
}

// checkPEReadout checks the joint-space patches of eng (readout r) on the
// golden images against the transcription's, at batch 3.
func checkPEReadout(t *testing.T, eng *Engine, dir string, r clip.Readout) {
	t.Helper()
	var data [][]byte
	for _, f := range []string{"square.png", "wide.png", "odd.png"} {
		b, err := os.ReadFile(filepath.Join(dir, "golden", f))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	imgs, err := eng.EncodeImageData(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	want, shape := peGolden(t, dir, "readout_"+string(r)+"_patch_embeds")
	p, d := shape[1], shape[2]
	worst, lowest := 0.0, 1.0
	for i := range imgs {
		jp, err := eng.JointPatches(&imgs[i])
		if err != nil {
			t.Fatal(err)
		}
		for k := range p {
			w, c := peClose(t, fmt.Sprintf("readout %s: image %d patch %d", r, i, k), jp[k*d:(k+1)*d], unit(want[(i*p+k)*d:(i*p+k+1)*d]))
			worst, lowest = max(worst, w), min(lowest, c)
		}
	}
	t.Logf("readout %s: joint patches within %.2g, lowest cosine %.9f", r, worst, lowest)
}

// graphHas reports whether the graph file path has a node of type op.
func graphHas(t *testing.T, path, op string) bool {
	t.Helper()
	g, err := onnxgraph.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	return slices.ContainsFunc(g.Graph.Nodes, func(n onnxgraph.Node) bool { return n.OpType == op })
}
