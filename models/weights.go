package models

import (
	"errors"
	"fmt"
	"io/fs"
	"math"

	"github.com/conditionhq/condition/tensorio"
)

// ReadWeights reads the named tensors from the model's model.safetensors,
// reading only the header and those tensors when the file allows random
// access (files on disk and embedded files do). A missing file or tensor is
// an error naming it and the model; a missing file wraps fs.ErrNotExist.
func (m *Model) ReadWeights(names ...string) (map[string]tensorio.Tensor, error) {
	ra, h, closeFn, err := m.weightsFile()
	if err != nil {
		return nil, err
	}
	defer closeFn()
	out := make(map[string]tensorio.Tensor, len(names))
	for _, n := range names {
		if _, ok := h.Tensors[n]; !ok {
			return nil, fmt.Errorf("models: model %s: %s has no tensor %s", m.where(), WeightsFile, n)
		}
		t, err := h.ReadTensor(ra, n)
		if err != nil {
			return nil, fmt.Errorf("models: model %s: %s: %w", m.where(), WeightsFile, err)
		}
		out[n] = t
	}
	return out, nil
}

// LogitScale returns CLIP's logit_scale (the log of the similarity
// temperature; logits are exp(logit_scale) · cosine): the trained value from
// model.safetensors when the model has one, else config.json's
// logit_scale_init_value. fromWeights says which.
func (m *Model) LogitScale() (scale float32, fromWeights bool, err error) {
	w, err := m.ReadWeights("logit_scale")
	if errors.Is(err, fs.ErrNotExist) {
		return float32(m.config.LogitScaleInitValue), false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err := w["logit_scale"].Float32()
	if err != nil || len(v) != 1 || math.IsNaN(float64(v[0])) || math.IsInf(float64(v[0]), 0) {
		return 0, false, fmt.Errorf("models: model %s: %s: logit_scale is %v, expected one finite number", m.where(), WeightsFile, w["logit_scale"].Shape)
	}
	return v[0], true, nil
}
