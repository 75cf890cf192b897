package onnxgraph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
)

// TestParseFile: a model parsed from its file (mapped) reads as the same
// model parsed from its bytes, rewrites of it are byte for byte the same,
// and Close may be called more than once.
func TestParseFile(t *testing.T) {
	b := newBuilder()
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "M", "K")}
	// Weights larger than the 64 KiB blocks new initializers are encoded in.
	w := b.random("w", 160, 130)
	b.node("MatMul", []string{"x", w}, []string{"mm"})
	b.node("Add", []string{"mm", b.random("b", 130)}, []string{"pre"})
	b.node("Relu", []string{"pre"}, []string{"y"})
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y")}
	raw := onnxgraph.Build(&b.g, map[string]int64{"": 17})
	path := filepath.Join(t.TempDir(), "g.onnx")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	inMem, err := onnxgraph.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := onnxgraph.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(mapped.Graph.Nodes) != 3 || len(mapped.Graph.Initializers) != 2 || mapped.IRVersion != inMem.IRVersion {
		t.Fatalf("mapped model: %d nodes, %d initializers, IR %d", len(mapped.Graph.Nodes), len(mapped.Graph.Initializers), mapped.IRVersion)
	}
	for _, q := range []onnxgraph.QuantOptions{{}, {FullRange: true, Integer: true}} {
		var fromBytes, fromFile bytes.Buffer
		if _, err := onnxgraph.Quantize(inMem, q, &fromBytes); err != nil {
			t.Fatal(err)
		}
		if _, err := onnxgraph.Quantize(mapped, q, &fromFile); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fromBytes.Bytes(), fromFile.Bytes()) {
			t.Errorf("%+v: the quantized model differs when the model is mapped", q)
		}
		// Written back and parsed, the rewrite holds the new weights whole.
		qm, err := onnxgraph.Parse(fromFile.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, init := range qm.Graph.Initializers {
			if init.DataType == onnxgraph.Int8 && len(init.Dims) == 2 {
				n++
				if len(init.Raw) != 160*130 {
					t.Errorf("%+v: int8 weights of %d bytes", q, len(init.Raw))
				}
			}
		}
		if n != 1 {
			t.Errorf("%+v: %d int8 weight tensors", q, n)
		}
	}
	if err := mapped.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mapped.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := inMem.Close(); err != nil {
		t.Errorf("Close of a parsed model: %v", err)
	}
	if _, err := onnxgraph.ParseFile(filepath.Join(t.TempDir(), "missing.onnx")); err == nil {
		t.Error("ParseFile of a missing file: no error")
	}
}
