package models

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"github.com/conditionhq/condition/tensorio"
)

// ReadWeights reads the named tensors from the model's model.safetensors,
// reading only the header and those tensors when the file allows random
// access (files on disk and embedded files do). A missing file or tensor is
// an error naming it and the model; a missing file wraps fs.ErrNotExist.
// A model in OpenCLIP's layout has them read from
// open_clip_model.safetensors, under CLIPModel's names.
func (m *Model) ReadWeights(names ...string) (map[string]tensorio.Tensor, error) {
	if m.openCLIP && fsHas(m.base, OpenCLIPWeightsFile) {
		return m.readOpenCLIPWeights(names)
	}
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
// logit_scale_init_value. fromWeights says which. For TIPSv2, whose logits
// are cosine / temperature, it is log(1/temperature): the temperature
// tensor of model.safetensors when it has one, else config.json's
// (Config.Temperature).
func (m *Model) LogitScale() (scale float32, fromWeights bool, err error) {
	if m.family == Tipsv2 {
		return m.tipsLogitScale()
	}
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

// tipsLogitScale returns log(1/temperature) for a TIPSv2 model (see
// LogitScale).
func (m *Model) tipsLogitScale() (float32, bool, error) {
	t, fromWeights := m.config.Temperature, false
	h, err := m.WeightsHeader()
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, false, err
	default:
		if _, ok := h.Tensors["temperature"]; !ok {
			break // the published checkpoints have none
		}
		w, err := m.ReadWeights("temperature")
		if err != nil {
			return 0, false, err
		}
		v, err := w["temperature"].Float32()
		if err != nil || len(v) != 1 || !(v[0] > 0) || math.IsInf(float64(v[0]), 0) {
			return 0, false, fmt.Errorf("models: model %s: %s: temperature is %v %v, expected one positive number", m.where(), WeightsFile, w["temperature"].Shape, v)
		}
		t, fromWeights = float64(v[0]), true
	}
	if !(t > 0) {
		return 0, false, fmt.Errorf("models: model %s: temperature %g, expected a positive number", m.where(), t)
	}
	return float32(math.Log(1 / t)), fromWeights, nil
}

// LogitBias returns SigLIP's logit_bias (logits are exp(logit_scale) ·
// cosine + logit_bias) from model.safetensors; 0 for a model without one
// (CLIP). fromWeights says whether the file had it.
func (m *Model) LogitBias() (bias float32, fromWeights bool, err error) {
	w, err := m.ReadWeights("logit_bias")
	if errors.Is(err, fs.ErrNotExist) || (err != nil && !m.family.Sigmoid()) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err := w["logit_bias"].Float32()
	if err != nil || len(v) != 1 || math.IsNaN(float64(v[0])) || math.IsInf(float64(v[0]), 0) {
		return 0, false, fmt.Errorf("models: model %s: %s: logit_bias is %v, expected one finite number", m.where(), WeightsFile, w["logit_bias"].Shape)
	}
	return v[0], true, nil
}

// WeightsHeader parses the header of the model's model.safetensors once: the
// name, dtype, shape and byte range of every tensor, without reading the
// tensors (for listing which heads a model has, and their shapes). A missing
// file is an error naming the model that wraps fs.ErrNotExist.
func (m *Model) WeightsHeader() (*tensorio.Header, error) {
	_, h, closeFn, err := m.weightsFile()
	if err != nil {
		return nil, err
	}
	closeFn()
	return h, nil
}

// weightsFile opens model.safetensors and reads its header; the caller
// reads tensors through ra and then calls closeFn.
func (m *Model) weightsFile() (ra io.ReaderAt, h *tensorio.Header, closeFn func(), err error) {
	f, err := m.fsys.Open(WeightsFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, fmt.Errorf("models: model %s has no %s: %w", m.where(), WeightsFile, fs.ErrNotExist)
		}
		return nil, nil, nil, fmt.Errorf("models: model %s: %w", m.where(), err)
	}
	fail := func(err error) (io.ReaderAt, *tensorio.Header, func(), error) {
		f.Close()
		return nil, nil, nil, fmt.Errorf("models: model %s: %s: %w", m.where(), WeightsFile, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	ra, ok := f.(io.ReaderAt)
	size := fi.Size()
	if !ok {
		b, err := io.ReadAll(f)
		if err != nil {
			return fail(err)
		}
		ra, size = bytes.NewReader(b), int64(len(b))
	}
	if h, err = tensorio.ReadSafetensorsHeader(ra, size); err != nil {
		return fail(err)
	}
	return ra, h, func() { f.Close() }, nil
}
