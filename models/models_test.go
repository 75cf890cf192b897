package models_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/hub/hubtest"
	"github.com/conditionhq/condition/tensorio"
)

var tiny = filepath.Join("..", "testdata", "tinyclip")

func TestOpenDirectory(t *testing.T) {
	m, err := models.Open(tiny, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	// Values written by testdata/tinyclip/generate.py.
	if c.ProjectionDim != 16 || c.TextConfig.HiddenSize != 32 || c.VisionConfig.HiddenSize != 24 ||
		c.VisionConfig.PatchSize != 8 || c.VisionConfig.ImageSize != 32 || c.TextConfig.MaxPositionEmbeddings != 16 ||
		c.TextConfig.EosTokenID != c.TextConfig.VocabSize-1 {
		t.Fatalf("config %+v", c)
	}
	if h, w := c.VisionConfig.GridSize(); h != 4 || w != 4 {
		t.Errorf("grid %dx%d, want 4x4", h, w)
	}
	if !m.Has(models.TextModelFile) || !m.Has(models.VisionModelFile) || m.Has("onnx") {
		t.Error("Has is wrong")
	}
	if _, err := fs.Stat(m.FS(), "tokenizer.json"); err != nil {
		t.Error(err)
	}
	abs, _ := filepath.Abs(tiny)
	if m.Dir() != abs || m.Path(models.TextModelFile) != filepath.Join(abs, "onnx", "text_model.onnx") {
		t.Errorf("Dir %s Path %s", m.Dir(), m.Path(models.TextModelFile))
	}
	_, err = m.ReadFile("onnx/missing.onnx")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "onnx/missing.onnx") || !strings.Contains(err.Error(), tiny) {
		t.Errorf("missing file: %v; want an error naming the file and the model", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "model.onnx")
	os.WriteFile(file, []byte("x"), 0o644)
	noConfig := filepath.Join(dir, "empty")
	os.Mkdir(noConfig, 0o755)
	badConfig := filepath.Join(dir, "bad")
	os.Mkdir(badConfig, 0o755)
	os.WriteFile(filepath.Join(badConfig, "config.json"), []byte(`{"vision_config": {"image_size": 6, "patch_size": 8}}`), 0o644)
	for _, c := range []struct {
		ref  string
		want []string
	}{
		{"", []string{"empty model reference"}},
		{file, []string{"is a file"}},
		{filepath.Join(dir, "nope"), []string{"no folder " + filepath.Join(dir, "nope"), "as a hub id"}},
		{noConfig, []string{"has no config.json", noConfig}},
		{badConfig, []string{"config.json", "vision_config.image_size 6 is smaller than patch_size 8"}},
		{"openai/clip-vit-base-patch32", []string{"not in the Hugging Face cache", "config.json", "onnx/text_model.onnx", "offline, so not fetched"}},
		{"openai/clip-vit-base-patch32@main+", []string{"expected <model>+<weights>"}},
	} {
		_, err := models.Open(c.ref, models.Options{HubCache: filepath.Join(dir, "hub"), Offline: true})
		if err == nil {
			t.Errorf("Open(%q): no error", c.ref)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%q): error %q lacks %q", c.ref, err, w)
			}
		}
	}
}

func TestOpenHubCache(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1") // the snapshot has no graphs: do not ask the hub for them
	hub := t.TempDir()
	repo := filepath.Join(hub, "models--org--tiny")
	commit := strings.Repeat("ab", 20)
	snap := filepath.Join(repo, "snapshots", commit)
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit+"\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "refs", "v1"), []byte(commit), 0o644)
	b, err := os.ReadFile(filepath.Join(tiny, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The hub cache keeps files as symlinks into blobs/.
	os.MkdirAll(filepath.Join(repo, "blobs"), 0o755)
	os.WriteFile(filepath.Join(repo, "blobs", "cfg"), b, 0o644)
	if err := os.Symlink(filepath.Join("..", "..", "blobs", "cfg"), filepath.Join(snap, "config.json")); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"org/tiny", "org/tiny@main", "org/tiny@v1", "org/tiny@" + commit} {
		m, err := models.Open(ref, models.Options{HubCache: hub})
		if err != nil {
			t.Fatalf("Open(%s): %v", ref, err)
		}
		if m.Revision() != commit || m.Dir() != snap || m.Config().ProjectionDim != 16 {
			t.Errorf("Open(%s): revision %s dir %s", ref, m.Revision(), m.Dir())
		}
	}
	t.Setenv("HF_HUB_CACHE", hub)
	if _, err := models.Open("org/tiny", models.Options{}); err != nil {
		t.Errorf("with HF_HUB_CACHE: %v", err)
	}
	if _, err := models.Open("org/tiny@dev", models.Options{}); err == nil || !strings.Contains(err.Error(), "org/tiny@dev") {
		t.Errorf("unknown revision: %v", err)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := models.ParseConfig([]byte(`{"projection_dim": 768, "text_config": {"hidden_size": 768}, "vision_config": {"patch_size": 14, "image_size": 336}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := models.DefaultConfig()
	if c.ProjectionDim != 768 || c.TextConfig.HiddenSize != 768 || c.TextConfig.VocabSize != d.TextConfig.VocabSize ||
		c.TextConfig.MaxPositionEmbeddings != 77 || c.VisionConfig.HiddenSize != 768 || c.VisionConfig.PatchSize != 14 ||
		c.LogitScaleInitValue != 2.6592 || c.TextConfig.EosTokenID != 49407 {
		t.Fatalf("config %+v", c)
	}
	// Older files: text_config_dict / vision_config_dict.
	c, err = models.ParseConfig([]byte(`{"text_config_dict": {"hidden_size": 64}, "vision_config_dict": {"hidden_size": 48, "patch_size": 16}}`))
	if err != nil || c.TextConfig.HiddenSize != 64 || c.VisionConfig.HiddenSize != 48 || c.VisionConfig.PatchSize != 16 {
		t.Fatalf("config_dict: %+v, %v", c, err)
	}
	// google/siglip-so400m-patch14-384: 384 pixels in 14-pixel patches, a
	// 27×27 grid (transformers' convolution drops the 6 pixels left over).
	c, err = models.ParseConfig([]byte(`{"model_type": "siglip", "text_config": {"hidden_size": 1152}, "vision_config": {"hidden_size": 1152, "image_size": 384, "patch_size": 14}}`))
	if h, w := c.VisionConfig.GridSize(); err != nil || h != 27 || w != 27 {
		t.Fatalf("so400m: grid %dx%d, %v", h, w, err)
	}
	for _, bad := range []string{`[1]`, `{"projection_dim": 0}`, `{"text_config": {"hidden_size": "wide"}}`} {
		if _, err := models.ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s): no error", bad)
		}
	}
}

func TestWeights(t *testing.T) {
	m, err := models.Open(tiny, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.ReadWeights("text_projection.weight", "visual_projection.weight", "vision_model.post_layernorm.weight")
	if err != nil {
		t.Fatal(err)
	}
	// HF layout [out, in]: projection_dim × width.
	if s := w["text_projection.weight"].Shape; len(s) != 2 || s[0] != 16 || s[1] != 32 {
		t.Errorf("text_projection.weight %v, want [16 32]", s)
	}
	if s := w["visual_projection.weight"].Shape; len(s) != 2 || s[0] != 16 || s[1] != 24 {
		t.Errorf("visual_projection.weight %v, want [16 24]", s)
	}
	if _, err := m.ReadWeights("nope"); err == nil || !strings.Contains(err.Error(), "no tensor nope") {
		t.Errorf("missing tensor: %v", err)
	}
	// generate.py leaves logit_scale at its initial value, ln(1/0.07).
	s, fromWeights, err := m.LogitScale()
	if err != nil || !fromWeights || s < 2.659 || s > 2.6593 {
		t.Errorf("LogitScale = %v, %v, %v", s, fromWeights, err)
	}
}

// repoFromDir makes a fake hub repository of a model folder's files (the
// .onnx, .safetensors and external-data files as LFS files, the rest kept in
// git).
func repoFromDir(t *testing.T, dir string, extra map[string]string) map[string]hubtest.File {
	t.Helper()
	files := map[string]hubtest.File{}
	add := func(name, p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lfs := false
		for _, suffix := range []string{".onnx", ".safetensors", ".onnx_data", ".data"} {
			lfs = lfs || strings.HasSuffix(name, suffix)
		}
		files[name] = hubtest.File{Data: b, LFS: lfs}
	}
	for _, n := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"} {
		add(n, filepath.Join(dir, n))
	}
	for name, p := range extra {
		add(name, p)
	}
	return files
}

const (
	commitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	commitB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	commitC = "cccccccccccccccccccccccccccccccccccccccc"
)

func fakeHub(t *testing.T) *hubtest.Server {
	onnx := filepath.Join(tiny, "onnx")
	full := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":       filepath.Join(onnx, "text_model.onnx"),
		"onnx/vision_model.onnx":     filepath.Join(onnx, "vision_model.onnx"),
		"onnx/text_model_int32.onnx": filepath.Join(onnx, "variants", "text_model_int32.onnx"),
		"model.safetensors":          filepath.Join(tiny, "model.safetensors"),
	})
	// ONNX only, as many hub exports are.
	onnxOnly := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":   filepath.Join(onnx, "text_model.onnx"),
		"onnx/vision_model.onnx": filepath.Join(onnx, "vision_model.onnx"),
	})
	// Pooled-only exports.
	pooled := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":   filepath.Join("..", "testdata", "hub", "pooled_only", "text_model.onnx"),
		"onnx/vision_model.onnx": filepath.Join(onnx, "pooled_only", "vision_model.onnx"),
	})
	// A PyTorch repository: configs and model.safetensors, no graphs.
	pt := repoFromDir(t, tiny, map[string]string{"model.safetensors": filepath.Join(tiny, "model.safetensors")})
	// Graphs keeping their initializers in side files (internal/onnxgraph/testdata/external).
	ext := filepath.Join("..", "internal", "onnxgraph", "testdata", "external")
	external := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":        filepath.Join(ext, "text_model.onnx"),
		"onnx/text_model.onnx.data":   filepath.Join(ext, "text_model.onnx.data"),
		"onnx/vision_model.onnx":      filepath.Join(ext, "vision_model.onnx"),
		"onnx/vision_model.onnx_data": filepath.Join(ext, "vision_model.onnx_data"),
		// Another graph's data: not fetched for this model.
		"onnx/model.onnx_data": filepath.Join(ext, "vision_model.onnx_data"),
	})
	noData := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":   filepath.Join(onnx, "text_model.onnx"),
		"onnx/vision_model.onnx": filepath.Join(ext, "vision_model.onnx"),
	})
	escape := repoFromDir(t, tiny, map[string]string{
		"onnx/text_model.onnx":        filepath.Join(onnx, "text_model.onnx"),
		"onnx/vision_model.onnx":      filepath.Join(ext, "escape.onnx"),
		"onnx/vision_model.onnx_data": filepath.Join(ext, "vision_model.onnx_data"),
	})
	return hubtest.New(t, map[string]*hubtest.Repo{
		"org/tinyclip": {Commits: map[string]map[string]hubtest.File{commitA: full}, Branches: map[string]string{"main": commitA}},
		"org/external": {Commits: map[string]map[string]hubtest.File{commitA: external}, Branches: map[string]string{"main": commitA}},
		"org/nodata":   {Commits: map[string]map[string]hubtest.File{commitA: noData}, Branches: map[string]string{"main": commitA}},
		"org/escape":   {Commits: map[string]map[string]hubtest.File{commitA: escape}, Branches: map[string]string{"main": commitA}},
		"org/pr": {Commits: map[string]map[string]hubtest.File{commitB: onnxOnly, commitC: onnxOnly},
			Branches: map[string]string{"main": commitB, "refs/pr/1": commitC}},
		"org/onnx":   {Commits: map[string]map[string]hubtest.File{commitB: onnxOnly}, Branches: map[string]string{"main": commitB}},
		"org/pooled": {Commits: map[string]map[string]hubtest.File{commitB: pooled}, Branches: map[string]string{"main": commitB}},
		"org/pt":     {Commits: map[string]map[string]hubtest.File{commitC: pt}, Branches: map[string]string{"main": commitC}},
	})
}

// hubOptions opens models from the fake hub into the hub cache folder
// cache, keeping derived files in a folder of the test's own.
func hubOptions(t *testing.T, srv *hubtest.Server, cache string) models.Options {
	return models.Options{Hub: &hub.Client{Endpoint: srv.URL(), CacheDir: cache, RetryWait: 1}, DerivedCache: t.TempDir()}
}

func TestOpenFetchesFromHub(t *testing.T) {
	srv := fakeHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	var progressed int
	opts.Progress = func(hub.Progress) { progressed++ }
	m, err := models.Open("org/tinyclip", opts)
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(cache, "models--org--tinyclip", "snapshots", commitA)
	if m.Revision() != commitA || m.Dir() != snap || m.Repo() != "org/tinyclip" || progressed == 0 {
		t.Errorf("revision %s dir %s progress %d", m.Revision(), m.Dir(), progressed)
	}
	for _, f := range []string{models.ConfigFile, models.TextModelFile, models.VisionModelFile, models.WeightsFile, "tokenizer.json", models.PreprocessorFile} {
		if !m.Has(f) {
			t.Errorf("no %s", f)
		}
	}
	// Only what the model needs: the int32 variant stays on the hub.
	if _, err := os.Lstat(filepath.Join(snap, "onnx", "text_model_int32.onnx")); err == nil {
		t.Error("fetched a variant nobody asked for")
	}
	want, _ := os.ReadFile(filepath.Join(tiny, "onnx", "vision_model.onnx"))
	if got, err := m.ReadFile(models.VisionModelFile); err != nil || !bytes.Equal(got, want) {
		t.Errorf("vision graph differs: %v", err)
	}
	if s, fromWeights, err := m.LogitScale(); err != nil || !fromWeights || s < 2.659 || s > 2.6593 {
		t.Errorf("LogitScale %v %v %v", s, fromWeights, err)
	}
	// Opened again: the cache is complete, no request at all.
	srv.Reset()
	if _, err := models.Open("org/tinyclip", opts); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("second open made %d requests", len(r))
	}
	// Offline, from the cache; and Update asks the hub again.
	off := opts
	off.Offline = true
	if m, err := models.Open("org/tinyclip@main", off); err != nil || m.Revision() != commitA {
		t.Errorf("offline: %v", err)
	}
	upd := opts
	upd.Update = true
	if _, err := models.Open("org/tinyclip", upd); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); len(r) == 0 {
		t.Error("Update made no request")
	}
	// Offline, a model not cached: the error says what is missing and why.
	_, err = models.Open("org/onnx", off)
	if !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "not in the Hugging Face cache") || !strings.Contains(err.Error(), "org/onnx@main") {
		t.Errorf("offline, not cached: %v", err)
	}
	// Hub errors come through.
	if _, err := models.Open("org/nope", opts); !errors.Is(err, hub.ErrUnauthorized) {
		t.Errorf("unknown repo: %v", err)
	}
	if _, err := models.Open("org/tinyclip@nope", opts); !errors.Is(err, hub.ErrRevisionNotFound) {
		t.Errorf("unknown revision: %v", err)
	}
}

func TestOpenVariant(t *testing.T) {
	srv := fakeHub(t)
	opts := hubOptions(t, srv, t.TempDir())
	opts.Variant = "int32"
	m, err := models.Open("org/tinyclip", opts)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(tiny, "onnx", "variants", "text_model_int32.onnx"))
	if got, err := m.ReadFile(models.TextModelFile); err != nil || !bytes.Equal(got, want) || m.Source(models.TextModelFile) != "onnx/text_model_int32.onnx" {
		t.Errorf("variant graph: source %s, %v", m.Source(models.TextModelFile), err)
	}
	// No int32 vision graph: asking for it names the variant's file.
	if _, err := m.ReadFile(models.VisionModelFile); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "onnx/vision_model_int32.onnx") {
		t.Errorf("missing variant graph: %v", err)
	}
	opts.Variant = "fp16"
	_, err = models.Open("org/tinyclip", opts)
	if err == nil || !strings.Contains(err.Error(), "no fp16 variant") || !strings.Contains(err.Error(), `"" (plain), int32`) {
		t.Errorf("unknown variant: %v", err)
	}
	// Directories take variants too.
	dm, err := models.Open(tiny, models.Options{Variant: "nomask"})
	if err == nil {
		t.Errorf("tinyclip keeps its variants in onnx/variants, not onnx/: %s", dm.Source(models.TextModelFile))
	}
}

func TestOpenWeightsFromAnotherRepo(t *testing.T) {
	srv := fakeHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	opts.MaxWeightsDownload = 1000 // the checkpoint counts as large: read the heads by ranges
	m, err := models.Open("org/onnx+org/pt", opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.WeightsSource() != "org/pt" || m.Revision() != commitB {
		t.Errorf("weights %q revision %s", m.WeightsSource(), m.Revision())
	}
	// The heads go to the derived cache, not into the hub cache's snapshot.
	heads := filepath.Join(opts.DerivedCache, "models--org--pt", commitC, models.HeadsFile)
	if m.Path(models.WeightsFile) != heads {
		t.Errorf("weights path %s, want %s", m.Path(models.WeightsFile), heads)
	}
	if fi, err := os.Lstat(heads); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("heads file: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(cache, "models--org--pt", "snapshots", commitC, models.HeadsFile)); err == nil {
		t.Errorf("heads written into the hub cache's snapshot")
	}
	// The heads equal the checkpoint's.
	full, _, err := tensorio.ReadSafetensors(filepath.Join(tiny, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.ReadWeights(models.HeadNames...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range models.HeadNames {
		a, _ := got[n].Float32()
		b, _ := full[n].Float32()
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s: %d values, want %d", n, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s[%d] = %v, want %v", n, i, a[i], b[i])
			}
		}
	}
	// Range requests only, and a small part of the file.
	fi, _ := os.Stat(filepath.Join(tiny, "model.safetensors"))
	var served int64
	for _, r := range srv.Requests() {
		if r.Role == "cdn" && strings.Contains(r.Path, hubtest.SHA256(mustRead(t, filepath.Join(tiny, "model.safetensors")))) {
			if r.Range == "" {
				t.Errorf("a GET of the whole checkpoint: %+v", r)
			}
			served += r.Bytes
		}
	}
	if served == 0 || served > fi.Size()/4 {
		t.Errorf("read %d bytes of a %d-byte checkpoint for the heads", served, fi.Size())
	}
	// Opened again, offline: the heads come from the cache.
	srv.Reset()
	opts.Offline = true
	if m, err := models.Open("org/onnx+org/pt", opts); err != nil || m.Path(models.WeightsFile) != heads {
		t.Errorf("offline reopen: %v", err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("offline reopen made requests: %+v", r)
	}
	// Weights that do not fit the model.
	bad := t.TempDir()
	st, _ := tensorio.EncodeSafetensors(map[string]tensorio.Tensor{"text_projection.weight": tensorio.F32([]int{3, 2}, make([]float32, 6))}, nil)
	os.WriteFile(filepath.Join(bad, "model.safetensors"), st, 0o644)
	opts.Offline = false
	if _, err := models.Open("org/onnx+"+bad, opts); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("mismatched weights: %v", err)
	}
	if _, err := models.Open("org/onnx+"+t.TempDir(), opts); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("weights folder without model.safetensors: %v", err)
	}
}

func TestExposeHubModel(t *testing.T) {
	srv := fakeHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	m, err := models.Open("org/pooled", opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Expose()
	if err != nil {
		t.Fatal(err)
	}
	// Written to the derived cache, by repository and commit.
	derived := filepath.Join(opts.DerivedCache, "models--org--pooled", commitB)
	snap := filepath.Join(cache, "models--org--pooled", "snapshots", commitB)
	for i, g := range []string{"onnx/text_model", "onnx/vision_model"} {
		r := res[i]
		if r.Written != filepath.Join(derived, filepath.FromSlash(g+".exposed.onnx")) || r.Walk == nil || r.Already {
			t.Errorf("%s: %+v", g, r)
		}
		if _, err := os.Lstat(filepath.Join(snap, filepath.FromSlash(g+".exposed.onnx"))); err == nil {
			t.Errorf("%s written into the hub cache's snapshot", g)
		}
		if canon := []string{models.TextModelFile, models.VisionModelFile}[i]; m.Path(canon) != r.Written {
			t.Errorf("after expose, %s from %s", canon, m.Path(canon))
		}
	}
	// Opened again (offline), the model serves the rewritten graphs.
	opts.Offline = true
	m, err = models.Open("org/pooled", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		if !strings.HasSuffix(m.Source(g), models.ExposedSuffix) || !strings.HasPrefix(m.Path(g), derived) {
			t.Errorf("%s served from %s (%s)", g, m.Source(g), m.Path(g))
		}
		b, err := m.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		gm, err := onnxgraph.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := gm.Graph.Output("last_hidden_state"); !ok {
			t.Errorf("%s has no last_hidden_state", g)
		}
	}
	// Exposing again does nothing; the cache verifies.
	if res, err := m.Expose(); err != nil || !res[0].Already || !res[1].Already {
		t.Errorf("second expose: %+v %v", res, err)
	}
	checks, err := hub.Cache{Dir: cache}.Verify("org/pooled", commitB, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !c.OK || c.Kind == "" {
			t.Errorf("verify %+v", c)
		}
	}
	// A directory: written beside the original.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "onnx"), 0o755)
	os.WriteFile(filepath.Join(dir, "config.json"), mustRead(t, filepath.Join(tiny, "config.json")), 0o644)
	os.WriteFile(filepath.Join(dir, "onnx", "vision_model.onnx"), mustRead(t, filepath.Join(tiny, "onnx", "pooled_only", "vision_model.onnx")), 0o644)
	os.WriteFile(filepath.Join(dir, "onnx", "text_model.onnx"), mustRead(t, filepath.Join(tiny, "onnx", "pooled_only", "text_model.onnx")), 0o644)
	dm, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = dm.Expose()
	// The hand-made text stand-in is not a CLIP export: a clear error for it, the vision graph done.
	if err == nil || !strings.Contains(err.Error(), "step 1") || res[0].Error == "" || res[1].Written != filepath.Join(dir, "onnx", "vision_model.exposed.onnx") {
		t.Errorf("directory expose: %+v %v", res, err)
	}
	if dm.Source(models.VisionModelFile) != "onnx/vision_model.exposed.onnx" {
		t.Errorf("after expose, vision from %s", dm.Source(models.VisionModelFile))
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenDefault opens the model built into the binary: the Hugging Face
// layout, readable without a download.
func TestOpenDefault(t *testing.T) {
	m, err := models.Open("default", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{models.ConfigFile, models.PreprocessorFile, models.TextModelFile, models.VisionModelFile, models.WeightsFile, "tokenizer.json"} {
		if !m.Has(f) {
			t.Errorf("default model lacks %s", f)
		}
	}
	if c := m.Config(); c.VisionConfig.ImageSize != 64 || c.VisionConfig.PatchSize != 8 || c.ProjectionDim <= 0 {
		t.Errorf("default config: %+v", c)
	}
}
