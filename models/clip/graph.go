package clip

import (
	"errors"
	"fmt"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
)

// openModelGraph opens the graph file name of m (or the variant m was opened
// with) and builds an encoder of it with build.
func openModelGraph[T, O any](m *models.Model, name string, opts O, build func(ort.Graph, O, []ort.IOInfo, []ort.IOInfo) (T, error)) (T, error) {
	g, err := ort.ModelGraph(m, name)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("clip: %w", err)
	}
	return openGraph(g, opts, build)
}

// openGraph reads g's declared inputs and outputs and builds an encoder of
// them with build, which creates the session (see ort.WithIO for graphs whose
// declared sizes do not suffice).
func openGraph[T, O any](g ort.Graph, opts O, build func(ort.Graph, O, []ort.IOInfo, []ort.IOInfo) (T, error)) (T, error) {
	e, err := ort.WithIO(g, func(ins, outs []ort.IOInfo) (T, error) { return build(g, opts, ins, outs) })
	var ie *ort.InspectError
	if errors.As(err, &ie) {
		return e, fmt.Errorf("clip: %w", ie.Err)
	}
	return e, err
}
