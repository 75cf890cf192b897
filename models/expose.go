package models

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/tensorio"
)

// ExposedSuffix marks a graph rewritten by Expose: onnx/vision_model.onnx →
// onnx/vision_model.exposed.onnx.
const ExposedSuffix = ".exposed.onnx"

// exposedName returns the name of name's rewrite: onnx/vision_model.onnx →
// onnx/vision_model.exposed.onnx.
func exposedName(name string) string { return strings.TrimSuffix(name, ".onnx") + ExposedSuffix }

// Exposed is what Expose did for one graph.
type Exposed struct {
	Graph   string      `json:"graph"`           // canonical name
	Source  string      `json:"source"`          // the file rewritten
	Written string      `json:"written"`         // the rewritten file ("" when nothing was needed)
	Already bool        `json:"already"`         // the graph already outputs last_hidden_state
	Walk    *ExposeWalk `json:"walk,omitempty"`  // what the rewrite found
	Missing bool        `json:"missing"`         // the model has no such graph
	Error   string      `json:"error,omitempty"` // why it could not be rewritten
}

// ExposeWalk is what Expose found on its way from a pooled output back to
// the last hidden state.
type ExposeWalk struct {
	Tower      string // "text" (text_embeds) or "vision" (image_embeds)
	Pooled     string // the pooled output's name
	Projection string // op type of the projection node (MatMul, Gemm, MatMulInteger, ...)
	LayerNorm  string // vision: "LayerNormalization" or "decomposed"; text: ""
	Gather     string // op type of the node picking the CLS or EOS position
	Hidden     string // name of the last hidden state [batch, tokens, width] inside the graph
	Width      int64  // its width when the weights tell it, else 0
	// Cast is set when the pooled output is cast from the graph's inner
	// precision (a float16 graph keeping float32 inputs and outputs): the
	// added output is cast to the pooled output's type too.
	Cast bool
	// Steps describes the walk, one line per step, for logs.
	Steps []string
}

// Expose rewrites the model's graphs that output only pooled embeddings so
// that they also output last_hidden_state (see onnxgraph.Expose), saving
// each as onnx/<name>.exposed.onnx: beside the original in a model
// directory; for a hub model, in the derived cache (see DefaultDerivedDir),
// never in the Hugging Face cache, with the files holding the graph's
// external data linked (or copied) beside it. Exposed.Written says where.
// The model then serves the rewritten graphs. Graphs that need no rewrite
// are left alone. An unrecognised graph is an error for that graph.
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
		p, err := m.exposedPath(name, gm)
		if err == nil {
			err = tensorio.WriteFileAtomic(p, func(w io.Writer) error {
				walk, err := onnxgraph.Expose(gm, g.pooled, w)
				if walk != nil {
					ew := ExposeWalk(*walk)
					e.Walk = &ew
				}
				return err
			})
		}
		if err != nil {
			e.Error = err.Error()
			errs = append(errs, fmt.Errorf("models: expose %s: %w", m.Path(g.name), err))
			out = append(out, e)
			continue
		}
		e.Written = p
		m.alias[g.name] = name
		if m.isHub() {
			m.extra[g.name] = p
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// isHub reports whether the model is a snapshot of a hub repository.
func (m *Model) isHub() bool { return m.repo != "" && m.revision != "" && m.hub != nil }

// exposedPath returns where the exposed graph name of the model goes, its
// folder made: beside the original in a directory; in the derived cache for
// a hub model, with the files holding gm's external data placed beside it.
func (m *Model) exposedPath(name string, gm *onnxgraph.Model) (string, error) {
	if !m.isHub() {
		return filepath.Join(m.dir, filepath.FromSlash(name)), nil
	}
	sides, err := sidesOf(name, gm.ExternalFiles())
	if err != nil {
		return "", err
	}
	if err := m.placeSides(sides); err != nil {
		return "", err
	}
	p, err := m.derived.path(m.repo, m.revision, name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

// placeSides puts the snapshot's files sides (paths in the repository)
// into the derived cache, beside the exposed graphs that need them.
func (m *Model) placeSides(sides []string) error {
	for _, side := range sides {
		src, ok := m.hub.Cache().File(m.repo, m.revision, side)
		if !ok {
			return fmt.Errorf("%s@%s: %s, which holds a graph's external data, is not in the cache snapshot %s",
				m.repo, m.revision, side, m.dir)
		}
		if _, err := m.derived.place(m.repo, m.revision, side, src); err != nil {
			return err
		}
	}
	return nil
}

// derivedExposed returns the path of the exposed graph name of a hub model
// when the derived cache holds it, after placing the files holding its
// external data beside it (again, if they went missing).
func (m *Model) derivedExposed(name string) (string, bool, error) {
	if !m.isHub() {
		return "", false, nil
	}
	p, ok := m.derived.file(m.repo, m.revision, name)
	if !ok {
		return "", false, nil
	}
	sides, err := externalSides(p, name)
	if err != nil {
		return "", false, fmt.Errorf("models: %s: %w", p, err)
	}
	if err := m.placeSides(sides); err != nil {
		return "", false, fmt.Errorf("models: %s: %w", p, err)
	}
	return p, true, nil
}
