package models

import (
	"fmt"
	"strings"

	"github.com/conditionhq/condition/internal/onnxgraph"
)

// GraphInfo describes one of a model's ONNX graphs as its file declares it.
type GraphInfo struct {
	File       string   `json:"file"`
	Inputs     []string `json:"inputs"`                  // "name type[dims]"
	Outputs    []string `json:"outputs"`                 // "name type[dims]"
	PooledOnly bool     `json:"pooled_only"`             // no last_hidden_state: pooled embeddings only
	External   []string `json:"external_data,omitempty"` // files holding its initializers
	Error      string   `json:"error,omitempty"`         // the file could not be read or parsed
}

// DescribeGraph reads graph name (TextModelFile, VisionModelFile) of m
// without loading ONNX Runtime; nil when m has no such graph. A graph that
// cannot be read says why in Error.
func (m *Model) DescribeGraph(name string) *GraphInfo {
	if !m.Has(name) {
		return nil
	}
	gi := &GraphInfo{File: m.Path(name)}
	b, err := m.ReadFile(name)
	if err != nil {
		gi.Error = err.Error()
		return gi
	}
	gm, err := onnxgraph.Parse(b)
	if err != nil {
		gi.Error = err.Error()
		return gi
	}
	vi := func(v onnxgraph.ValueInfo) string {
		dims := make([]string, len(v.Shape))
		for i, d := range v.Shape {
			dims[i] = d.String()
		}
		return fmt.Sprintf("%s %s[%s]", v.Name, onnxgraph.ElemTypeName(v.ElemType), strings.Join(dims, " "))
	}
	for _, v := range gm.Graph.Inputs {
		gi.Inputs = append(gi.Inputs, vi(v))
	}
	for _, v := range gm.Graph.Outputs {
		gi.Outputs = append(gi.Outputs, vi(v))
	}
	_, hasHidden := gm.Graph.Output(onnxgraph.HiddenName)
	gi.PooledOnly = !hasHidden
	gi.External = gm.ExternalFiles()
	return gi
}
