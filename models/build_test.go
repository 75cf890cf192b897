package models_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/tensorio"
)

// tinyWithoutGraphs copies testdata/tinyclip's config, tokenizer and
// model.safetensors, without onnx/, into a temporary folder.
func tinyWithoutGraphs(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "tinyclip")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// openUnbuilt opens a copy of the tiny model without its graphs, with a
// derived cache of its own and NoBuild (so that Open does not build them).
func openUnbuilt(t *testing.T) (*models.Model, string, models.Options) {
	t.Helper()
	dir := tinyWithoutGraphs(t)
	opts := models.Options{DerivedCache: t.TempDir(), NoBuild: true}
	m, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir, opts
}

// TestBuildIntoDerivedCache builds the graphs of a folder that has none
// (opened with NoBuild, so that Open does not build them first), checks
// that opening the folder then serves them from the derived cache, and
// that a changed model.safetensors makes them stale.
func TestBuildIntoDerivedCache(t *testing.T) {
	orttest.Load(t)
	m, dir, opts := openUnbuilt(t)
	if m.Has(models.TextModelFile) {
		t.Fatal("the folder serves a text graph before any was built")
	}
	rep, err := m.Build(context.Background(), models.BuildOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Graphs) != 2 || !strings.Contains(rep.Graphs[1].Check, "image_embeds [2 16] finite") {
		t.Fatalf("report %+v", rep)
	}
	for _, g := range rep.Graphs {
		if !strings.HasPrefix(g.Path, opts.DerivedCache) {
			t.Errorf("%s written to %s, outside the derived cache", g.Graph, g.Path)
		}
		t.Logf("%s: %s (%s)", g.Graph, g.Path, g.Check)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 7 {
		t.Errorf("the model's folder changed: %d entries", len(ents))
	}
	m2, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Graphs {
		if p := m2.Path(g.Graph); p != g.Path {
			t.Errorf("reopened, %s is %s, want the built %s", g.Graph, p, g.Path)
		}
	}
	// A newer checkpoint: the built graphs are not used.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "model.safetensors"), later, later); err != nil {
		t.Fatal(err)
	}
	m3, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m3.Has(models.TextModelFile) {
		t.Errorf("graphs built from another version of model.safetensors are served: %s", m3.Path(models.TextModelFile))
	}
}

// TestBuildOut writes the graphs to a folder of the caller's, and a bad
// config writes nothing.
func TestBuildOut(t *testing.T) {
	orttest.Load(t)
	m, dir, _ := openUnbuilt(t)
	out := t.TempDir()
	if _, err := m.Build(context.Background(), models.BuildOptions{Out: out, QKV: "split"}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(g))); err != nil {
			t.Error(err)
		}
	}
	if err := m.UseGraphsFrom(out); err != nil {
		t.Fatal(err)
	}
	if p := m.Path(models.VisionModelFile); p != filepath.Join(out, "onnx", "vision_model.onnx") {
		t.Errorf("vision graph %s", p)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".build-") {
			t.Errorf("the temporary folder %s is left", e.Name())
		}
	}

	// A config whose text width disagrees with the checkpoint.
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	b = []byte(strings.Replace(string(b), `"hidden_size": 32`, `"hidden_size": 40`, 1))
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	_, err = m.Build(context.Background(), models.BuildOptions{Out: bad})
	if err == nil || !strings.Contains(err.Error(), "text_model.embeddings.token_embedding.weight has shape [562 32], the config gives [562 40]") {
		t.Fatalf("error %v", err)
	}
	if errors.Is(err, models.ErrBuildCheck) {
		t.Errorf("a config mismatch reported as a failed check: %v", err)
	}
	if ents, _ := os.ReadDir(bad); len(ents) > 0 {
		t.Errorf("files written despite the error: %v", ents)
	}
}

// tinySiglipWithoutGraphs copies testdata/tinysiglip's config, tokenizer
// and model.safetensors, without onnx/, into a temporary folder.
func tinySiglipWithoutGraphs(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "tinysiglip")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "special_tokens_map.json", "spiece.model", "tokenizer_config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuildSiglip builds the graphs of a copy of testdata/tinysiglip that
// has none, checks that the folder then serves them from the derived cache
// with a SigLIP export's inputs and outputs, and that SigLIP's encoders run
// them to torch's outputs (golden/text_pooler_output and
// vision_last_hidden_state, vision_pooler_output).
func TestBuildSiglip(t *testing.T) {
	orttest.Load(t)
	dir := tinySiglipWithoutGraphs(t)
	opts := models.Options{DerivedCache: t.TempDir(), NoBuild: true}
	m, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Family() != models.SigLIP || m.Has(models.VisionModelFile) {
		t.Fatalf("family %s, a vision graph before any was built: %v", m.Family(), m.Has(models.VisionModelFile))
	}
	rep, err := m.Build(context.Background(), models.BuildOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	checks := []string{"probe inputs [2 64]: last_hidden_state [2 64 32] finite pooler_output [2 24] finite",
		"probe inputs [2 3 32 32]: last_hidden_state [2 16 24] finite pooler_output [2 24] finite"}
	if len(rep.Graphs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for i, g := range rep.Graphs {
		if g.Check != checks[i] {
			t.Errorf("%s: check %q, want %q", g.Graph, g.Check, checks[i])
		}
	}
	m2, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Graphs {
		if p := m2.Path(g.Graph); p != g.Path {
			t.Errorf("reopened, %s is %s, want the built %s", g.Graph, p, g.Path)
		}
	}

	golden := func(name string) tensorio.Tensor {
		x, err := tensorio.ReadNPY(filepath.Join("..", "testdata", "tinysiglip", "golden", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	te, err := clip.OpenText(m2, clip.TextOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer te.Close()
	if te.HasAttentionMask() || !te.HasEmbeds() {
		t.Errorf("text encoder: attention mask %v, embeddings %v; want none and pooler_output", te.HasAttentionMask(), te.HasEmbeds())
	}
	ids := golden("text_input_ids")
	flat := ids.Data.([]int64)
	rows := make([][]int64, ids.Shape[0])
	for i := range rows {
		rows[i] = flat[i*ids.Shape[1] : (i+1)*ids.Shape[1]]
	}
	tr, err := te.Encode(context.Background(), rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []float32
	for _, r := range tr {
		got = append(got, r.Embeds...)
	}
	closeTo(t, "text pooler_output", got, golden("text_pooler_output"))

	ve, err := clip.OpenVision(m2, clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ve.Close()
	if ve.ClassTokens() != 0 || !ve.HasEmbeds() {
		t.Errorf("vision encoder: %d class tokens, embeddings %v; want 0 and pooler_output", ve.ClassTokens(), ve.HasEmbeds())
	}
	px := golden("vision_pixel_values")
	pv, _ := px.Float32()
	vr, err := ve.Encode(context.Background(), pv, px.Shape[0], px.Shape[2], px.Shape[3])
	if err != nil {
		t.Fatal(err)
	}
	var states, embeds []float32
	for _, r := range vr {
		states, embeds = append(states, r.States...), append(embeds, r.Embeds...)
	}
	closeTo(t, "vision last_hidden_state", states, golden("vision_last_hidden_state"))
	closeTo(t, "vision pooler_output", embeds, golden("vision_pooler_output"))
}

// closeTo fails t unless got is within 1e-5 of want's largest magnitude.
func closeTo(t *testing.T, what string, got []float32, want tensorio.Tensor) {
	t.Helper()
	w, err := want.Float32()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(w) {
		t.Fatalf("%s: %d values, torch has %d", what, len(got), len(w))
	}
	var d, m float64
	for i := range w {
		d = math.Max(d, math.Abs(float64(got[i])-float64(w[i])))
		m = math.Max(m, math.Abs(float64(w[i])))
	}
	if !(d <= 1e-5*m) {
		t.Errorf("%s: differs from torch by %.3g of its largest magnitude", what, d/m)
	} else {
		t.Logf("%s: within %.2g of torch", what, d/m)
	}
}

// TestBuildSiglipBadCheckpoint: a tensor of the wrong shape and a missing
// one are errors naming them (with the shape found and the one expected),
// before anything is written; a NaFlex config (model_type siglip2) is
// refused when the model is opened, saying so.
func TestBuildSiglipBadCheckpoint(t *testing.T) {
	orttest.Load(t)
	for _, c := range []struct {
		name string
		edit func(ts map[string]tensorio.Tensor)
		want string
	}{
		{"wrong shape", func(ts map[string]tensorio.Tensor) {
			ts["vision_model.head.probe"] = tensorio.F32([]int{1, 24}, make([]float32, 24))
		}, "tensor vision_model.head.probe has shape [1 24], the config gives [1 1 24]"},
		{"wrong width", func(ts map[string]tensorio.Tensor) {
			ts["text_model.head.weight"] = tensorio.F32([]int{32, 32}, make([]float32, 32*32))
		}, "tensor text_model.head.weight has shape [32 32], the config gives [24 32]"},
		{"missing", func(ts map[string]tensorio.Tensor) {
			delete(ts, "vision_model.head.attention.in_proj_bias")
		}, "tensor vision_model.head.attention.in_proj_bias is missing (expected shape [72])"},
		{"no patch bias", func(ts map[string]tensorio.Tensor) {
			delete(ts, "vision_model.embeddings.patch_embedding.bias")
		}, "tensor vision_model.embeddings.patch_embedding.bias is missing (expected shape [24])"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := tinySiglipWithoutGraphs(t)
			p := filepath.Join(dir, "model.safetensors")
			ts, meta, err := tensorio.ReadSafetensors(p)
			if err != nil {
				t.Fatal(err)
			}
			c.edit(ts)
			if err := tensorio.WriteSafetensors(p, ts, meta); err != nil {
				t.Fatal(err)
			}
			// Opened, the folder builds its graphs first and fails so.
			if _, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("open: %v, want an error containing %q", err, c.want)
			}
			m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			_, err = m.Build(context.Background(), models.BuildOptions{Out: out})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if errors.Is(err, models.ErrBuildCheck) {
				t.Errorf("a checkpoint mismatch reported as a failed check: %v", err)
			}
			if ents, _ := os.ReadDir(out); len(ents) > 0 {
				t.Errorf("files written despite the error: %v", ents)
			}
		})
	}

	dir := tinySiglipWithoutGraphs(t)
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(b), `"model_type": "siglip"`, `"model_type": "siglip2"`, 1)), 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"tokenizer_class": "CLIPTokenizer"}`), 0o644)
	_, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()})
	// SigLIP 2 NaFlex with CLIP's tokenizer: refused, naming both.
	if err == nil || !strings.Contains(err.Error(), `model_type "siglip2"`) || !strings.Contains(err.Error(), `tokenizer_class is "CLIPTokenizer"`) {
		t.Errorf("NaFlex config with a CLIP tokenizer: error %v", err)
	}
}

// TestBuildExternalData builds with every weight in external data (the
// path graphs over 1.9 GiB of weights take) into the derived cache and
// into a folder of the caller's: each graph's data file ends beside it, not
// in the build's temporary folder, and the graphs serve the exported
// graphs' and torch's outputs.
func TestBuildExternalData(t *testing.T) {
	orttest.Load(t)
	m, dir, opts := openUnbuilt(t)
	checkBuilt := func(rep *models.BuildReport, dest string) {
		t.Helper()
		if len(rep.Graphs) != 2 {
			t.Fatalf("report %+v", rep)
		}
		for _, g := range rep.Graphs {
			if g.Path != filepath.Join(dest, filepath.FromSlash(g.Graph)) || g.External != g.Path+"_data" {
				t.Errorf("%s written to %s, its data to %q; want %s and %[3]s_data", g.Graph, g.Path, g.External, filepath.Join(dest, filepath.FromSlash(g.Graph)))
			}
			fi, err := os.Stat(g.External)
			if err != nil {
				t.Errorf("%s: %v", g.Graph, err)
				continue
			}
			// The data file holds the weights; the graph their headers and
			// the tensors under 1 KiB (the tiny model's biases and norms).
			if fi.Size() < g.WeightBytes*9/10 || g.Bytes > g.WeightBytes/4 {
				t.Errorf("%s: graph %d bytes, data %d bytes, weights %d bytes", g.Graph, g.Bytes, fi.Size(), g.WeightBytes)
			}
		}
		ents, _ := os.ReadDir(dest)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".build-") {
				t.Errorf("the temporary folder %s is left", e.Name())
			}
		}
	}
	rep, err := m.Build(context.Background(), models.BuildOptions{Threads: 1, ExternalAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	checkBuilt(rep, filepath.Dir(filepath.Dir(rep.Graphs[0].Path)))
	if !strings.HasPrefix(rep.Graphs[0].Path, opts.DerivedCache) {
		t.Errorf("built into %s, outside the derived cache", rep.Graphs[0].Path)
	}
	opts.NoBuild = false
	reopened, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reopened.Built() || reopened.Path(models.VisionModelFile) != rep.Graphs[1].Path {
		t.Fatalf("reopened: built %v, vision graph %s", reopened.Built(), reopened.Path(models.VisionModelFile))
	}
	sameOutputs(t, reopened)

	out := t.TempDir()
	if rep, err = m.Build(context.Background(), models.BuildOptions{Out: out, Threads: 1, ExternalAbove: -1}); err != nil {
		t.Fatal(err)
	}
	checkBuilt(rep, out)
	if err := m.UseGraphsFrom(out); err != nil {
		t.Fatal(err)
	}
	sameOutputs(t, m)
}
