package models_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub/hubtest"
	"github.com/conditionhq/condition/tensorio"
)

// openCLIPRepo is testdata/tinyopenclip as a hub repository in OpenCLIP's
// layout (no config.json), with a pickled checkpoint beside the
// safetensors when pickle is set, or instead of it when only is set.
func openCLIPRepo(t *testing.T, pickle, only bool) map[string]hubtest.File {
	t.Helper()
	files := map[string]hubtest.File{}
	names := []string{models.OpenCLIPConfigFile, "tokenizer_config.json", "vocab.json", "merges.txt"}
	if !only {
		names = append(names, models.OpenCLIPWeightsFile)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(tinyOpenCLIP, n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = hubtest.File{Data: b, LFS: strings.HasSuffix(n, ".safetensors")}
	}
	if pickle || only {
		files["open_clip_pytorch_model.bin"] = hubtest.File{Data: []byte("a pickle"), LFS: true}
	}
	return files
}

// bareOpenCLIPRepo is testdata/tinyopenclip as a hub repository of the two
// files a real timm/PE-Core-* one may hold, open_clip_config.json and
// open_clip_model.safetensors, with CLIP's vocabulary size (text_cfg
// vocab_size 49,408, the token table grown to 49,408 rows, its first 594
// as they are and the end of text's row, 49,407, the tiny vocabulary's
// 593), so that OpenCLIP's built-in CLIP BPE is its tokenizer.
func bareOpenCLIPRepo(t *testing.T) map[string]hubtest.File {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyOpenCLIP, models.OpenCLIPConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	config := strings.Replace(string(b), `"vocab_size": 594`, `"vocab_size": 49408`, 1)
	if config == string(b) {
		t.Fatalf("%s: no vocab_size 594 to change", models.OpenCLIPConfigFile)
	}
	ts, meta, err := tensorio.ReadSafetensors(filepath.Join(tinyOpenCLIP, models.OpenCLIPWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	emb := ts["token_embedding.weight"]
	grown := make([]float32, 49408*emb.Shape[1])
	copy(grown, emb.Data.([]float32))
	for i := emb.NumElements(); i < len(grown); i++ {
		grown[i] = float32(0.2 * math.Sin(float64(i)*0.618))
	}
	d := emb.Shape[1]
	copy(grown[49407*d:], grown[593*d:594*d])
	ts["token_embedding.weight"] = tensorio.F32([]int{49408, emb.Shape[1]}, grown)
	w, err := tensorio.EncodeSafetensors(ts, meta)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]hubtest.File{
		models.OpenCLIPConfigFile:  {Data: []byte(config)},
		models.OpenCLIPWeightsFile: {Data: w, LFS: true},
	}
}

// TestOpenCLIPFromHub opens a hub repository in OpenCLIP's layout: its
// graphs are built from open_clip_model.safetensors (the pickle beside it
// never fetched) and give the folder's outputs and the transcription's
// image_embeds; opened again offline, no request. A repository of
// open_clip_config.json and open_clip_model.safetensors alone opens, has
// OpenCLIP's built-in CLIP BPE as its tokenizer, and encodes as the folder
// does. A repository with only a pickle is refused naming it, before any
// download.
func TestOpenCLIPFromHub(t *testing.T) {
	orttest.Load(t)
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/tiny-openclip": {Commits: map[string]map[string]hubtest.File{commitA: openCLIPRepo(t, true, false)}, Branches: map[string]string{"main": commitA}},
		"org/pickle-only":   {Commits: map[string]map[string]hubtest.File{commitA: openCLIPRepo(t, false, true)}, Branches: map[string]string{"main": commitA}},
		"org/bare-openclip": {Commits: map[string]map[string]hubtest.File{commitA: bareOpenCLIPRepo(t)}, Branches: map[string]string{"main": commitA}},
	})
	opts := hubOptions(t, srv, t.TempDir())
	m, err := models.Open("org/tiny-openclip", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !m.OpenCLIP() || !m.Built() {
		t.Fatalf("OpenCLIP %v, built %v; want both", m.OpenCLIP(), m.Built())
	}
	for _, r := range srv.Requests() {
		if strings.HasSuffix(r.Path, ".bin") || strings.HasSuffix(r.Path, "/config.json") && !strings.HasSuffix(r.Path, "open_clip_config.json") {
			t.Errorf("requested %s %s", r.Method, r.Path)
		}
	}
	folder, err := models.Open(tinyOpenCLIP, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ids, px := openCLIPGolden(t, "input_ids"), openCLIPGolden(t, "pixel_values")
	idv, err := ids.Int64()
	if err != nil {
		t.Fatal(err)
	}
	rows, masks := make([][]int64, ids.Shape[0]), make([][]int64, ids.Shape[0])
	for i := range rows {
		rows[i] = idv[i*ids.Shape[1] : (i+1)*ids.Shape[1]]
		masks[i] = make([]int64, len(rows[i]))
		for j, id := range rows[i] {
			if id != 0 {
				masks[i][j] = 1
			}
		}
	}
	hub, dir := encodeBoth(t, m, rows, masks, px), encodeBoth(t, folder, rows, masks, px)
	within(t, "text_embeds, hub against folder", hub.textEmbeds, dir.textEmbeds, 0)
	within(t, "image_embeds, hub against folder", hub.imageEmbeds, dir.imageEmbeds, 0)
	within(t, "image_embeds against the transcription", hub.imageEmbeds, openCLIPGolden(t, "image_embeds").Data.([]float32), 1e-5)
	if builtin, err := m.OpenAIBPE(); builtin || err != nil {
		t.Errorf("a repository with tokenizer files: OpenAIBPE %v, %v; want its files read", builtin, err)
	}

	bare, err := models.Open("org/bare-openclip", opts)
	if err != nil {
		t.Fatal(err)
	}
	if builtin, err := bare.OpenAIBPE(); !builtin || err != nil || !bare.OpenCLIP() || !bare.Built() {
		t.Fatalf("config and weights alone: OpenAIBPE %v (%v), OpenCLIP %v, built %v; want all", builtin, err, bare.OpenCLIP(), bare.Built())
	}
	// The same prompts, their end of text 49,407 (pooled there) for 593.
	eot := make([][]int64, len(rows))
	for i, r := range rows {
		eot[i] = slices.Clone(r)
		if k := slices.Index(r, 593); k >= 0 {
			eot[i][k] = 49407
		} else {
			t.Fatalf("golden input_ids row %d has no end of text 593: %v", i, r)
		}
	}
	got := encodeBoth(t, bare, eot, masks, px)
	within(t, "text_embeds, config and weights alone against the folder", got.textEmbeds, dir.textEmbeds, 0)
	within(t, "image_embeds, config and weights alone against the folder", got.imageEmbeds, dir.imageEmbeds, 0)
	// Opened again, online: the cached snapshot is whole without tokenizer
	// files, so the hub is not asked.
	srv.Reset()
	if bare, err = models.Open("org/bare-openclip", opts); err != nil {
		t.Fatal(err)
	}
	if builtin, err := bare.OpenAIBPE(); !builtin || err != nil {
		t.Errorf("config and weights alone, from the cache: OpenAIBPE %v, %v", builtin, err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("opening the cached config and weights asked the hub %d times: %+v", len(r), r)
	}

	srv.Reset()
	off := opts
	off.Offline = true
	if m, err = models.Open("org/tiny-openclip", off); err != nil || !m.OpenCLIP() || !m.Built() {
		t.Fatalf("offline: %v", err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("the offline open made %d requests: %+v", len(r), r)
	}

	_, err = models.Open("org/pickle-only", opts)
	if !errors.Is(err, models.ErrUnsupportedFamily) || !strings.Contains(err.Error(), "open_clip_pytorch_model.bin is a pickled PyTorch checkpoint") {
		t.Errorf("a pickle-only repository: %v", err)
	}
	for _, r := range srv.Requests() {
		if strings.HasSuffix(r.Path, ".bin") && r.Method == "GET" {
			t.Errorf("downloaded the pickle: %s %s", r.Method, r.Path)
		}
	}
}

func openCLIPGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyOpenCLIP, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// within requires got within tol of want, value by value.
func within(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > worst || math.IsNaN(d) {
			worst = d
		}
	}
	if worst > tol || math.IsNaN(worst) {
		t.Errorf("%s: differs by %g (tolerance %g)", what, worst, tol)
	}
}
