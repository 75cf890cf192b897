package ort

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	onnx "github.com/yalue/onnxruntime_go"

	"github.com/conditionhq/condition/tensorio"
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

// TypeName returns the element type of a tensor ("float16"), or "not a
// tensor": what errors call the value's type.
func (i IOInfo) TypeName() string {
	if !i.Tensor {
		return "not a tensor"
	}
	return i.Type.String()
}

// ListIO lists inputs or outputs for errors: "input_ids int64[-1 -1], attention_mask int64[-1 -1]".
func ListIO(infos []IOInfo) string {
	s := make([]string, len(infos))
	for i, x := range infos {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}

// Dim returns dimension k of the shape when the graph fixes it, else 0.
func (i IOInfo) Dim(k int) int { return i.DimOr(k, 0) }

// DimOr returns dimension k of the shape when the graph fixes it, else def.
func (i IOInfo) DimOr(k, def int) int {
	if k >= 0 && k < len(i.Shape) && i.Shape[k] > 0 {
		return int(i.Shape[k])
	}
	return def
}

// IsFloat reports whether t is float32, float16 or bfloat16: the floating
// types a session converts to and from float32 (see Output).
func (t ElementType) IsFloat() bool {
	return t == ElementFloat32 || t == ElementFloat16 || t == ElementBFloat16
}

// ensureLoaded loads ONNX Runtime with the default search, logging nothing,
// if nothing is loaded yet.
func ensureLoaded() error {
	if Loaded() != nil {
		return nil
	}
	_, err := Load(LoadOptions{})
	return err
}

// Inspect returns the inputs and outputs of an ONNX graph held in memory.
// name (a file path, or a path inside a model) is used in errors. ONNX
// Runtime is loaded with the default search if it is not loaded yet. See
// Graph for graphs on disk.
func Inspect(graph []byte, name string) (inputs, outputs []IOInfo, err error) {
	return GraphBytes(graph, name).Inspect()
}

// SessionOptions controls NewSession.
type SessionOptions struct {
	// Threads is ONNX Runtime's intra-op thread count; 0 leaves ONNX Runtime's default.
	Threads int
	// NoSpinning stops ONNX Runtime's intra-op threads from spinning while
	// they wait for work, so that they leave the cores to other stages of a
	// pipeline (decoding, attention) between runs.
	NoSpinning bool
	// NoArena turns ONNX Runtime's CPU memory arena off (buffers are
	// allocated per run instead of kept in a growing pool).
	NoArena bool
	// PinThreads pins ONNX Runtime's intra-op pool threads (Threads − 1 of
	// them; the calling thread is not one) to one logical processor each.
	PinThreads bool
	// NoPrepack leaves weights as the graph holds them instead of packing
	// them for the matrix kernels when the session is made: the session
	// starts sooner and touches no memory beyond a mapped graph's weights
	// (see models.Model.MapGraphs), and each run packs what it multiplies
	// (a few per cent slower for a ViT-B/32 at batch 8 here).
	NoPrepack bool
	// ProfilePrefix, when set, makes ONNX Runtime write a profile of every
	// node's run (Chrome trace JSON) to a file named from it, when the
	// session closes.
	ProfilePrefix string
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
// the named outputs. name is used in errors. See Graph.NewSession for graphs
// on disk.
func NewSession(graph []byte, name string, inputs, outputs []string, opts SessionOptions) (*Session, error) {
	return GraphBytes(graph, name).NewSession(inputs, outputs, opts)
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

// Output describes an output that Run allocates before the run for ONNX
// Runtime to write into: a tensor of Type and Shape. float16 and bfloat16
// outputs need one (onnxruntime_go v1.27.0 copies only half of the bytes of
// a 2-byte output that ONNX Runtime allocated, and fails); for other types
// the zero Output, which lets ONNX Runtime allocate the output, is enough.
// Type may be ElementFloat32, ElementFloat16 or ElementBFloat16.
type Output struct {
	Type  ElementType
	Shape []int
}

// NeedsShape reports whether Run needs the shape of an output of type t in
// advance: float16 and bfloat16 (see Output).
func (t ElementType) NeedsShape() bool { return t == ElementFloat16 || t == ElementBFloat16 }

// OutputFor returns what Run needs to know of an output of type t and the
// given shape: the shape for float16 and bfloat16 outputs, nothing for others.
func OutputFor(t ElementType, shape ...int) Output {
	if !t.NeedsShape() {
		return Output{}
	}
	return Output{Type: t, Shape: shape}
}

// Run feeds in (one tensor per input, in the order given to NewSession) and
// returns the outputs in order, as Go-owned tensors. Inputs may be float16
// and bfloat16 tensors (tensorio.DTypeF16 and DTypeBF16, raw bits in
// []uint16); so may outputs, which come back the same way. outs is empty, or
// has one Output per output (see Output). Cancelling ctx terminates a run in
// progress.
func (s *Session) Run(ctx context.Context, in []tensorio.Tensor, outs ...Output) ([]tensorio.Tensor, error) {
	if len(in) != len(s.inputs) {
		return nil, fmt.Errorf("ort: %s: %d input tensors for %d inputs %v", s.name, len(in), len(s.inputs), s.inputs)
	}
	if len(outs) != 0 && len(outs) != len(s.outputs) {
		return nil, fmt.Errorf("ort: %s: %d output descriptions for %d outputs %v", s.name, len(outs), len(s.outputs), s.outputs)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vals := make([]onnx.Value, len(in))
	defer destroyAll(vals)
	for i, t := range in {
		v, err := toValue(t)
		if err != nil {
			return nil, fmt.Errorf("ort: %s: input %s: %w", s.name, s.inputs[i], err)
		}
		vals[i] = v
	}
	outVals := make([]onnx.Value, len(s.outputs))
	defer destroyAll(outVals)
	res := make([]tensorio.Tensor, len(s.outputs))
	for i, o := range outs {
		if o.Type == ElementUndefined && o.Shape == nil {
			continue
		}
		t, v, err := allocOutput(o)
		if err != nil {
			return nil, fmt.Errorf("ort: %s: output %s: %w", s.name, s.outputs[i], err)
		}
		res[i], outVals[i] = t, v
	}
	ro, err := onnx.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("ort: %s: run options: %w", s.name, err)
	}
	// Cancelling ctx terminates the run. The options are destroyed only when
	// no terminate is under way or still to come: stop keeps the terminate
	// from starting, or, when it has started, Run waits for it to end.
	terminated := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(terminated)
		_ = terminateRunOptions(ro)
	})
	defer func() {
		if !stop() {
			<-terminated
		}
		_ = destroyRunOptions(ro)
	}()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.s == nil {
		return nil, ErrClosed
	}
	if err := s.s.RunWithOptions(vals, outVals, ro); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ort: %s: run: %w", s.name, err)
	}
	for i, v := range outVals {
		if res[i].Data != nil {
			continue // allocated above, written in place
		}
		t, err := fromValue(v)
		if err != nil {
			return nil, fmt.Errorf("ort: %s: output %s: %w", s.name, s.outputs[i], err)
		}
		res[i] = t
	}
	return res, nil
}

// terminateRunOptions and destroyRunOptions are the calls Run makes on a
// run's options; tests wrap them to check the order of the two.
var (
	terminateRunOptions = (*onnx.RunOptions).Terminate
	destroyRunOptions   = (*onnx.RunOptions).Destroy
)

func destroyAll(vs []onnx.Value) {
	for _, v := range vs {
		if v != nil {
			v.Destroy()
		}
	}
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

// newHalfTensor wraps 2-byte floats (raw bits) without copying them.
func newHalfTensor(shape []int, bits []uint16, t onnx.TensorElementDataType) (onnx.Value, error) {
	if len(bits) == 0 {
		return nil, fmt.Errorf("empty tensor of shape %v", shape)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&bits[0])), 2*len(bits))
	return onnx.NewCustomDataTensor(shape64(shape), b, t)
}

// allocOutput allocates an output tensor that ONNX Runtime writes into.
func allocOutput(o Output) (tensorio.Tensor, onnx.Value, error) {
	n := 1
	for _, d := range o.Shape {
		if d <= 0 {
			return tensorio.Tensor{}, nil, fmt.Errorf("cannot allocate an output of shape %v", o.Shape)
		}
		n *= d
	}
	shape := append([]int(nil), o.Shape...)
	switch o.Type {
	case ElementFloat32:
		d := make([]float32, n)
		v, err := newTensor(shape, d)
		return tensorio.F32(shape, d), v, err
	case ElementFloat16, ElementBFloat16:
		d := make([]uint16, n)
		dt, ot := tensorio.DTypeF16, onnx.TensorElementDataType(onnx.TensorElementDataTypeFloat16)
		if o.Type == ElementBFloat16 {
			dt, ot = tensorio.DTypeBF16, onnx.TensorElementDataTypeBFloat16
		}
		v, err := newHalfTensor(shape, d, ot)
		return tensorio.Tensor{DType: dt, Shape: shape, Data: d}, v, err
	}
	return tensorio.Tensor{}, nil, fmt.Errorf("cannot allocate an output of type %s", o.Type)
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
	case []uint16:
		if t.DType == tensorio.DTypeBF16 {
			return newHalfTensor(t.Shape, d, onnx.TensorElementDataTypeBFloat16)
		}
		return newHalfTensor(t.Shape, d, onnx.TensorElementDataTypeFloat16)
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
