package onnxgraph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestExternalize moves the built-in model's weights to a data file, runs
// both forms in ONNX Runtime on the same inputs and requires the same
// outputs bit for bit; the data file holds every moved tensor at an aligned
// offset, the rewritten graph parses with the same initializers, and a cut
// model is an error.
func TestExternalize(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "..", "models", "embedded", "model")
	for _, file := range []string{"vision_model.onnx", "text_model.onnx"} {
		path := filepath.Join(dir, "onnx", file)
		m, raw := load(t, path)
		out := t.TempDir()
		var graph, data bytes.Buffer
		const loc = "weights/data.bin"
		res, err := onnxgraph.Externalize(bytes.NewReader(raw), int64(len(raw)), &graph, &data, loc, 1024)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Logf("%s: %+v, graph %d bytes (was %d), data %d bytes", file, res, graph.Len(), len(raw), data.Len())
		if res.Tensors == 0 || res.Bytes < int64(len(raw))/2 || graph.Len() > len(raw)/2 {
			t.Errorf("%s: moved %d tensors, %d bytes, graph left %d of %d bytes", file, res.Tensors, res.Bytes, graph.Len(), len(raw))
		}
		if int64(data.Len()) < res.Bytes || int64(data.Len()) > res.Bytes+int64(res.Tensors)*onnxgraph.ExternalAlign {
			t.Errorf("%s: data file %d bytes for %d bytes of tensors", file, data.Len(), res.Bytes)
		}
		got, err := onnxgraph.Parse(graph.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Graph.Initializers) != len(m.Graph.Initializers) || len(got.Graph.Nodes) != len(m.Graph.Nodes) {
			t.Errorf("%s: %d initializers and %d nodes, want %d and %d", file, len(got.Graph.Initializers), len(got.Graph.Nodes), len(m.Graph.Initializers), len(m.Graph.Nodes))
		}
		if files := got.ExternalFiles(); len(files) != 1 || files[0] != loc {
			t.Errorf("%s: external files %v, want [%s]", file, files, loc)
		}
		gp := filepath.Join(out, file)
		if err := os.MkdirAll(filepath.Join(out, "weights"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(gp, graph.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, loc), data.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := onnxgraph.ExternalDataFiles(bytes.NewReader(graph.Bytes()), int64(graph.Len()))
		if err != nil || len(files) != 1 || files[0] != loc {
			t.Errorf("%s: ExternalDataFiles %v, %v", file, files, err)
		}
		inNames, in := probeInputs(t, m, 3)
		var outNames []string
		for _, o := range m.Graph.Outputs {
			outNames = append(outNames, o.Name)
		}
		want := runGraph(t, raw, path, inNames, in, outNames)
		have := runFile(t, gp, inNames, in, outNames)
		for i := range want {
			for j := range want[i] {
				if want[i][j] != have[i][j] {
					t.Fatalf("%s: output %s[%d] = %v, the embedded graph gives %v", file, outNames[i], j, have[i][j], want[i][j])
				}
			}
		}
		// A model cut short is an error, not a shorter graph.
		cut := raw[:len(raw)-len(raw)/3]
		if _, err := onnxgraph.Externalize(bytes.NewReader(cut), int64(len(cut)), &bytes.Buffer{}, &bytes.Buffer{}, loc, 1024); err == nil {
			t.Errorf("%s cut to %d bytes: no error", file, len(cut))
		}
	}
	if _, err := onnxgraph.Externalize(bytes.NewReader(nil), 0, &bytes.Buffer{}, &bytes.Buffer{}, "../x", 1); err == nil {
		t.Error("a location outside the graph's folder: no error")
	}
}

func runFile(t testing.TB, path string, inNames []string, in []tensorio.Tensor, outNames []string) [][]float32 {
	t.Helper()
	s, err := ort.GraphFile(path).NewSession(inNames, outNames, ort.SessionOptions{Threads: 2})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer s.Close()
	outs, err := s.Run(t.Context(), in)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	res := make([][]float32, len(outs))
	for i, o := range outs {
		if res[i], err = o.Float32(); err != nil {
			t.Fatal(err)
		}
	}
	return res
}
