package onnxgraph_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
)

var external = filepath.Join("testdata", "external")

// countingReader counts the reads and bytes an io.ReaderAt serves.
type countingReader struct {
	r            *bytes.Reader
	reads, bytes atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.reads.Add(1)
	c.bytes.Add(int64(n))
	return n, err
}

// TestExternalDataFiles checks both readers of external-data locations
// against what the onnx package reads from the same files (expected.json,
// written by testdata/external/generate.py).
func TestExternalDataFiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(external, "expected.json"))
	if err != nil {
		t.Fatalf("%v (regenerate with /usr/bin/python3 %s)", err, filepath.Join(external, "generate.py"))
	}
	var want map[string]struct {
		Locations []string `json:"locations"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 {
		t.Fatalf("expected.json lists %d graphs, want 3", len(want))
	}
	for name, w := range want {
		data, err := os.ReadFile(filepath.Join(external, name))
		if err != nil {
			t.Fatal(err)
		}
		cr := &countingReader{r: bytes.NewReader(data)}
		got, err := onnxgraph.ExternalDataFiles(cr, int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Join(got, ",") != strings.Join(w.Locations, ",") {
			t.Errorf("%s: ExternalDataFiles %q, onnx reads %q", name, got, w.Locations)
		}
		m, err := onnxgraph.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := m.ExternalFiles(); strings.Join(got, ",") != strings.Join(w.Locations, ",") {
			t.Errorf("%s: ExternalFiles %q, onnx reads %q", name, got, w.Locations)
		}
	}
	// A self-contained graph: no side files, and its tensor data is skipped,
	// not read.
	data, err := os.ReadFile(filepath.Join(tiny, "onnx", "text_model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReader{r: bytes.NewReader(data)}
	got, err := onnxgraph.ExternalDataFiles(cr, int64(len(data)))
	if err != nil || len(got) != 0 {
		t.Errorf("self-contained graph: %q %v", got, err)
	}
	t.Logf("self-contained %d-byte graph: %d reads, %d bytes read", len(data), cr.reads.Load(), cr.bytes.Load())
	if n := cr.bytes.Load(); n > int64(len(data))/4 {
		t.Errorf("read %d of %d bytes (%d reads) to find no external data", n, len(data), cr.reads.Load())
	}
	// Not ONNX, or cut short: errors, not panics.
	for _, bad := range [][]byte{nil, []byte("not onnx at all"), data[:len(data)/2], {0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := onnxgraph.ExternalDataFiles(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Errorf("ExternalDataFiles(%d bytes %q...): no error", len(bad), bad[:min(len(bad), 8)])
		}
	}
}

func TestCheckLocation(t *testing.T) {
	for _, ok := range []string{"vision_model.onnx_data", "text_model.onnx.data", "weights/part-1.bin", "./a.bin"} {
		if err := onnxgraph.CheckLocation(ok); err != nil {
			t.Errorf("CheckLocation(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "../escape.bin", "a/../../b", "/etc/passwd", `C:\w.bin`, `a\b`} {
		if err := onnxgraph.CheckLocation(bad); err == nil {
			t.Errorf("CheckLocation(%q): no error", bad)
		}
	}
}

func FuzzExternalDataFiles(f *testing.F) {
	for _, name := range []string{"text_model.onnx", "escape.onnx"} {
		if b, err := os.ReadFile(filepath.Join(external, name)); err == nil {
			f.Add(b[:min(len(b), 4096)])
		}
	}
	f.Add([]byte{0x3a, 0x05, 0x2a, 0x03, 0x6a, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		onnxgraph.ExternalDataFiles(bytes.NewReader(b), int64(len(b)))
	})
}
