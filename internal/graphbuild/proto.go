package graphbuild

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// ONNX TensorProto element types used here.
const (
	tFloat int32 = 1
	tInt64 int32 = 7
)

// node is a NodeProto to be written.
type node struct {
	op, domain string
	name       string
	in, out    []string
	attrs      []attr
}

// attr is an AttributeProto: one of an int, a float or a list of ints.
type attr struct {
	name string
	kind int32 // 1 float, 2 int, 7 ints
	f    float32
	i    int64
	ints []int64
}

func intAttr(name string, v int64) attr     { return attr{name: name, kind: 2, i: v} }
func floatAttr(name string, v float32) attr { return attr{name: name, kind: 1, f: v} }
func intsAttr(name string, v ...int64) attr { return attr{name: name, kind: 7, ints: v} }
func (n *node) with(a ...attr) *node        { n.attrs = append(n.attrs, a...); return n }

// valueInfo is a graph input or output: a tensor type and a shape whose
// dims are sizes (> 0) or symbolic names.
type valueInfo struct {
	name string
	elem int32
	dims []any // int64 or string
}

// initializer is a constant tensor. Small ones hold their values; large
// ones (weights) are produced by fill when the file is written, so that
// only one weight is in memory at a time.
type initializer struct {
	name   string
	dims   []int64
	dtype  int32
	int64s []int64   // small int64 constants
	floats []float32 // small float constants
	fill   func() ([]float32, error)
	// external: written to the external data file at offset.
	external bool
	offset   int64
}

// nbytes is the size of the tensor's raw data.
func (t *initializer) nbytes() int64 {
	n := int64(1)
	for _, d := range t.dims {
		n *= d
	}
	if t.dtype == tInt64 {
		return 8 * n
	}
	return 4 * n
}

// values returns the tensor's raw little-endian bytes.
func (t *initializer) values() ([]byte, error) {
	switch {
	case t.int64s != nil:
		b := make([]byte, 0, 8*len(t.int64s))
		for _, v := range t.int64s {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b, nil
	case t.floats != nil || t.fill == nil:
		return floatBytes(t.floats), nil
	}
	v, err := t.fill()
	if err != nil {
		return nil, err
	}
	if int64(len(v))*4 != t.nbytes() {
		return nil, fmt.Errorf("tensor %s: %d values made for shape %v", t.name, len(v), t.dims)
	}
	return floatBytes(v), nil
}

// nativeLE is whether this machine stores numbers little-endian, as ONNX
// and safetensors files do.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// floatView returns the bytes of v in machine order (no copy).
func floatView(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// floatBytes returns the little-endian bytes of v (v's own memory on a
// little-endian machine).
func floatBytes(v []float32) []byte {
	if nativeLE {
		return floatView(v)
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// graph is a GraphProto being assembled.
type graph struct {
	name    string
	nodes   []*node
	inits   []*initializer
	inputs  []valueInfo
	outputs []valueInfo
	seq     int
	names   map[string]bool
}

func newGraph(name string) *graph { return &graph{name: name, names: map[string]bool{}} }

// tmp returns a fresh value name with the given stem.
func (g *graph) tmp(stem string) string {
	for {
		g.seq++
		n := fmt.Sprintf("%s_%d", stem, g.seq)
		if !g.names[n] {
			g.names[n] = true
			return n
		}
	}
}

// op appends a node with one output (named after stem unless out is given)
// and returns it.
func (g *graph) op(op string, out string, in ...string) string {
	if out == "" {
		out = g.tmp(op)
	}
	g.nodes = append(g.nodes, &node{op: op, name: out, in: in, out: []string{out}})
	return out
}

// last returns the node appended last, to add attributes or a domain.
func (g *graph) last() *node { return g.nodes[len(g.nodes)-1] }

func (g *graph) addInit(t *initializer) string {
	g.names[t.name] = true
	g.inits = append(g.inits, t)
	return t.name
}

// constInts adds an int64 constant.
func (g *graph) constInts(stem string, dims []int64, v ...int64) string {
	return g.addInit(&initializer{name: g.tmp(stem), dims: dims, dtype: tInt64, int64s: v})
}

// constFloats adds a small float constant.
func (g *graph) constFloats(stem string, dims []int64, v ...float32) string {
	return g.addInit(&initializer{name: g.tmp(stem), dims: dims, dtype: tFloat, floats: v})
}

// weight adds a float32 tensor made by fill when the graph is written.
func (g *graph) weight(name string, dims []int64, fill func() ([]float32, error)) string {
	return g.addInit(&initializer{name: name, dims: dims, dtype: tFloat, fill: fill})
}

// Encoding. The graph's size is known before any weight is read (every
// initializer's size follows from its shape), so the model is streamed:
// headers, then each weight's bytes as it is made.

func encodeAttr(a attr) []byte {
	var b []byte
	b = appendString(b, 1, a.name)
	switch a.kind {
	case 1:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(a.f))
	case 2:
		b = appendVarint(b, 3, uint64(a.i))
	case 7:
		for _, v := range a.ints {
			b = appendVarint(b, 8, uint64(v))
		}
	}
	return appendVarint(b, 20, uint64(a.kind))
}

func encodeNode(n *node) []byte {
	var b []byte
	for _, s := range n.in {
		b = appendString(b, 1, s)
	}
	for _, s := range n.out {
		b = appendString(b, 2, s)
	}
	b = appendString(b, 3, n.name)
	b = appendString(b, 4, n.op)
	for _, a := range n.attrs {
		b = appendBytes(b, 5, encodeAttr(a))
	}
	if n.domain != "" {
		b = appendString(b, 7, n.domain)
	}
	return b
}

func encodeValueInfo(v valueInfo) []byte {
	var shape []byte
	for _, d := range v.dims {
		var db []byte
		switch x := d.(type) {
		case int64:
			db = appendVarint(db, 1, uint64(x))
		case int:
			db = appendVarint(db, 1, uint64(x))
		case string:
			db = appendString(db, 2, x)
		}
		shape = appendBytes(shape, 1, db)
	}
	var tt []byte
	tt = appendVarint(tt, 1, uint64(v.elem))
	tt = appendBytes(tt, 2, shape)
	var typ []byte
	typ = appendBytes(typ, 1, tt)
	var b []byte
	b = appendString(b, 1, v.name)
	return appendBytes(b, 2, typ)
}

// tensorHeader returns a TensorProto without its raw_data field, and the
// length of the raw_data field (tag, length and payload) to follow, 0 when
// the data is external (at location).
func tensorHeader(t *initializer, location string) (hdr []byte, dataField int64) {
	var b []byte
	for _, d := range t.dims {
		b = appendVarint(b, 1, uint64(d))
	}
	b = appendVarint(b, 2, uint64(t.dtype))
	b = appendString(b, 8, t.name)
	if t.external {
		for _, kv := range [][2]string{{"location", location}, {"offset", fmt.Sprint(t.offset)}, {"length", fmt.Sprint(t.nbytes())}} {
			var e []byte
			e = appendString(e, 1, kv[0])
			e = appendString(e, 2, kv[1])
			b = appendBytes(b, 13, e)
		}
		b = appendVarint(b, 14, 1)
		return b, 0
	}
	n := t.nbytes()
	return b, int64(protowire.SizeTag(9)) + int64(protowire.SizeVarint(uint64(n))) + n
}

// writeModel writes the ModelProto of g (opsets: domain → version) to w,
// reading each weight in turn. Initializers marked external are left out
// of w: their TensorProtos point at location.
func writeModel(w io.Writer, g *graph, opsets map[string]int64, producer, location string) error {
	// The graph's parts before and after the initializers.
	var pre []byte
	for _, n := range g.nodes {
		pre = appendBytes(pre, 1, encodeNode(n))
	}
	pre = appendString(pre, 2, g.name)
	var post []byte
	for _, v := range g.inputs {
		post = appendBytes(post, 11, encodeValueInfo(v))
	}
	for _, v := range g.outputs {
		post = appendBytes(post, 12, encodeValueInfo(v))
	}
	type part struct {
		hdr  []byte
		data int64
	}
	parts := make([]part, len(g.inits))
	size := int64(len(pre) + len(post))
	for i, t := range g.inits {
		h, d := tensorHeader(t, location)
		parts[i] = part{h, d}
		msg := int64(len(h)) + d
		size += int64(protowire.SizeTag(5)) + int64(protowire.SizeVarint(uint64(msg))) + msg
	}
	var head []byte
	head = appendVarint(head, 1, 8) // ir_version 8 (ONNX 1.13+)
	head = appendString(head, 2, producer)
	for _, dom := range []string{"", msDomain} {
		if v, ok := opsets[dom]; ok {
			var o []byte
			if dom != "" {
				o = appendString(o, 1, dom)
			}
			o = appendVarint(o, 2, uint64(v))
			head = appendBytes(head, 8, o)
		}
	}
	head = protowire.AppendTag(head, 7, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(size))
	head = append(head, pre...)
	if _, err := w.Write(head); err != nil {
		return err
	}
	for i, t := range g.inits {
		p := parts[i]
		msg := int64(len(p.hdr)) + p.data
		var b []byte
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(msg))
		b = append(b, p.hdr...)
		if p.data > 0 {
			b = protowire.AppendTag(b, 9, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(t.nbytes()))
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if p.data > 0 {
			v, err := t.values()
			if err != nil {
				return err
			}
			if _, err := w.Write(v); err != nil {
				return err
			}
		}
	}
	_, err := w.Write(post)
	return err
}

// writeExternal writes the data of the external initializers of g, each at
// its offset (zero padding between them).
func writeExternal(w io.Writer, g *graph) error {
	var at int64
	for _, t := range g.inits {
		if !t.external {
			continue
		}
		if t.offset > at {
			if _, err := w.Write(make([]byte, t.offset-at)); err != nil {
				return err
			}
			at = t.offset
		}
		v, err := t.values()
		if err != nil {
			return err
		}
		if _, err := w.Write(v); err != nil {
			return err
		}
		at += int64(len(v))
	}
	return nil
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

const msDomain = "com.microsoft"
