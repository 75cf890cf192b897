package models_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/hub/hubtest"
	"github.com/conditionhq/condition/tensorio"
)

// otherWeights are files of other frameworks that PyTorch repositories
// hold beside model.safetensors; building graphs must never fetch them.
var otherWeights = []string{"pytorch_model.bin", "flax_model.msgpack", "tf_model.h5"}

// fetchedOther reports the requests for otherWeights (or any .bin file).
func fetchedOther(reqs []hubtest.Request) []string {
	var out []string
	for _, r := range reqs {
		for _, f := range otherWeights {
			if strings.HasSuffix(r.Path, "/"+f) || strings.HasSuffix(r.Path, ".bin") {
				out = append(out, r.Method+" "+r.Path)
				break
			}
		}
	}
	return out
}

// checkpointRepo is testdata/tinyclip as a PyTorch repository: configs,
// tokenizer, the given checkpoint files and other frameworks' weights, no
// ONNX graphs.
func checkpointRepo(t *testing.T, ckpt map[string]string) map[string]hubtest.File {
	t.Helper()
	files := repoFromDir(t, tiny, ckpt)
	for _, f := range otherWeights {
		files[f] = hubtest.File{Data: []byte("weights of another framework: " + f), LFS: true}
	}
	return files
}

// shardTinyCLIP splits testdata/tinyclip's model.safetensors into two
// shards and their model.safetensors.index.json, in dir.
func shardTinyCLIP(t *testing.T, dir string) map[string]string {
	t.Helper()
	all, _, err := tensorio.ReadSafetensors(filepath.Join(tiny, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	shards := []map[string]tensorio.Tensor{{}, {}}
	weightMap := map[string]string{}
	for i, n := range names {
		k := i * 2 / len(names)
		shards[k][n] = all[n]
		weightMap[n] = fmt.Sprintf("model-%05d-of-00002.safetensors", k+1)
	}
	out := map[string]string{}
	for k, sh := range shards {
		b, err := tensorio.EncodeSafetensors(sh, map[string]string{"format": "pt"})
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("model-%05d-of-00002.safetensors", k+1)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = filepath.Join(dir, name)
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	idx := filepath.Join(dir, "model.safetensors.index.json")
	if err := os.WriteFile(idx, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out["model.safetensors.index.json"] = idx
	return out
}

// buildHub serves PyTorch repositories of testdata/tinyclip: org/clip
// (model.safetensors on main), org/clip-pr (main has pytorch_model.bin
// only, as openai/clip-vit-base-patch32; refs/pr/7 adds model.safetensors)
// and org/clip-sharded (two shards and their index).
func buildHub(t *testing.T) *hubtest.Server {
	st := map[string]string{"model.safetensors": filepath.Join(tiny, "model.safetensors")}
	binOnly := checkpointRepo(t, nil)
	return hubtest.New(t, map[string]*hubtest.Repo{
		"org/clip": {Commits: map[string]map[string]hubtest.File{commitA: checkpointRepo(t, st)}, Branches: map[string]string{"main": commitA}},
		"org/clip-pr": {Commits: map[string]map[string]hubtest.File{commitB: binOnly, commitC: checkpointRepo(t, st)},
			Branches: map[string]string{"main": commitB, "refs/pr/7": commitC}},
		"org/clip-sharded": {Commits: map[string]map[string]hubtest.File{commitA: checkpointRepo(t, shardTinyCLIP(t, t.TempDir()))},
			Branches: map[string]string{"main": commitA}},
	})
}

// logTo returns a logger writing text lines to buf.
func logTo(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

// sameOutputs runs the text and vision encoders of m and of the exported
// graphs of testdata/tinyclip on torch's golden inputs and requires every
// output within 1e-5 of the exported graphs' and of torch's.
func sameOutputs(t *testing.T, m *models.Model) {
	t.Helper()
	ref, err := models.Open(tiny, models.Options{DerivedCache: t.TempDir(), Variant: models.VariantPlain})
	if err != nil {
		t.Fatal(err)
	}
	golden := func(name string) tensorio.Tensor {
		x, err := tensorio.ReadNPY(filepath.Join(tiny, "golden", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	rows := func(x tensorio.Tensor) [][]int64 {
		v, err := x.Int64()
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]int64, x.Shape[0])
		for i := range out {
			out[i] = v[i*x.Shape[1] : (i+1)*x.Shape[1]]
		}
		return out
	}
	within := func(what string, got, want []float32) {
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
		if testing.Verbose() {
			t.Logf("%s: max abs difference %.2g", what, worst)
		}
		if worst > 1e-5 || math.IsNaN(worst) {
			t.Errorf("%s: differs by %g (tolerance 1e-5)", what, worst)
		}
	}
	ids, masks := rows(golden("text_input_ids")), rows(golden("text_attention_mask"))
	px := golden("vision_pixel_values")
	encode := func(m *models.Model) encoded { return encodeBoth(t, m, ids, masks, px) }
	got, exported := encode(m), encode(ref)
	within("text last_hidden_state against the exported graph", got.textStates, exported.textStates)
	within("text_embeds against the exported graph", got.textEmbeds, exported.textEmbeds)
	within("vision last_hidden_state against the exported graph", got.visionStates, exported.visionStates)
	within("image_embeds against the exported graph", got.imageEmbeds, exported.imageEmbeds)
	within("text last_hidden_state against torch", got.textStates, golden("text_last_hidden_state").Data.([]float32))
	within("text_embeds against torch", got.textEmbeds, golden("text_embeds").Data.([]float32))
	within("vision last_hidden_state against torch", got.visionStates, golden("vision_last_hidden_state").Data.([]float32))
	within("image_embeds against torch", got.imageEmbeds, golden("image_embeds").Data.([]float32))
}

// encoded is the text and vision encoders' outputs, batch rows in order.
type encoded struct{ textStates, textEmbeds, visionStates, imageEmbeds []float32 }

// encodeBoth runs m's text encoder on ids and masks and its vision encoder
// on the pixel values px [B, 3, H, W], one thread each.
func encodeBoth(t *testing.T, m *models.Model, ids, masks [][]int64, px tensorio.Tensor) encoded {
	t.Helper()
	te, err := clip.OpenText(m, clip.TextOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer te.Close()
	ve, err := clip.OpenVision(m, clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ve.Close()
	tx, err := te.Encode(context.Background(), ids, masks)
	if err != nil {
		t.Fatal(err)
	}
	vx, err := ve.Encode(context.Background(), px.Data.([]float32), px.Shape[0], px.Shape[2], px.Shape[3])
	if err != nil {
		t.Fatal(err)
	}
	var o encoded
	for _, e := range tx {
		o.textStates, o.textEmbeds = append(o.textStates, e.States...), append(o.textEmbeds, e.Embeds...)
	}
	for _, e := range vx {
		o.visionStates, o.imageEmbeds = append(o.visionStates, e.States...), append(o.imageEmbeds, e.Embeds...)
	}
	return o
}

// modTimes returns the modification times of the model's two graphs.
func modTimes(t *testing.T, m *models.Model) [2]time.Time {
	t.Helper()
	var out [2]time.Time
	for i, g := range []string{models.TextModelFile, models.VisionModelFile} {
		fi, err := os.Stat(m.Path(g))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = fi.ModTime()
	}
	return out
}

// TestOpenBuildsHubCheckpoint opens a hub repository that has
// model.safetensors and no ONNX graphs: Open fetches the configs,
// tokenizer and checkpoint (never the other frameworks' weights), builds
// the graphs once into the derived cache, whose outputs are those of the
// exported graphs; later opens, online and offline, reuse them without a
// request or a rebuild.
func TestOpenBuildsHubCheckpoint(t *testing.T) {
	orttest.Load(t)
	srv := buildHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	var logs bytes.Buffer
	opts.Logger = logTo(&logs)
	m, err := models.Open("org/clip", opts)
	if err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(opts.DerivedCache, "models--org--clip", commitA, "onnx")
	if !m.Built() || m.Path(models.TextModelFile) != filepath.Join(wantDir, "text_model.onnx") || m.Path(models.VisionModelFile) != filepath.Join(wantDir, "vision_model.onnx") {
		t.Fatalf("built %v, graphs %s and %s, want them in %s", m.Built(), m.Path(models.TextModelFile), m.Path(models.VisionModelFile), wantDir)
	}
	for _, want := range []string{"downloading the model's safetensors to build its ONNX graphs", "building the model's ONNX graphs", "built the model's ONNX graphs"} {
		if strings.Count(logs.String(), want) != 1 {
			t.Errorf("the log says %q %d times, want once:\n%s", want, strings.Count(logs.String(), want), logs.String())
		}
	}
	if got := fetchedOther(srv.Requests()); len(got) > 0 {
		t.Errorf("requested other frameworks' weights: %v", got)
	}
	var b []byte
	if b, err = os.ReadFile(m.Path(models.TextModelFile) + ".json"); err != nil || !strings.Contains(string(b), `"commit": "`+commitA+`"`) {
		t.Errorf("stamp %s: %v", b, err)
	}
	if s, fromWeights, err := m.LogitScale(); err != nil || !fromWeights || s < 2.659 || s > 2.6593 {
		t.Errorf("LogitScale %v %v %v", s, fromWeights, err)
	}
	sameOutputs(t, m)
	built := modTimes(t, m)

	// Opened again: no request, no rebuild.
	srv.Reset()
	logs.Reset()
	if m, err = models.Open("org/clip", opts); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("the second open made %d requests: %+v", len(r), r)
	}
	if !m.Built() || modTimes(t, m) != built || strings.Contains(logs.String(), "building") {
		t.Errorf("rebuilt on the second open (built %v):\n%s", m.Built(), logs.String())
	}
	// Offline: the same graphs.
	off := opts
	off.Offline = true
	if m, err = models.Open("org/clip@main", off); err != nil || !m.Built() || modTimes(t, m) != built {
		t.Fatalf("offline: %v", err)
	}
	// The graphs are stamped with the commit: a snapshot whose checkpoint
	// was deleted still serves them.
	snap := filepath.Join(cache, "models--org--clip", "snapshots", commitA)
	if err := os.Remove(filepath.Join(snap, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if m, err = models.Open("org/clip", off); err != nil || !m.Built() || modTimes(t, m) != built {
		t.Errorf("offline, without the checkpoint: %v", err)
	}
	// A repository not in the cache, offline: ErrOffline.
	if _, err := models.Open("org/clip-sharded", off); !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "not in the Hugging Face cache") {
		t.Errorf("offline, not cached: %v", err)
	}
	if r := srv.Requests(); len(r) != 0 {
		t.Errorf("offline opens made %d requests", len(r))
	}
}

// TestHubBuiltGraphs: the graphs Open built for a hub commit are found by
// repository and commit (as the cache listing looks for them), and only for
// that commit, with both graphs there.
func TestHubBuiltGraphs(t *testing.T) {
	orttest.Load(t)
	srv := buildHub(t)
	opts := hubOptions(t, srv, t.TempDir())
	if _, ok := models.HubBuiltGraphs("org/clip", commitA, opts); ok {
		t.Fatal("built graphs found before any build")
	}
	m, err := models.Open("org/clip", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := models.HubBuiltGraphs("org/clip", commitA, opts)
	if !ok || b.Text != m.Path(models.TextModelFile) || b.Vision != m.Path(models.VisionModelFile) || b.Commit != commitA ||
		!strings.HasSuffix(b.Source, filepath.Join("snapshots", commitA, "model.safetensors")) || b.Written == "" {
		t.Errorf("HubBuiltGraphs: %+v %v; the model serves %s and %s", b, ok, m.Path(models.TextModelFile), m.Path(models.VisionModelFile))
	}
	if _, ok := models.HubBuiltGraphs("org/clip", commitB, opts); ok {
		t.Error("built graphs found for a commit never built")
	}
	if _, ok := models.HubBuiltGraphs("org/clip-pr", commitA, opts); ok {
		t.Error("built graphs found for another repository")
	}
	// A stamp from another commit (a copied folder): not these graphs.
	stamp := b.Vision + ".json"
	raw, err := os.ReadFile(stamp)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(string(raw), `"commit": "`+commitA+`"`, `"commit": "`+commitB+`"`, 1)
	if other == string(raw) {
		t.Fatalf("stamp %s has no commit", raw)
	}
	if err := os.WriteFile(stamp, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := models.HubBuiltGraphs("org/clip", commitA, opts); ok {
		t.Error("found with the vision graph stamped with another commit")
	}
	// Open agrees: it rebuilds them, and then they are found again.
	var logs bytes.Buffer
	opts.Logger = logTo(&logs)
	if m, err = models.Open("org/clip", opts); err != nil || !m.Built() || !strings.Contains(logs.String(), "building the model's ONNX graphs") {
		t.Fatalf("reopened: %v\n%s", err, logs.String())
	}
	if _, ok := models.HubBuiltGraphs("org/clip", commitA, opts); !ok {
		t.Error("not found after the rebuild")
	}
}

// TestOpenBuildsPullRequestRevision: a repository whose main branch holds
// only pytorch_model.bin (as openai/clip-vit-base-patch32's does) and whose
// pull-request branch adds model.safetensors: @refs/pr/7 builds from it;
// main opens without graphs, says why when one is asked for, and never
// fetches the .bin.
func TestOpenBuildsPullRequestRevision(t *testing.T) {
	orttest.Load(t)
	srv := buildHub(t)
	cache := t.TempDir()
	opts := hubOptions(t, srv, cache)
	m, err := models.Open("org/clip-pr@refs/pr/7", opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Revision() != commitC || !m.Built() || !strings.Contains(m.Path(models.TextModelFile), filepath.Join("models--org--clip-pr", commitC)) {
		t.Fatalf("revision %s, built %v, %s", m.Revision(), m.Built(), m.Path(models.TextModelFile))
	}
	sameOutputs(t, m)
	off := opts
	off.Offline = true
	if m, err := models.Open("org/clip-pr@refs/pr/7", off); err != nil || !m.Built() || m.Revision() != commitC {
		t.Errorf("offline: %v", err)
	}

	main, err := models.Open("org/clip-pr", opts)
	if err != nil {
		t.Fatal(err)
	}
	if main.Built() || main.Has(models.TextModelFile) {
		t.Errorf("main has graphs: %s", main.Path(models.TextModelFile))
	}
	_, err = main.ReadFile(models.VisionModelFile)
	if err == nil || !strings.Contains(err.Error(), "no model.safetensors (nor model.safetensors.index.json) to build them from") {
		t.Errorf("asking main for a graph: %v", err)
	}
	if got := fetchedOther(srv.Requests()); len(got) > 0 {
		t.Errorf("requested other frameworks' weights: %v", got)
	}
}

// TestOpenBuildDownloadLimit: a checkpoint over Options.MaxBuildDownload is
// an error naming its size and the option, before any byte of it is
// downloaded; NoBuild opens the model without graphs and says so when one
// is asked for.
func TestOpenBuildDownloadLimit(t *testing.T) {
	srv := buildHub(t)
	opts := hubOptions(t, srv, t.TempDir())
	opts.MaxBuildDownload = 100_000
	_, err := models.Open("org/clip", opts)
	for _, want := range []string{"org/clip@" + commitA, "model.safetensors", "214.7 kB (214692 bytes)", "the limit of 100.0 kB", "Options.MaxBuildDownload"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if !errors.Is(err, models.ErrBuildDownload) {
		t.Errorf("error %v is not ErrBuildDownload", err)
	}
	for _, r := range srv.Requests() {
		if r.Method == "GET" && strings.Contains(r.Path, "blobs/") {
			t.Errorf("downloaded %s despite the limit", r.Path)
		}
	}
	// The limit counts what is to be downloaded: the index of shards is
	// fetched to learn the shards' sizes, the shards are not.
	srv.Reset()
	opts.MaxBuildDownload = 1000
	if _, err := models.Open("org/clip-sharded", opts); !errors.Is(err, models.ErrBuildDownload) || !strings.Contains(err.Error(), "model-00001-of-00002.safetensors, model-00002-of-00002.safetensors") {
		t.Errorf("sharded: %v", err)
	}

	opts.MaxBuildDownload = 0
	opts.NoBuild = true
	opts.MaxWeightsDownload = 1000 // the heads read by ranges: the checkpoint stays on the hub
	m, err := models.Open("org/clip", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadFile(models.TextModelFile); err == nil || !strings.Contains(err.Error(), "Options.NoBuild") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NoBuild: %v", err)
	}
	// Offline, the checkpoint not in the cache: the model opens (its
	// tokenizer and heads are there), and asking for a graph is an
	// ErrOffline error naming the missing file.
	opts.NoBuild, opts.Offline = false, true
	if m, err = models.Open("org/clip", opts); err != nil {
		t.Fatal(err)
	}
	_, err = m.ReadFile(models.VisionModelFile)
	if !errors.Is(err, hub.ErrOffline) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "model.safetensors is not in the cache") {
		t.Errorf("offline, no checkpoint: %v", err)
	}
	if s, fromWeights, err := m.LogitScale(); err != nil || !fromWeights || s < 2.659 {
		t.Errorf("offline, heads read by ranges: %v %v %v", s, fromWeights, err)
	}
}

// TestOpenBuildsShardedCheckpoint: a checkpoint split into shards, on the
// hub and in a folder, builds the same graphs, and its projection heads
// are copied out of the shards for the joint space.
func TestOpenBuildsShardedCheckpoint(t *testing.T) {
	orttest.Load(t)
	srv := buildHub(t)
	opts := hubOptions(t, srv, t.TempDir())
	m, err := models.Open("org/clip-sharded", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Built() {
		t.Fatal("not built")
	}
	sameOutputs(t, m)
	check := func(m *models.Model) {
		t.Helper()
		if s, fromWeights, err := m.LogitScale(); err != nil || !fromWeights || s < 2.659 || s > 2.6593 {
			t.Errorf("LogitScale %v %v %v", s, fromWeights, err)
		}
		w, err := m.ReadWeights("text_projection.weight")
		if err != nil || !slices.Equal(w["text_projection.weight"].Shape, []int{16, 32}) {
			t.Errorf("text_projection.weight: %v", err)
		}
	}
	check(m)
	// Reopened offline: the heads are found beside the graphs.
	off := opts
	off.Offline = true
	if m, err = models.Open("org/clip-sharded", off); err != nil || !m.Built() {
		t.Fatalf("offline: %v", err)
	}
	check(m)
	if got := fetchedOther(srv.Requests()); len(got) > 0 {
		t.Errorf("requested other frameworks' weights: %v", got)
	}

	dir := tinyWithoutGraphs(t)
	os.Remove(filepath.Join(dir, "model.safetensors"))
	shardTinyCLIP(t, dir)
	local := models.Options{DerivedCache: t.TempDir()}
	if m, err = models.Open(dir, local); err != nil || !m.Built() {
		t.Fatalf("folder: built %v, %v", err == nil && m.Built(), err)
	}
	check(m)
	if m, err = models.Open(dir, local); err != nil || !m.Built() {
		t.Fatalf("folder reopened: %v", err)
	}
	check(m)
}

// TestOpenBuildsFolder: a folder with config.json and model.safetensors
// and no onnx/ is built on its first open, reused on the next, and built
// again once its checkpoint changes; its own files stay as they were.
func TestOpenBuildsFolder(t *testing.T) {
	orttest.Load(t)
	dir := tinyWithoutGraphs(t)
	var logs bytes.Buffer
	opts := models.Options{DerivedCache: t.TempDir(), Logger: logTo(&logs)}
	m, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Built() || !strings.HasPrefix(m.Path(models.TextModelFile), opts.DerivedCache) || !strings.Contains(logs.String(), "built the model's ONNX graphs") {
		t.Fatalf("built %v, %s\n%s", m.Built(), m.Path(models.TextModelFile), logs.String())
	}
	sameOutputs(t, m)
	built := modTimes(t, m)
	logs.Reset()
	if m, err = models.Open(dir, opts); err != nil || modTimes(t, m) != built || strings.Contains(logs.String(), "building") {
		t.Fatalf("reopened: %v\n%s", err, logs.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 7 {
		t.Errorf("the model's folder changed: %d entries", len(ents))
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "model.safetensors"), later, later); err != nil {
		t.Fatal(err)
	}
	if m, err = models.Open(dir, opts); err != nil || !m.Built() || !strings.Contains(logs.String(), "building") {
		t.Fatalf("a changed checkpoint: %v\n%s", err, logs.String())
	}
	// A checkpoint of a family the graph builder may not write (SigLIP):
	// built when CanBuild says it can be, else opened without graphs, and
	// asking for one says why.
	sig := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "special_tokens_map.json", "tokenizer_config.json", "spiece.model", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(tinySiglip, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(sig, f), b, 0o644)
	}
	if m, err = models.Open(sig, opts); err != nil {
		t.Fatal(err)
	}
	if !models.BuildsFamily(models.CLIP) || models.BuildsFamily(models.SigLIP) != (m.CanBuild() == nil) {
		t.Errorf("BuildsFamily: CLIP %v, SigLIP %v; the SigLIP checkpoint's CanBuild: %v", models.BuildsFamily(models.CLIP), models.BuildsFamily(models.SigLIP), m.CanBuild())
	}
	if why := m.CanBuild(); why != nil {
		_, err := m.ReadFile(models.TextModelFile)
		if m.Built() || err == nil || !strings.Contains(err.Error(), why.Error()) {
			t.Errorf("SigLIP (cannot build: %v): built %v, %v", why, m.Built(), err)
		}
	} else if !m.Built() {
		t.Errorf("SigLIP: CanBuild says yes, but not built")
	}
}

// TestOpenBuildsOnce: opens of one folder at once build its graphs once;
// the others wait and use them.
func TestOpenBuildsOnce(t *testing.T) {
	orttest.Load(t)
	dir := tinyWithoutGraphs(t)
	var logs bytes.Buffer
	opts := models.Options{DerivedCache: t.TempDir(), Logger: logTo(&logs)}
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			m, err := models.Open(dir, opts)
			if err == nil && !m.Built() {
				err = errors.New("not built")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if b := strings.Count(logs.String(), "building the model's ONNX graphs"); b != 1 {
		t.Errorf("built %d times:\n%s", b, logs.String())
	}
}
