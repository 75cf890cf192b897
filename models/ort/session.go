package ort

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/conditionhq/condition/tensorio"
	onnx "github.com/yalue/onnxruntime_go"
)

// ElementType is the element type of a graph input or output.
type ElementType int

// Element types the project meets. Others are reported as ElementOther.
const (
	ElementUndefined ElementType = iota
	ElementFloat32
	ElementFloat16
	ElementBFloat16
	ElementFloat64
	ElementInt64
	ElementInt32
	ElementInt16
	ElementInt8
	ElementUint8
	ElementBool
	ElementString
	ElementOther
)

func (t ElementType) String() string {
	switch t {
	case ElementFloat32:
		return "float32"
	case ElementFloat16:
		return "float16"
	case ElementBFloat16:
		return "bfloat16"
	case ElementFloat64:
		return "float64"
	case ElementInt64:
		return "int64"
	case ElementInt32:
		return "int32"
	case ElementInt16:
		return "int16"
	case ElementInt8:
		return "int8"
	case ElementUint8:
		return "uint8"
	case ElementBool:
		return "bool"
	case ElementString:
		return "string"
	case ElementUndefined:
		return "undefined"
	}
	return "other"
}

func elementType(t onnx.TensorElementDataType) ElementType {
	switch t {
	case onnx.TensorElementDataTypeFloat:
		return ElementFloat32
	case onnx.TensorElementDataTypeFloat16:
		return ElementFloat16
	case onnx.TensorElementDataTypeBFloat16:
		return ElementBFloat16
	case onnx.TensorElementDataTypeDouble:
		return ElementFloat64
	case onnx.TensorElementDataTypeInt64:
		return ElementInt64
	case onnx.TensorElementDataTypeInt32:
		return ElementInt32
	case onnx.TensorElementDataTypeInt16:
		return ElementInt16
	case onnx.TensorElementDataTypeInt8:
		return ElementInt8
	case onnx.TensorElementDataTypeUint8:
		return ElementUint8
	case onnx.TensorElementDataTypeBool:
		return ElementBool
	case onnx.TensorElementDataTypeString:
		return ElementString
	case onnx.TensorElementDataTypeUndefined:
		return ElementUndefined
	}
	return ElementOther
}

// IOInfo describes one graph input or output.
type IOInfo struct {
	Name   string
	Tensor bool        // false for sequences, maps and other non-tensor values
	Type   ElementType // for tensors
	Shape  []int64     // for tensors; -1 marks a dynamic dimension
}

func (i IOInfo) String() string {
	if !i.Tensor {
		return i.Name + " (not a tensor)"
	}
	return fmt.Sprintf("%s %s%v", i.Name, i.Type, i.Shape)
}

func ioInfos(in []onnx.InputOutputInfo) []IOInfo {
	out := make([]IOInfo, len(in))
	for k, v := range in {
		out[k] = IOInfo{Name: v.Name, Tensor: v.OrtValueType == onnx.ONNXTypeTensor,
			Type: elementType(v.DataType), Shape: append([]int64(nil), v.Dimensions...)}
	}
	return out
}

// ensureLoaded loads ONNX Runtime with the default search if nothing is loaded yet.
func ensureLoaded() error {
	if Loaded() != nil {
		return nil
	}
	_, err := Load(LoadOptions{})
	return err
}

// Inspect returns the inputs and outputs of an ONNX graph. name (a file
// path, or a path inside a model) is used in errors. ONNX Runtime is loaded
// with the default search if it is not loaded yet.
func Inspect(graph []byte, name string) (inputs, outputs []IOInfo, err error) {
	if err := ensureLoaded(); err != nil {
		return nil, nil, err
	}
	in, out, err := onnx.GetInputOutputInfoWithONNXData(graph)
	if err != nil {
		return nil, nil, fmt.Errorf("ort: %s: %w", name, err)
	}
	return ioInfos(in), ioInfos(out), nil
}

// SessionOptions controls NewSession.
type SessionOptions struct {
	// Threads is ONNX Runtime's intra-op thread count; 0 leaves ONNX Runtime's default.
	Threads int
	// NoSpinning stops ONNX Runtime's intra-op threads from spinning while
	// they wait for work, so that they leave the cores to other stages of a
	// pipeline (decoding, attention) between runs.
	NoSpinning bool
}

// Session runs one ONNX graph with named inputs and outputs. Run may be
// called from several goroutines at once. Close it when done.
type Session struct {
	name    string
	inputs  []string
	outputs []string
	mu      sync.RWMutex // Run holds it shared, Close exclusively
	s       *onnx.DynamicAdvancedSession
}

// NewSession creates a session over an ONNX graph held in memory (so that a
// model embedded in the binary works), feeding the named inputs and fetching
// the named outputs. name is used in errors.
func NewSession(graph []byte, name string, inputs, outputs []string, opts SessionOptions) (*Session, error) {
	if err := ensureLoaded(); err != nil {
		return nil, err
	}
	if len(inputs) == 0 || len(outputs) == 0 {
		return nil, fmt.Errorf("ort: %s: a session needs at least one input and one output", name)
	}
	so, err := onnx.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("ort: %s: session options: %w", name, err)
	}
	defer so.Destroy()
	if opts.Threads < 0 {
		return nil, fmt.Errorf("ort: %s: thread count %d is negative", name, opts.Threads)
	}
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, fmt.Errorf("ort: %s: set %d threads: %w", name, opts.Threads, err)
		}
	}
	if opts.NoSpinning {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return nil, fmt.Errorf("ort: %s: disable spinning: %w", name, err)
		}
	}
	s, err := onnx.NewDynamicAdvancedSessionWithONNXData(graph, inputs, outputs, so)
	if err != nil {
		return nil, fmt.Errorf("ort: %s: create session: %w", name, err)
	}
	return &Session{name: name, inputs: append([]string(nil), inputs...), outputs: append([]string(nil), outputs...), s: s}, nil
}

// Name returns the name given to NewSession.
func (s *Session) Name() string { return s.name }

// Close releases the session. It is safe to call more than once.
func (s *Session) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return nil
	}
	err := s.s.Destroy()
	s.s = nil
	if err != nil {
		return fmt.Errorf("ort: %s: close: %w", s.name, err)
	}
	return nil
}

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("ort: session is closed")

// Run feeds in (one tensor per input, in the order given to NewSession) and
// returns the outputs in order, as Go-owned tensors. Cancelling ctx
// terminates a run in progress.
func (s *Session) Run(ctx context.Context, in []tensorio.Tensor) ([]tensorio.Tensor, error) {
	if len(in) != len(s.inputs) {
		return nil, fmt.Errorf("ort: %s: %d input tensors for %d inputs %v", s.name, len(in), len(s.inputs), s.inputs)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vals := make([]onnx.Value, len(in))
	defer func() {
		for _, v := range vals {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	for i, t := range in {
		v, err := toValue(t)
		if err != nil {
			return nil, fmt.Errorf("ort: %s: input %s: %w", s.name, s.inputs[i], err)
		}
		vals[i] = v
	}
	outs := make([]onnx.Value, len(s.outputs))
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	ro, err := onnx.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("ort: %s: run options: %w", s.name, err)
	}
	defer ro.Destroy()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = ro.Terminate()
		case <-done:
		}
	}()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.s == nil {
		return nil, ErrClosed
	}
	if err := s.s.RunWithOptions(vals, outs, ro); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ort: %s: run: %w", s.name, err)
	}
	res := make([]tensorio.Tensor, len(outs))
	for i, v := range outs {
		t, err := fromValue(v)
		if err != nil {
			return nil, fmt.Errorf("ort: %s: output %s: %w", s.name, s.outputs[i], err)
		}
		res[i] = t
	}
	return res, nil
}

func shape64(s []int) onnx.Shape {
	out := make(onnx.Shape, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func newTensor[T onnx.TensorData](shape []int, data []T) (onnx.Value, error) {
	if len(data) == 0 {
		// onnxruntime_go cannot wrap an empty Go slice.
		return nil, fmt.Errorf("empty tensor of shape %v", shape)
	}
	return onnx.NewTensor(shape64(shape), data)
}

func toValue(t tensorio.Tensor) (onnx.Value, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	switch d := t.Data.(type) {
	case []float32:
		return newTensor(t.Shape, d)
	case []float64:
		return newTensor(t.Shape, d)
	case []int64:
		return newTensor(t.Shape, d)
	case []int32:
		return newTensor(t.Shape, d)
	case []int8:
		return newTensor(t.Shape, d)
	case []uint8:
		return newTensor(t.Shape, d)
	case []bool:
		return newTensor(t.Shape, d)
	}
	return nil, fmt.Errorf("element type %s is not supported as an input", t.DType)
}

func intShape(s onnx.Shape) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func fromValue(v onnx.Value) (tensorio.Tensor, error) {
	switch x := v.(type) {
	case *onnx.Tensor[float32]:
		return tensorio.Tensor{DType: tensorio.DTypeF32, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	case *onnx.Tensor[float64]:
		return tensorio.Tensor{DType: tensorio.DTypeF64, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	case *onnx.Tensor[int64]:
		return tensorio.Tensor{DType: tensorio.DTypeI64, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	case *onnx.Tensor[int32]:
		return tensorio.Tensor{DType: tensorio.DTypeI32, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	case *onnx.Tensor[int8]:
		return tensorio.Tensor{DType: tensorio.DTypeI8, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	case *onnx.Tensor[uint8]:
		return tensorio.Tensor{DType: tensorio.DTypeU8, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	case *onnx.Tensor[bool]:
		return tensorio.Tensor{DType: tensorio.DTypeBool, Shape: intShape(x.GetShape()), Data: x.GetData()}, nil
	}
	return tensorio.Tensor{}, fmt.Errorf("output of type %T is not supported", v)
}
