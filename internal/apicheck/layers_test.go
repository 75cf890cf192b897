package apicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the module path; the rules name packages relative to it.
const module = "github.com/conditionhq/condition"

// layer is one row of the design's import rules: the packages From names
// may import, of the module's own, only those May names. A pattern is a
// package path relative to the module, or such a path followed by "/..."
// for it and every package below it. A package is ruled by the layer whose
// From pattern matches it most closely (the longest one).
type layer struct {
	From string
	May  []string
	Why  string
}

// below are the packages every layer above the leaves may build on: the
// tokenizers, the image code, the kernels, the tensor files, the models,
// and the ground floor's plumbing.
var below = []string{"text/...", "vision/...", "xattn/...", "tensorio/...", "models/...", "internal/..."}

// layers is the design's table of import directions, as data: cmd →
// pipeline/serve, pipeline/batch → pipeline/index → pipeline → models,
// text, vision, xattn, tensorio → internal (the ground floor, which imports
// nothing above it). Nothing imports cmd or tools.
var layers = []layer{
	{"internal/...", []string{"internal/...", "text/...", "vision/...", "tensorio/..."},
		"internal/ is the ground floor: it imports only text, vision, tensorio and itself"},
	{"tensorio/...", []string{"tensorio/..."}, "tensorio is a leaf"},
	{"text/...", []string{"text/...", "tensorio/..."}, "text imports no model, image, kernel or engine package"},
	{"vision/...", []string{"vision/...", "tensorio/..."}, "vision imports no model, text, kernel or engine package"},
	{"xattn/...", []string{"xattn/...", "tensorio/...", "internal/..."}, "xattn imports no model, text, image or engine package"},
	{"models/...", []string{"models/...", "tensorio/...", "internal/..."}, "models sit below the engine and import no text or vision package"},
	{"pipeline", append([]string{"pipeline", "pipeline/internal/..."}, below...), "the engine imports neither the job, the index reader nor the server"},
	{"pipeline/internal/...", append([]string{"pipeline", "pipeline/internal/..."}, below...), "what the engine's users share sits below them"},
	{"pipeline/index/...", append([]string{"pipeline", "pipeline/index/...", "pipeline/internal/..."}, below...), "the index reader imports neither the job nor the server"},
	{"pipeline/batch/...", append([]string{"pipeline", "pipeline/index/...", "pipeline/batch/...", "pipeline/internal/..."}, below...), "the job does not import the server"},
	{"pipeline/serve/...", append([]string{"pipeline", "pipeline/index/...", "pipeline/serve/...", "pipeline/internal/..."}, below...), "the server stands on the engine and the index reader, not on the job"},
	{"cmd/...", append([]string{"pipeline/...", "cmd/internal/..."}, below...), "a program imports no other program"},
	{"cmd/condition", []string{"pipeline/...", "cmd/internal/...", "text/...", "vision", "vision/video/...", "xattn", "tensorio/...", "models/...", "internal/objstore", "internal/cputime", "internal/scenes", "internal/vecscenes", "internal/orttest", "internal/s3test", "internal/slurmtest", "internal/weaviatetest"},
		"the CLI parses flags into the library's types: no ONNX Runtime, graph or kernel plumbing"},
	{"cmd/condition-bench/...", append([]string{"pipeline/...", "cmd/internal/...", "cmd/condition-bench/..."}, below...), "the benchmark program may reach the ground floor, not another program"},
	{"cmd/internal/...", append([]string{"pipeline/...", "cmd/internal/..."}, below...), "what drives the engine from above imports no program"},
	{"tools/...", append([]string{"pipeline/...", "tools/..."}, below...), "development programs import no shipped program"},
}

// notMay are, by a layer's From, packages its May matches that its own code
// (not its tests) must still not import: the engine, what it shares, the
// index reader and the server never import the object stores' clients
// (stores are opened by the job and the programs, and injected).
var notMay = map[string][]string{
	"pipeline":              {"internal/objstore"},
	"pipeline/internal/...": {"internal/objstore"},
	"pipeline/index/...":    {"internal/objstore"},
	"pipeline/serve/...":    {"internal/objstore"},
}

const whyNotStores = "object stores are opened by the job and the programs, and injected"

// testKits are the packages that start real servers and load the runtime
// for tests; only tests import them, besides each other (enginetest loads
// ONNX Runtime with orttest) and the development programs that build the
// servers once per machine (tools/...).
var testKits = []string{"internal/orttest", "internal/s3test", "internal/slurmtest", "internal/weaviatetest", "pipeline/internal/enginetest"}

// testsMay are what a layer's tests may import besides its May, by the
// layer's From.
var testsMay = map[string][]string{
	"cmd/condition":      {"internal/ort"},   // they lay out an installed library as the installer does
	"pipeline/index/...": {"pipeline/batch"}, // they make the index they read with the job
	"pipeline/serve/...": {"pipeline/batch"}, // they make the index they search with the job
}

// pkg is what the rules read of a package: its path relative to the
// module, its name, and the module's packages it imports (tests included).
type pkg struct {
	Path        string
	Name        string
	Imports     []string
	TestImports []string
}

// match reports whether path is pattern or, for "x/...", x or below it.
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// ruleFor returns the layer ruling path: the one whose From matches it
// with the longest pattern; nil when none does.
func ruleFor(rules []layer, path string) *layer {
	var best *layer
	for i := range rules {
		r := &rules[i]
		if match(r.From, path) && (best == nil || len(r.From) > len(best.From)) {
			best = r
		}
	}
	return best
}

// violations returns one line per import that breaks the rules, naming
// the importing package, the imported one and the rule; and one per main
// package under internal/ or package no rule covers.
func violations(rules []layer, pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if p.Name == "main" && match("internal/...", p.Path) {
			out = append(out, fmt.Sprintf("%s is a main package under internal/: programs live in cmd/ (shipped) or tools/ (development)", p.Path))
		}
		r := ruleFor(rules, p.Path)
		if r == nil {
			out = append(out, fmt.Sprintf("%s: no import rule covers it; add one to layers", p.Path))
			continue
		}
		check := func(imports, may []string, where string) {
			for _, imp := range imports {
				if !slices.ContainsFunc(may, func(m string) bool { return match(m, imp) }) {
					out = append(out, fmt.Sprintf("%s imports %s%s, against the rule for %s: %s", p.Path, imp, where, r.From, r.Why))
				}
			}
		}
		check(p.Imports, r.May, "")
		check(p.TestImports, slices.Concat(r.May, testsMay[r.From]), " in its tests")
		for _, imp := range p.Imports {
			if slices.ContainsFunc(notMay[r.From], func(m string) bool { return match(m, imp) }) {
				out = append(out, fmt.Sprintf("%s imports %s, against the rule for %s: %s", p.Path, imp, r.From, whyNotStores))
			}
			kitUser := slices.Contains(testKits, p.Path) || match("tools/...", p.Path)
			if slices.Contains(testKits, imp) && !kitUser {
				out = append(out, fmt.Sprintf("%s imports the test kit %s outside its tests: test kits are for tests (and tools/)", p.Path, imp))
			}
		}
	}
	return out
}

// modulePackages lists the module's packages with go list, each with the
// module's packages it and its tests import.
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command(goCommand(t), "list", "-json=ImportPath,Name,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var l struct {
			ImportPath, Name                   string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list ./...: %v", err)
		}
		p := pkg{Path: relative(l.ImportPath), Name: l.Name}
		p.Imports = own(l.Imports, p.Path)
		p.TestImports = own(slices.Concat(l.TestImports, l.XTestImports), p.Path)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// own returns the module's packages among imports, relative to the
// module, once each, without self.
func own(imports []string, self string) []string {
	var out []string
	for _, imp := range imports {
		if r := relative(imp); r != imp && r != self && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// relative returns path relative to the module; path itself when it is
// not the module's.
func relative(path string) string {
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

// TestLayers checks every import of the module's packages and their tests
// against the design's directions.
func TestLayers(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 30 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	for _, v := range violations(layers, pkgs) {
		t.Error(v)
	}
}

// TestLayersCatch plants imports that run back up, a main package in the
// ground floor and a package no rule covers, and expects each reported
// with the importing package, the imported one and the rule.
func TestLayersCatch(t *testing.T) {
	planted := []pkg{
		{Path: "internal/ort", Name: "ort", Imports: []string{"internal/onnxgraph", "pipeline"}},
		{Path: "models", Name: "models", Imports: []string{"internal/ort", "vision"}},
		{Path: "pipeline", Name: "pipeline", Imports: []string{"models", "pipeline/batch"}},
		{Path: "pipeline/serve", Name: "serve", Imports: []string{"pipeline/index", "pipeline/batch"}},
		{Path: "cmd/condition", Name: "main", Imports: []string{"pipeline", "internal/ort"}, TestImports: []string{"internal/ort", "internal/graphbuild"}},
		{Path: "internal/scenes/cmd/gen", Name: "main"},
		{Path: "xattn", Name: "xattn", Imports: []string{"cmd/internal/eval"}},
		{Path: "elsewhere", Name: "elsewhere"},
		{Path: "pipeline/serve", Name: "serve", Imports: []string{"internal/objstore"}, TestImports: []string{"internal/objstore", "internal/s3test"}},
		{Path: "pipeline/batch", Name: "batch", Imports: []string{"internal/objstore", "internal/s3test"}},
		{Path: "tools/getweed", Name: "main", Imports: []string{"internal/s3test"}},
	}
	want := []string{
		"internal/ort imports pipeline, against the rule for internal/...: internal/ is the ground floor: it imports only text, vision, tensorio and itself",
		"models imports vision, against the rule for models/...: models sit below the engine and import no text or vision package",
		"pipeline imports pipeline/batch, against the rule for pipeline: the engine imports neither the job, the index reader nor the server",
		"pipeline/serve imports pipeline/batch, against the rule for pipeline/serve/...: the server stands on the engine and the index reader, not on the job",
		"cmd/condition imports internal/ort, against the rule for cmd/condition: the CLI parses flags into the library's types: no ONNX Runtime, graph or kernel plumbing",
		"cmd/condition imports internal/graphbuild in its tests, against the rule for cmd/condition: the CLI parses flags into the library's types: no ONNX Runtime, graph or kernel plumbing",
		"internal/scenes/cmd/gen is a main package under internal/: programs live in cmd/ (shipped) or tools/ (development)",
		"xattn imports cmd/internal/eval, against the rule for xattn/...: xattn imports no model, text, image or engine package",
		"elsewhere: no import rule covers it; add one to layers",
		"pipeline/serve imports internal/objstore, against the rule for pipeline/serve/...: object stores are opened by the job and the programs, and injected",
		"pipeline/batch imports the test kit internal/s3test outside its tests: test kits are for tests (and tools/)",
	}
	got := violations(layers, planted)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
