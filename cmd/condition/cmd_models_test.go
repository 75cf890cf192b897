package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub/hubtest"
)

const tinyDir = "../../testdata/tinyclip"

func modelsRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = mainContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func fakeModelHub(t *testing.T) (srv *hubtest.Server, cache string) {
	t.Helper()
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := func(text, vision string) map[string]hubtest.File {
		f := map[string]hubtest.File{}
		for _, n := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"} {
			f[n] = hubtest.File{Data: read(filepath.Join(tinyDir, n))}
		}
		f["onnx/text_model.onnx"] = hubtest.File{Data: read(text), LFS: true}
		f["onnx/vision_model.onnx"] = hubtest.File{Data: read(vision), LFS: true}
		return f
	}
	full := files(filepath.Join(tinyDir, "onnx", "text_model.onnx"), filepath.Join(tinyDir, "onnx", "vision_model.onnx"))
	full["model.safetensors"] = hubtest.File{Data: read(filepath.Join(tinyDir, "model.safetensors")), LFS: true}
	pooled := files("../../testdata/hub/pooled_only/text_model.onnx", filepath.Join(tinyDir, "onnx", "pooled_only", "vision_model.onnx"))
	ext := filepath.Join("..", "..", "internal", "onnxgraph", "testdata", "external")
	external := files(filepath.Join(ext, "text_model.onnx"), filepath.Join(ext, "vision_model.onnx"))
	external["onnx/text_model.onnx.data"] = hubtest.File{Data: read(filepath.Join(ext, "text_model.onnx.data")), LFS: true}
	external["onnx/vision_model.onnx_data"] = hubtest.File{Data: read(filepath.Join(ext, "vision_model.onnx_data")), LFS: true}
	commit := strings.Repeat("c0", 20)
	srv = hubtest.New(t, map[string]*hubtest.Repo{
		"org/tinyclip": {Commits: map[string]map[string]hubtest.File{commit: full}, Branches: map[string]string{"main": commit}},
		"org/external": {Commits: map[string]map[string]hubtest.File{commit: external}, Branches: map[string]string{"main": commit}},
		"org/pooled":   {Commits: map[string]map[string]hubtest.File{commit: pooled}, Branches: map[string]string{"main": commit}},
	})
	cache = t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL())
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_TOKEN", "")
	// Derived files (heads read by ranges, exposed graphs) go to the user
	// cache folder; the models commands load no ONNX Runtime from it.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	return srv, cache
}

func TestModelsFetchInfoVerify(t *testing.T) {
	_, cache := fakeModelHub(t)
	code, out, errs := modelsRun(t, "models", "fetch", "org/tinyclip")
	if code != 0 {
		t.Fatalf("fetch: exit %d: %s", code, errs)
	}
	// The progress bar went to stderr, the model's description to stdout.
	if !strings.Contains(errs, "onnx/vision_model.onnx [") || !strings.Contains(errs, "100%") {
		t.Errorf("no progress bar on stderr: %q", errs)
	}
	if !strings.Contains(out, "repo:     org/tinyclip @ "+strings.Repeat("c0", 20)) || !strings.Contains(out, "logit_scale") {
		t.Errorf("fetch output: %s", out)
	}
	code, out, errs = modelsRun(t, "models", "list", "--json")
	var list struct {
		Cache  string `json:"cache"`
		Models []struct {
			Repo   string          `json:"repo"`
			Usable map[string]bool `json:"usable"`
		} `json:"models"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Cache != cache || len(list.Models) != 1 ||
		list.Models[0].Repo != "org/tinyclip" || !list.Models[0].Usable[strings.Repeat("c0", 20)] {
		t.Errorf("list: exit %d %s %s", code, out, errs)
	}
	// info reads the cache only: with the network gone it still works.
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	code, out, errs = modelsRun(t, "models", "info", "org/tinyclip", "--json")
	var info struct {
		Revision string `json:"revision"`
		Graphs   map[string]struct {
			Outputs    []string `json:"outputs"`
			PooledOnly bool     `json:"pooled_only"`
		} `json:"graphs"`
		Heads []string `json:"heads"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Revision != strings.Repeat("c0", 20) ||
		len(info.Graphs) != 2 || info.Graphs["onnx/text_model.onnx"].PooledOnly || len(info.Heads) != 5 {
		t.Errorf("info: exit %d %s %s", code, out, errs)
	}
	code, out, errs = modelsRun(t, "models", "verify", "org/tinyclip")
	if code != 0 || strings.Count(out, " ok") < 8 {
		t.Errorf("verify: exit %d\n%s%s", code, out, errs)
	}
	// A flipped byte in a blob: verify fails with exit 1 naming the file.
	snap := filepath.Join(cache, "models--org--tinyclip", "snapshots", strings.Repeat("c0", 20))
	blob, _ := filepath.EvalSymlinks(filepath.Join(snap, "onnx", "vision_model.onnx"))
	b, _ := os.ReadFile(blob)
	b[100] ^= 0xff
	os.WriteFile(blob, b, 0o644)
	code, out, _ = modelsRun(t, "models", "verify", "org/tinyclip")
	if code != 1 || !strings.Contains(out, "onnx/vision_model.onnx") || !strings.Contains(out, "FAILED") {
		t.Errorf("verify after corruption: exit %d\n%s", code, out)
	}
}

func TestModelsExpose(t *testing.T) {
	fakeModelHub(t)
	code, out, errs := modelsRun(t, "models", "expose", "org/pooled")
	if code != 0 || strings.Count(out, "wrote ") != 2 || !strings.Contains(out, "text_model.exposed.onnx") {
		t.Fatalf("expose: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = modelsRun(t, "models", "info", "org/pooled")
	if code != 0 || strings.Contains(out, "pooled embeddings only") || !strings.Contains(out, "vision_model.exposed.onnx") {
		t.Errorf("info after expose: exit %d\n%s%s", code, out, errs)
	}
}

func TestModelsErrors(t *testing.T) {
	fakeModelHub(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"models"}, 2, "subcommand"},
		{[]string{"models", "nope"}, 2, "unknown subcommand"},
		{[]string{"models", "fetch"}, 2, "one model reference"},
		{[]string{"models", "fetch", "org/missing"}, 1, "HF_TOKEN"},
		{[]string{"models", "fetch", "org/tinyclip", "--variant", "fp16"}, 1, "no fp16 variant"},
		{[]string{"models", "info", "org/tinyclip"}, 1, "reads only the Hugging Face cache"},
		{[]string{"models", "verify", "org/tinyclip"}, 1, "models fetch org/tinyclip"},
	} {
		code, _, errs := modelsRun(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	code, out, _ := modelsRun(t, "models", "list", "--known")
	if code != 0 || !strings.Contains(out, "Xenova/clip-vit-base-patch32") {
		t.Errorf("list --known: %d %s", code, out)
	}
}

// TestKnownModelsTable: models list --known prints a table, one line for
// each known model (its reference, family, architecture, where its graphs
// come from, the reference to use) and one line pointing at --verbose: no
// more lines than the models and three; --verbose adds each model's details.
func TestKnownModelsTable(t *testing.T) {
	code, out, errs := modelsRun(t, "models", "list", "--known")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "MODEL FAMILY ARCHITECTURE GRAPHS USE" {
		t.Fatalf("header %q", lines[0])
	}
	known := models.Known()
	if len(lines) > len(known)+3 {
		t.Errorf("%d lines for %d models:\n%s", len(lines), len(known), out)
	}
	if strings.Contains(out, "checked:") || strings.Contains(out, "heads:") {
		t.Errorf("the table holds the notes:\n%s", out)
	}
	for i, k := range known {
		row := lines[1+i]
		graphs := "ONNX export"
		if k.Build {
			graphs = "built on first use"
			var f models.Family
			for _, g := range []models.Family{models.CLIP, models.MetaCLIP2, models.SigLIP, models.SigLIP2, models.Tipsv2} {
				if g.String() == k.Family {
					f = g
				}
			}
			if !models.BuildsFamily(f) {
				graphs = "to be built (not by this version)"
			}
		}
		use := "--model " + k.Use
		arch := strings.Fields(k.Arch)[0] // "ViT-B/32", "SigLIP", "MetaCLIP", "TIPSv2", "PE-Core"
		if !strings.HasPrefix(row, k.Ref+" ") || !strings.Contains(row, "  "+k.Family+" ") || !strings.Contains(row, "  "+arch) ||
			!strings.Contains(row, "  "+graphs+"  ") || !strings.HasSuffix(row, use) {
			t.Errorf("row %d: %q; want %s, %s, %s…, %s, %s", i, row, k.Ref, k.Family, arch, graphs, use)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "--verbose") {
		t.Errorf("the last line does not point at --verbose: %q", lines[len(lines)-1])
	}
	for _, want := range []string{"openai/clip-vit-large-patch14 CLIP ViT-L/14 at 224 built on first use", "facebook/metaclip-2-worldwide-huge-quickgelu MetaCLIP 2 MetaCLIP 2 worldwide ViT-H/14 at 224 px built on first use",
		"timm/PE-Core-B-16 CLIP PE-Core B/16 at 224 px built on first use --model timm/PE-Core-B-16"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(strings.Join(strings.Fields(l), " "), want)
		}
		if !found {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}
	if code, _, errs := modelsRun(t, "models", "list", "--verbose"); code != exitUsage || !strings.Contains(errs, "--known") {
		t.Errorf("--verbose without --known: exit %d\n%s", code, errs)
	}
	code, verbose, errs := modelsRun(t, "models", "list", "--known", "--verbose")
	if code != 0 || !strings.HasPrefix(verbose, strings.Join(lines[:1+len(known)], "\n")+"\n") {
		t.Fatalf("--verbose: exit %d, not the same table first: %s\n%s", code, errs, verbose)
	}
	if n := strings.Count(verbose, "\n  family:   "); n != len(known) {
		t.Errorf("--verbose: %d details with a family, want %d", n, len(known))
	}
	for _, k := range known {
		if !strings.Contains(verbose, "\n  checked:  "+k.Source+"\n") {
			t.Errorf("--verbose: no notes of %s", k.Ref)
		}
	}
}

// TestKnownModels: models list --known --json lists models.Known() (whose
// entries models' own test checks).
func TestKnownModels(t *testing.T) {
	code, out, errs := modelsRun(t, "models", "list", "--known", "--json")
	var list []models.KnownModel
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != len(models.Known()) || list[1].Use == "" {
		t.Errorf("list --known --json: exit %d %s %s", code, out, errs)
	}
}

// TestModelsInfoHeads: info lists the heads with their shapes (read from one
// parse of the safetensors header), as the reference checkpoint has them.
func TestModelsInfoHeads(t *testing.T) {
	code, out, errs := modelsRun(t, "models", "info", tinyDir, "--json")
	var info struct {
		Heads      []string         `json:"heads"`
		HeadShapes map[string][]int `json:"head_shapes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
		t.Fatalf("info: exit %d %s %s", code, out, errs)
	}
	// Shapes in testdata/tinyclip/model.safetensors's header as Python's json
	// module reads it (projection_dim 16, text width 32, vision width 24;
	// logit_scale stored as [1]).
	want := map[string][]int{"text_projection.weight": {16, 32}, "visual_projection.weight": {16, 24},
		"vision_model.post_layernorm.weight": {24}, "vision_model.post_layernorm.bias": {24}, "logit_scale": {1}}
	if len(info.Heads) != len(want) {
		t.Errorf("heads %v", info.Heads)
	}
	for n, s := range want {
		if fmt.Sprint(info.HeadShapes[n]) != fmt.Sprint(s) {
			t.Errorf("%s: shape %v, want %v", n, info.HeadShapes[n], s)
		}
	}
	code, out, _ = modelsRun(t, "models", "info", tinyDir)
	if code != 0 || !strings.Contains(out, "text_projection.weight [16 32]") {
		t.Errorf("info text: %s", out)
	}
}

// TestModelsFetchExternalData: fetching a model whose graphs keep their
// weights in side files brings those files into the snapshot, and info
// names them.
func TestModelsFetchExternalData(t *testing.T) {
	_, cache := fakeModelHub(t)
	code, out, errs := modelsRun(t, "models", "fetch", "org/external", "--json")
	if code != 0 {
		t.Fatalf("fetch: exit %d %s", code, errs)
	}
	var info struct {
		Graphs map[string]struct {
			External []string `json:"external_data"`
		} `json:"graphs"`
	}
	if json.Unmarshal([]byte(out), &info) != nil || strings.Join(info.Graphs["onnx/vision_model.onnx"].External, ",") != "vision_model.onnx_data" ||
		strings.Join(info.Graphs["onnx/text_model.onnx"].External, ",") != "text_model.onnx.data" {
		t.Errorf("fetch: %s", out)
	}
	snap := filepath.Join(cache, "models--org--external", "snapshots", strings.Repeat("c0", 20), "onnx")
	for _, f := range []string{"vision_model.onnx_data", "text_model.onnx.data"} {
		if _, err := os.Stat(filepath.Join(snap, f)); err != nil {
			t.Errorf("%s not beside its graph: %v", f, err)
		}
	}
	code, out, errs = modelsRun(t, "models", "verify", "org/external")
	if code != 0 || !strings.Contains(out, "onnx/vision_model.onnx_data") {
		t.Errorf("verify: exit %d\n%s%s", code, out, errs)
	}
}
