package models

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/models/onnxgraph"
	"github.com/conditionhq/condition/tensorio"
)

// ExposedSuffix marks a graph rewritten by Expose: onnx/vision_model.onnx →
// onnx/vision_model.exposed.onnx.
const ExposedSuffix = ".exposed.onnx"

func exposedName(name string) string { return strings.TrimSuffix(name, ".onnx") + ExposedSuffix }

// Exposed is what Expose did for one graph.
type Exposed struct {
	Graph   string          `json:"graph"`           // canonical name
	Source  string          `json:"source"`          // the file rewritten
	Written string          `json:"written"`         // the rewritten file ("" when nothing was needed)
	Already bool            `json:"already"`         // the graph already outputs last_hidden_state
	Walk    *onnxgraph.Walk `json:"walk,omitempty"`  // what the rewrite found
	Missing bool            `json:"missing"`         // the model has no such graph
	Error   string          `json:"error,omitempty"` // why it could not be rewritten
}

// Expose rewrites the model's graphs that output only pooled embeddings so
// that they also output last_hidden_state (see onnxgraph.Expose), saving
// each beside the original as onnx/<name>.exposed.onnx (for a hub model, in
// its cache snapshot, as a link into blobs/ like the downloaded files). The
// model then serves the rewritten graphs. Graphs that need no rewrite are
// left alone. An unrecognised graph is an error for that graph.
func (m *Model) Expose() ([]Exposed, error) {
	if m.dir == "" {
		return nil, fmt.Errorf("models: model %s is not on disk; expose works on a model directory or a hub model", m.ref)
	}
	var out []Exposed
	var errs []error
	for _, g := range []struct{ name, pooled string }{{TextModelFile, "text_embeds"}, {VisionModelFile, "image_embeds"}} {
		src := m.Source(g.name)
		e := Exposed{Graph: g.name, Source: src}
		if strings.HasSuffix(src, ExposedSuffix) {
			e.Already = true
			out = append(out, e)
			continue
		}
		b, err := fs.ReadFile(m.base, src)
		if errors.Is(err, fs.ErrNotExist) {
			e.Missing = true
			out = append(out, e)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("models: %w", err)
		}
		gm, err := onnxgraph.Parse(b)
		if err != nil {
			return out, fmt.Errorf("models: %s: %w", m.Path(g.name), err)
		}
		if _, ok := gm.Graph.Output(onnxgraph.HiddenName); ok {
			e.Already = true
			out = append(out, e)
			continue
		}
		name := exposedName(src)
		write := func(w io.Writer) error {
			walk, err := onnxgraph.Expose(gm, g.pooled, w)
			e.Walk = walk
			return err
		}
		var werr error
		if m.repo != "" && m.revision != "" && m.hub != nil {
			_, werr = m.hub.Cache().AddFile(m.repo, m.revision, name, write)
		} else {
			werr = tensorio.WriteFileAtomic(filepath.Join(m.dir, filepath.FromSlash(name)), write)
		}
		if werr != nil {
			e.Error = werr.Error()
			errs = append(errs, fmt.Errorf("models: expose %s: %w", m.Path(g.name), werr))
			out = append(out, e)
			continue
		}
		e.Written = filepath.Join(m.dir, filepath.FromSlash(name))
		m.alias[g.name] = name
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}
