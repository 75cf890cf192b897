package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/tensorio"
)

// MapAbove is the graph size above which the engine has MapGraphs give a
// graph file holding its weights inside it a mapped copy.
const MapAbove = 64 << 20

// variantMapped marks a mapped copy's stamp.
const variantMapped = "mapped"

// MappedSuffix names a graph's mapped copy in the derived cache:
// onnx/vision_model.onnx → onnx/vision_model.mapped.onnx, its weights in
// onnx/vision_model.mapped.onnx_data.
const MappedSuffix = ".mapped.onnx"

// MappedGraph is what MapGraphs did for one graph.
type MappedGraph struct {
	Graph   string  `json:"graph"`   // canonical name
	Source  string  `json:"source"`  // the graph file the model served
	Path    string  `json:"path"`    // the mapped copy it serves now
	Made    bool    `json:"made"`    // written by this call (else found in the cache)
	Tensors int     `json:"tensors"` // initializers in the data file
	Bytes   int64   `json:"bytes"`   // their bytes
	Seconds float64 `json:"seconds"` // writing it
}

// mappedReport is a mapped copy's stamp report.
type mappedReport struct {
	onnxgraph.Externalized
	Data      string `json:"data"`       // the data file's name, beside the graph
	DataBytes int64  `json:"data_bytes"` // its size
}

// MapGraphs points each graph the model serves from a file on disk of
// more than above bytes that holds its weights inside it at a copy in this
// program's derived cache whose weights are in a data file beside it
// (onnxgraph.Externalize), made on first use and reused while the source
// file is unchanged (its size and modification time are stamped). ONNX
// Runtime maps such a file instead of copying the weights out of the
// graph: a ViT-B/32-size session starts in a fraction of the time and the
// page cache shares the weights between processes. The copy costs the
// graph's size on disk once. Graphs already keeping their weights outside,
// small graphs and the embedded model are left as they are.
func (m *Model) MapGraphs(above int64) ([]MappedGraph, error) {
	if m.dir == "" && !m.isHub() {
		return nil, nil
	}
	var out []MappedGraph
	for _, g := range []string{TextModelFile, VisionModelFile} {
		if !m.Has(g) {
			continue
		}
		src := m.Path(g)
		fi, err := os.Stat(src)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() <= above {
			continue
		}
		f, err := os.Open(src)
		if err != nil {
			return out, fmt.Errorf("models: map %s: %w", src, err)
		}
		ext, err := onnxgraph.ExternalDataFiles(f, fi.Size())
		if err != nil || len(ext) > 0 {
			f.Close()
			continue // ONNX Runtime names a broken graph better; an external one is mapped already
		}
		mg, err := m.mapGraph(g, src, f, fi)
		f.Close()
		if err != nil {
			return out, fmt.Errorf("models: map %s: %w", src, err)
		}
		m.extra[g] = mg.Path
		out = append(out, mg)
	}
	return out, nil
}

// mapGraph returns the mapped copy of the graph file src (opened as f),
// writing it when the cache has none made from src as it is now.
func (m *Model) mapGraph(g, src string, f *os.File, fi os.FileInfo) (MappedGraph, error) {
	mg := MappedGraph{Graph: g, Source: src}
	dir, err := m.variantDir()
	if err != nil {
		return mg, err
	}
	mg.Path = filepath.Join(dir, "onnx", strings.TrimSuffix(filepath.Base(src), ".onnx")+MappedSuffix)
	data := mg.Path + "_data"
	now := VariantStamp{Source: src, Graph: g, Size: fi.Size(), ModTimeNanos: fi.ModTime().UnixNano(), Variant: variantMapped}
	if b, err := os.ReadFile(mg.Path + ".json"); err == nil {
		var saved VariantStamp
		var rep mappedReport
		if json.Unmarshal(b, &saved) == nil && saved.Variant == variantMapped && sameSource(saved, now) && json.Unmarshal(saved.Report, &rep) == nil {
			gi, gerr := os.Stat(mg.Path)
			di, derr := os.Stat(data)
			if gerr == nil && derr == nil && gi.Mode().IsRegular() && di.Size() == rep.DataBytes {
				mg.Tensors, mg.Bytes = rep.Tensors, rep.Bytes
				return mg, nil
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(mg.Path), 0o755); err != nil {
		return mg, err
	}
	start := time.Now()
	var graph bytes.Buffer
	var res onnxgraph.Externalized
	var dataBytes int64
	err = tensorio.WriteFileAtomic(data, func(w io.Writer) error {
		cw := &countWriter{w: w}
		var err error
		res, err = onnxgraph.Externalize(f, fi.Size(), &graph, cw, filepath.Base(data), 1024)
		dataBytes = cw.n
		return err
	})
	if err != nil {
		return mg, err
	}
	if err := tensorio.WriteFileAtomic(mg.Path, func(w io.Writer) error {
		_, err := w.Write(graph.Bytes())
		return err
	}); err != nil {
		return mg, err
	}
	rep, err := json.Marshal(mappedReport{Externalized: res, Data: filepath.Base(data), DataBytes: dataBytes})
	if err != nil {
		return mg, err
	}
	now.Report, now.Written = rep, time.Now().UTC().Format(time.RFC3339)
	if err := writeStamp(mg.Path+".json", now); err != nil {
		return mg, err
	}
	mg.Made, mg.Tensors, mg.Bytes, mg.Seconds = true, res.Tensors, res.Bytes, time.Since(start).Seconds()
	return mg, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
