package ort_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

func TestLoad(t *testing.T) {
	rt := orttest.Load(t)
	v, err := ort.ParseVersion(rt.Version)
	if err != nil {
		t.Fatal(err)
	}
	min, _ := ort.ParseVersion(ort.MinVersion)
	if ort.CompareVersions(v, min) < 0 {
		t.Fatalf("loaded version %s < %s", rt.Version, ort.MinVersion)
	}
	if len(rt.Tried) == 0 || rt.Tried[len(rt.Tried)-1].Result != "loaded" || rt.Tried[len(rt.Tried)-1].Path != rt.Path {
		t.Fatalf("Tried does not end with the loaded library: %+v", rt.Tried)
	}
	// Loading again returns the same library; asking for another one is an error.
	rt2, err := ort.Load(ort.LoadOptions{})
	if err != nil || rt2.Path != rt.Path {
		t.Fatalf("second Load: %v, %+v", err, rt2)
	}
	if _, err := ort.Load(ort.LoadOptions{LibPath: "/some/other/libonnxruntime.so"}); err == nil || !strings.Contains(err.Error(), "already loaded") {
		t.Fatalf("Load of another library: got %v, want an 'already loaded' error", err)
	}
	// Probe reads the version without initialising anything.
	pv, err := ort.Probe(rt.Path)
	if err != nil || pv != rt.Version {
		t.Fatalf("Probe(%s) = %q, %v; want %q", rt.Path, pv, err, rt.Version)
	}
}

func TestProbeErrors(t *testing.T) {
	if _, err := ort.Probe(filepath.Join(t.TempDir(), "missing.so")); err == nil {
		t.Fatal("Probe of a missing file: no error")
	}
	bad := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(bad, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ort.Probe(bad); err == nil {
		t.Fatal("Probe of a text file: no error")
	}
}

func TestVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.24.0", "1.24.0", 0},
		{"1.30.0", "1.24.0", 1},
		{"1.9.0", "1.24.0", -1},
		{"1.24", "1.24.0", 0},
		{"1.24.1-dev", "1.24.0", 1},
		{"v2.0.0", "1.99.99", 1},
	} {
		a, err := ort.ParseVersion(c.a)
		if err != nil {
			t.Fatalf("ParseVersion(%q): %v", c.a, err)
		}
		b, _ := ort.ParseVersion(c.b)
		if got := ort.CompareVersions(a, b); got != c.want {
			t.Errorf("CompareVersions(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	for _, bad := range []string{"", "1", "x.y.z", "1.2.3.4", "1.-2.0"} {
		if _, err := ort.ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): no error", bad)
		}
	}
}

func TestCandidatesOrder(t *testing.T) {
	cache := t.TempDir()
	for _, v := range []string{"1.25.0", "1.30.0", "1.31.2", ".staging-1.30.0-x", "junk"} {
		if err := os.MkdirAll(filepath.Join(cache, v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(ort.EnvLibraryPath, "")
	cs := ort.Candidates(ort.LoadOptions{CacheDir: cache})
	var order []string
	var cached []string
	for _, c := range cs {
		if len(order) == 0 || order[len(order)-1] != c.Source {
			order = append(order, c.Source)
		}
		if c.Source == ort.SourceCache {
			cached = append(cached, filepath.Base(filepath.Dir(c.Path)))
		}
	}
	want := []string{ort.SourceExecutable, ort.SourceCache, ort.SourceSystem, ort.SourceSoname}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("search order %v, want %v", order, want)
	}
	if got := strings.Join(cached, ","); got != ort.InstallVersion+",1.31.2,1.25.0" {
		t.Errorf("cache versions searched %s, want %s,1.31.2,1.25.0", got, ort.InstallVersion)
	}
	// The flag, then the environment variable, each replace the search.
	if cs := ort.Candidates(ort.LoadOptions{LibPath: "/x/lib.so"}); len(cs) != 1 || cs[0].Source != ort.SourceFlag {
		t.Errorf("with LibPath: %+v", cs)
	}
	t.Setenv(ort.EnvLibraryPath, "/y/lib.so")
	if cs := ort.Candidates(ort.LoadOptions{CacheDir: cache}); len(cs) != 1 || cs[0].Source != ort.SourceEnv || cs[0].Path != "/y/lib.so" {
		t.Errorf("with %s: %+v", ort.EnvLibraryPath, cs)
	}
	if cs := ort.Candidates(ort.LoadOptions{LibPath: "/x/lib.so"}); cs[0].Source != ort.SourceFlag {
		t.Errorf("the flag must win over %s: %+v", ort.EnvLibraryPath, cs)
	}
}

// TestNotFound runs Load in a child process (ONNX Runtime loads once per
// process) with nothing to find, and checks the error lists every place.
func TestNotFound(t *testing.T) {
	if os.Getenv("ORT_TEST_CHILD") == "notfound" {
		rt, err := ort.Load(ort.LoadOptions{CacheDir: os.Getenv("ORT_TEST_CACHE")})
		if err == nil {
			io.WriteString(os.Stdout, "FOUND<<"+rt.Path+">>")
			return
		}
		var nf *ort.NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("Load: %v, want a NotFoundError", err)
		}
		io.WriteString(os.Stdout, "ERR<<"+err.Error()+">>")
		return
	}
	if os.Getenv("ORT_TEST_CHILD") == "badenv" {
		_, err := ort.Load(ort.LoadOptions{})
		if err == nil {
			t.Fatal("Load with a bad env path: no error")
		}
		io.WriteString(os.Stdout, "ERR<<"+err.Error()+">>")
		return
	}
	cache := t.TempDir()
	run := func(mode string, env ...string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNotFound$", "-test.v")
		cmd.Env = append(os.Environ(), "ORT_TEST_CHILD="+mode, "ORT_TEST_CACHE="+cache,
			"LD_LIBRARY_PATH=", "XDG_CACHE_HOME="+t.TempDir(), ort.EnvLibraryPath+"=")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %s: %v\n%s", mode, err, out)
		}
		s := string(out)
		if i, j := strings.Index(s, "FOUND<<"), strings.Index(s, ">>"); i >= 0 && j > i {
			t.Skipf("with nothing installed for the test, the search still finds %s (system-wide install), so the not-found path cannot be reached here", s[i+7:j])
		}
		i, j := strings.Index(s, "ERR<<"), strings.Index(s, ">>")
		if i < 0 || j < i {
			t.Fatalf("child %s printed no error:\n%s", mode, s)
		}
		return s[i+5 : j]
	}
	msg := run("notfound")
	for _, want := range []string{
		filepath.Join(cache, ort.InstallVersion, ort.InstalledLibName()),
		"executable", "system", "soname", "not found",
		"install.Runtime, package models/install", ort.EnvLibraryPath,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("not-found error lacks %q:\n%s", want, msg)
		}
	}
	msg = run("badenv", ort.EnvLibraryPath+"=/nonexistent/libonnxruntime.so.1")
	if !strings.Contains(msg, "/nonexistent/libonnxruntime.so.1: not found") || strings.Contains(msg, "soname") {
		t.Errorf("a bad %s must be the only candidate tried:\n%s", ort.EnvLibraryPath, msg)
	}
}

// countingHandler counts the records logged through it.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *countingHandler) WithGroup(string) slog.Handler { return h }

// TestLoadSilent loads ONNX Runtime in child processes (it loads once per
// process): with no Logger, neither Load nor the load a graph's first use
// makes logs anything, to slog's default logger or elsewhere; with one, Load
// logs the library it used there.
func TestLoadSilent(t *testing.T) {
	switch os.Getenv("ORT_TEST_CHILD") {
	case "silent-load", "silent-graph", "logger":
		var def, given countingHandler
		slog.SetDefault(slog.New(&def))
		var err error
		switch os.Getenv("ORT_TEST_CHILD") {
		case "silent-load":
			_, err = ort.Load(ort.LoadOptions{})
		case "silent-graph":
			_, _, err = ort.GraphFile(filepath.Join("..", "..", "testdata", "tinyclip", "onnx", "bad", "vision_float16.onnx")).Inspect()
		case "logger":
			_, err = ort.Load(ort.LoadOptions{Logger: slog.New(&given)})
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stdout, "LOGGED<<%d %d>>", def.n.Load(), given.n.Load())
		return
	}
	orttest.Load(t) // fails here, with the install hint, when there is nothing to load
	for _, c := range []struct {
		mode             string
		wantDef, wantGiv int
	}{{"silent-load", 0, 0}, {"silent-graph", 0, 0}, {"logger", 0, 1}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoadSilent$")
		cmd.Env = append(os.Environ(), "ORT_TEST_CHILD="+c.mode)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("child %s: %v\n%s%s", c.mode, err, stdout.String(), stderr.String())
		}
		var def, giv int
		s := stdout.String()
		i := strings.Index(s, "LOGGED<<")
		if i < 0 {
			t.Fatalf("child %s printed no count:\n%s", c.mode, s)
		}
		if _, err := fmt.Sscanf(s[i:], "LOGGED<<%d %d>>", &def, &giv); err != nil {
			t.Fatalf("child %s: %v:\n%s", c.mode, err, s)
		}
		if def != c.wantDef || giv < c.wantGiv {
			t.Errorf("%s: %d records to the default logger, %d to the given one; want %d and at least %d", c.mode, def, giv, c.wantDef, c.wantGiv)
		}
		if e := stderr.String(); e != "" {
			t.Errorf("%s: the child wrote to stderr: %s", c.mode, e)
		}
	}
}

func TestSessionTinyCLIP(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "..", "testdata", "tinyclip")
	graph, err := os.ReadFile(filepath.Join(dir, "onnx", "vision_model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	ins, outs, err := ort.Inspect(graph, "vision_model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].Name != "pixel_values" || ins[0].Type != ort.ElementFloat32 || len(ins[0].Shape) != 4 || ins[0].Shape[0] != -1 {
		t.Fatalf("inputs %v", ins)
	}
	if len(outs) != 2 || outs[0].Name != "last_hidden_state" || outs[1].Name != "image_embeds" {
		t.Fatalf("outputs %v", outs)
	}
	px, err := tensorio.ReadNPY(filepath.Join(dir, "golden", "vision_pixel_values.npy"))
	if err != nil {
		t.Fatal(err)
	}
	// The tuning settings (arena off, pool threads pinned) run the same
	// graph to the same numbers.
	tuned, err := ort.NewSession(graph, "vision_model.onnx", []string{"pixel_values"}, []string{"image_embeds"},
		ort.SessionOptions{Threads: 2, NoArena: true, PinThreads: true, NoSpinning: true})
	if err != nil {
		t.Fatalf("arena off, threads pinned: %v", err)
	}
	tunedOut, err := tuned.Run(context.Background(), []tensorio.Tensor{px})
	tuned.Close()
	if err != nil {
		t.Fatalf("arena off, threads pinned: %v", err)
	}
	s, err := ort.NewSession(graph, "vision_model.onnx", []string{"pixel_values"}, []string{"image_embeds"}, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want, err := tensorio.ReadNPY(filepath.Join(dir, "golden", "image_embeds.npy"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(context.Background(), []tensorio.Tensor{px})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0].Data.([]float32)
	w := want.Data.([]float32)
	if len(got) != len(w) {
		t.Fatalf("image_embeds: %d values, want %d", len(got), len(w))
	}
	for i := range w {
		if d := got[i] - w[i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("image_embeds[%d] = %g, torch %g", i, got[i], w[i])
		}
		if d := tunedOut[0].Data.([]float32)[i] - w[i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("arena off, threads pinned: image_embeds[%d] = %g, torch %g", i, tunedOut[0].Data.([]float32)[i], w[i])
		}
	}
	if _, err := s.Run(context.Background(), nil); err == nil {
		t.Error("Run with no inputs: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Run(ctx, []tensorio.Tensor{px}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Run(context.Background(), []tensorio.Tensor{px}); !errors.Is(err, ort.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
}

// TestSessionFloat16 feeds float16 bits and reads float16 outputs: the
// hand-made graph onnx/bad/vision_float16.onnx casts pixel_values (float16)
// to float32 and flattens them, so its last_hidden_state is each input
// decoded exactly; the fp16 export's outputs come back as float16 bits.
func TestSessionFloat16(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "..", "testdata", "tinyclip")
	g := ort.GraphFile(filepath.Join(dir, "onnx", "bad", "vision_float16.onnx"))
	ins, outs, err := g.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].Type != ort.ElementFloat16 || ins[0].TypeName() != "float16" || ins[0].Dim(2) != 32 || ins[0].Dim(0) != 0 || ins[0].DimOr(0, 7) != 7 {
		t.Fatalf("inputs %s", ort.ListIO(ins))
	}
	if got := ort.ListIO(outs[1:]); got != "image_embeds float32[-1 3]" {
		t.Errorf("ListIO(outputs) = %q", got)
	}
	s, err := g.NewSession([]string{"pixel_values"}, []string{"last_hidden_state"}, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Every float16 value: normals, subnormals, ±0, ±inf, NaNs.
	const n = 1 << 16
	bits := make([]uint16, 3*32*32*(n/(3*32*32)+1))
	for i := range bits {
		bits[i] = uint16(i)
	}
	b := len(bits) / (3 * 32 * 32)
	out, err := s.Run(context.Background(), []tensorio.Tensor{{DType: tensorio.DTypeF16, Shape: []int{b, 3, 32, 32}, Data: bits}})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out[0].Data.([]float32)
	if !ok || len(got) != len(bits) {
		t.Fatalf("last_hidden_state %s%v", out[0].DType, out[0].Shape)
	}
	for i, h := range bits {
		want := tensorio.F16ToFloat32(h)
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
			t.Fatalf("float16 %#04x: ONNX Runtime decodes %g, want %g", h, got[i], want)
		}
	}

	// float16 outputs, allocated before the run.
	fp16 := ort.GraphFile(filepath.Join(dir, "onnx", "variants", "vision_model_fp16.onnx"))
	s2, err := fp16.NewSession([]string{"pixel_values"}, []string{"last_hidden_state", "image_embeds"}, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	px := make([]uint16, 2*3*32*32)
	in := []tensorio.Tensor{{DType: tensorio.DTypeF16, Shape: []int{2, 3, 32, 32}, Data: px}}
	res, err := s2.Run(context.Background(), in, ort.OutputFor(ort.ElementFloat16, 2, 17, 24), ort.OutputFor(ort.ElementFloat16, 2, 16))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].DType != tensorio.DTypeF16 || len(res[0].Shape) != 3 || res[0].Shape[1] != 17 || res[1].DType != tensorio.DTypeF16 || res[1].NumElements() != 32 {
		t.Fatalf("outputs %s%v, %s%v", res[0].DType, res[0].Shape, res[1].DType, res[1].Shape)
	}
	if err := res[0].Validate(); err != nil {
		t.Fatal(err)
	}
	if v, err := res[1].Float32(); err != nil || v[0] == 0 {
		t.Errorf("image_embeds %v, %v", v, err)
	}
	// Bad output descriptions are errors, not crashes.
	for _, c := range []struct {
		name string
		outs []ort.Output
		want string
	}{
		{"count", []ort.Output{ort.OutputFor(ort.ElementFloat16, 2, 17, 24)}, "1 output descriptions for 2 outputs"},
		{"shape", []ort.Output{ort.OutputFor(ort.ElementFloat16, 2, 18, 24), ort.OutputFor(ort.ElementFloat16, 2, 16)}, "run"},
		{"zero", []ort.Output{ort.OutputFor(ort.ElementFloat16, 2, 0, 24), ort.OutputFor(ort.ElementFloat16, 2, 16)}, "cannot allocate an output of shape [2 0 24]"},
		{"type", []ort.Output{{Type: ort.ElementInt64, Shape: []int{2, 17, 24}}, {}}, "cannot allocate an output of type int64"},
	} {
		if _, err := s2.Run(context.Background(), in, c.outs...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestGraphExternalData: a graph with external data opens from its file and
// not from memory.
func TestGraphExternalData(t *testing.T) {
	orttest.Load(t)
	p := filepath.Join("..", "..", "testdata", "tinyclip", "external", "onnx", "vision_model.onnx")
	ins, outs, err := ort.GraphFile(p).Inspect()
	if err != nil || len(ins) != 1 || len(outs) != 2 {
		t.Fatalf("Inspect from the file: %v, %v, %v", ins, outs, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ort.Inspect(b, p); err == nil || !strings.Contains(err.Error(), "vision_model.onnx_data") {
		t.Errorf("Inspect from memory: %v", err)
	}
	if _, err := ort.NewSession(b, p, []string{"pixel_values"}, []string{"image_embeds"}, ort.SessionOptions{}); err == nil || !strings.Contains(err.Error(), "external data") {
		t.Errorf("NewSession from memory: %v", err)
	}
}

// TestInspectAgreesWithONNXRuntime checks Graph.Inspect, which reads the
// graph's declarations, against ONNX Runtime's own inspection of every test
// graph: the same inputs and outputs, in order, with the same types and
// ranks, and every size the graph declares equal to ONNX Runtime's (which
// may know more sizes from shape inference).
func TestInspectAgreesWithONNXRuntime(t *testing.T) {
	orttest.Load(t)
	var graphs []string
	for _, root := range []string{filepath.Join("..", "..", "testdata", "tinyclip"), filepath.Join("..", "..", "testdata", "hub")} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".onnx") {
				graphs = append(graphs, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(graphs) < 10 {
		t.Fatalf("found %d test graphs, want the dozen under testdata", len(graphs))
	}
	for _, p := range graphs {
		g := ort.GraphFile(p)
		ins, outs, err := g.Inspect()
		if err != nil {
			t.Errorf("%s: Inspect: %v", p, err)
			continue
		}
		wantIns, wantOuts, err := g.InspectLoaded()
		if err != nil {
			t.Logf("%s: ONNX Runtime does not load it (%v); Inspect gave %s", p, err, ort.ListIO(ins))
			continue
		}
		for _, c := range []struct {
			what      string
			got, want []ort.IOInfo
		}{{"inputs", ins, wantIns}, {"outputs", outs, wantOuts}} {
			if len(c.got) != len(c.want) {
				t.Errorf("%s: %s %s, ONNX Runtime %s", p, c.what, ort.ListIO(c.got), ort.ListIO(c.want))
				continue
			}
			for i, got := range c.got {
				want := c.want[i]
				// ONNX Runtime reports no shape where its inference
				// disagrees with a declared one (the hand-made graphs of
				// onnx/bad): then only the declaration is known.
				ok := got.Name == want.Name && got.Tensor == want.Tensor && got.Type == want.Type &&
					(len(got.Shape) == len(want.Shape) || len(want.Shape) == 0)
				for k := 0; ok && k < len(want.Shape); k++ {
					ok = got.Shape[k] < 0 || got.Shape[k] == want.Shape[k]
				}
				if !ok {
					t.Errorf("%s: %s %d is %s, ONNX Runtime says %s", p, c.what, i, got, want)
				}
			}
		}
	}
}
