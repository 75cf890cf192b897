package onnxgraph

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// AttributeProto types.
const (
	AttrFloat  int32 = 1
	AttrInt    int32 = 2
	AttrString int32 = 3
	AttrTensor int32 = 4
	AttrFloats int32 = 6
	AttrInts   int32 = 7
)

// MSDomain is the domain of ONNX Runtime's contrib operators.
const MSDomain = "com.microsoft"

// IntAttr, FloatAttr, IntsAttr and StringAttr make attributes for new nodes.
func IntAttr(name string, v int64) *Attr { return &Attr{Name: name, Type: AttrInt, I: v} }

// FloatAttr makes a float attribute.
func FloatAttr(name string, v float32) *Attr { return &Attr{Name: name, Type: AttrFloat, F: v} }

// IntsAttr makes an integer list attribute.
func IntsAttr(name string, v ...int64) *Attr { return &Attr{Name: name, Type: AttrInts, Ints: v} }

// StringAttr makes a string attribute.
func StringAttr(name, v string) *Attr { return &Attr{Name: name, Type: AttrString, S: []byte(v)} }

func encodeAttr(a *Attr) []byte {
	var b []byte
	b = appendStringField(b, 1, a.Name)
	typ := a.Type
	if typ == 0 {
		typ = AttrInt
	}
	switch typ {
	case AttrFloat:
		b = protowire.AppendFixed32(protowire.AppendTag(b, 2, protowire.Fixed32Type), math.Float32bits(a.F))
	case AttrInt:
		b = appendVarintField(b, 3, uint64(a.I))
	case AttrString:
		b = appendBytesField(b, 4, a.S)
	case AttrTensor:
		b = appendBytesField(b, 5, encodeTensor(a.T))
	case AttrFloats:
		var p []byte
		for _, f := range a.Floats {
			p = protowire.AppendFixed32(p, math.Float32bits(f))
		}
		b = appendBytesField(b, 7, p)
	case AttrInts:
		var p []byte
		for _, v := range a.Ints {
			p = protowire.AppendVarint(p, uint64(v))
		}
		b = appendBytesField(b, 8, p)
	}
	return appendVarintField(b, 20, uint64(typ))
}

// encodeTensor encodes a TensorProto with its data as raw_data (Floats,
// Int64s and Int32s are converted). External tensors are not encoded here.
func encodeTensor(t *Tensor) []byte {
	b := tensorHead(t)
	if t.Raw != nil {
		return append(b, t.Raw...)
	}
	var buf bytes.Buffer
	buf.Write(b)
	writeTensorData(&buf, t, nil) // a bytes.Buffer does not fail
	return buf.Bytes()
}

// tensorHead encodes a TensorProto's fields up to its raw_data's tag and
// length: dims, data type, name; writeTensorData's bytes follow.
func tensorHead(t *Tensor) []byte {
	var b []byte
	if len(t.Dims) > 0 {
		var p []byte
		for _, d := range t.Dims {
			p = protowire.AppendVarint(p, uint64(d))
		}
		b = appendBytesField(b, 1, p)
	}
	b = appendVarintField(b, 2, uint64(t.DataType))
	b = appendStringField(b, 8, t.Name)
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(tensorDataLen(t)))
}

// tensorDataLen is the length of t's values as raw_data: Raw, else Floats,
// Int64s or Int32s in little-endian order.
func tensorDataLen(t *Tensor) int {
	switch {
	case t.Raw != nil:
		return len(t.Raw)
	case t.Floats != nil:
		return 4 * len(t.Floats)
	case t.Int64s != nil:
		return 8 * len(t.Int64s)
	case t.Int32s != nil:
		return 4 * len(t.Int32s)
	}
	return 0
}

// writeTensorData writes t's values as raw_data (tensorDataLen bytes),
// converting them a block at a time in scratch, which it returns for
// reuse.
func writeTensorData(w io.Writer, t *Tensor, scratch []byte) ([]byte, error) {
	if t.Raw != nil {
		_, err := w.Write(t.Raw)
		return scratch, err
	}
	const block = 64 << 10 // bytes
	if cap(scratch) < block {
		scratch = make([]byte, block)
	}
	scratch = scratch[:block]
	flush := func(n int) error {
		_, err := w.Write(scratch[:n])
		return err
	}
	n := 0
	switch {
	case t.Floats != nil:
		for _, f := range t.Floats {
			if n+4 > block {
				if err := flush(n); err != nil {
					return scratch, err
				}
				n = 0
			}
			binary.LittleEndian.PutUint32(scratch[n:], math.Float32bits(f))
			n += 4
		}
	case t.Int64s != nil:
		for _, v := range t.Int64s {
			if n+8 > block {
				if err := flush(n); err != nil {
					return scratch, err
				}
				n = 0
			}
			binary.LittleEndian.PutUint64(scratch[n:], uint64(v))
			n += 8
		}
	case t.Int32s != nil:
		for _, v := range t.Int32s {
			if n+4 > block {
				if err := flush(n); err != nil {
					return scratch, err
				}
				n = 0
			}
			binary.LittleEndian.PutUint32(scratch[n:], uint32(v))
			n += 4
		}
	}
	return scratch, flush(n)
}

// FloatTensor returns a float32 tensor named name of shape dims holding v.
func FloatTensor(name string, dims []int64, v []float32) *Tensor {
	return &Tensor{Name: name, Dims: dims, DataType: Float, Floats: v}
}

// Float32Values returns the values of a float32 tensor held in the model
// (not external data).
func (t *Tensor) Float32Values() ([]float32, bool) {
	if t.DataType != Float || t.External {
		return nil, false
	}
	if t.Raw != nil {
		if len(t.Raw)%4 != 0 {
			return nil, false
		}
		v := make([]float32, len(t.Raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Raw[4*i:]))
		}
		return v, true
	}
	return t.Floats, true
}

// NumElements returns the product of the tensor's dims.
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// editor holds a graph being rewritten: its nodes (kept ones carry the
// bytes they were parsed from), the initializers (the model's and new ones)
// and the indexes the fusions look things up in.
type editor struct {
	m        *Model
	nodes    []*Node
	order    map[*Node]float64 // position in the node list; new nodes sit just before the node they replace
	inits    map[string]*Tensor
	newInits []*Tensor
	outputs  map[string]bool // graph outputs
	producer map[string]*Node
	users    map[string][]*Node
	seq      int // for unique names
}

func newEditor(m *Model) *editor {
	e := &editor{m: m, order: map[*Node]float64{}, inits: map[string]*Tensor{}, outputs: map[string]bool{}}
	for i := range m.Graph.Nodes {
		n := m.Graph.Nodes[i]
		e.nodes = append(e.nodes, &n)
		e.order[&n] = float64(i)
	}
	for k, t := range m.Graph.Initializers {
		e.inits[k] = t
	}
	for _, o := range m.Graph.Outputs {
		e.outputs[o.Name] = true
	}
	e.reindex()
	return e
}

// reindex rebuilds producer and users after nodes were removed or added.
func (e *editor) reindex() {
	e.producer = map[string]*Node{}
	e.users = map[string][]*Node{}
	for _, n := range e.nodes {
		for _, o := range n.Outputs {
			if o != "" {
				e.producer[o] = n
			}
		}
		for _, in := range n.Inputs {
			if in != "" {
				e.users[in] = append(e.users[in], n)
			}
		}
	}
}

// node returns the node computing v, or nil.
func (e *editor) node(v string) *Node { return e.producer[v] }

// uses counts the consumers of v, a graph output counting as one.
func (e *editor) uses(v string) int {
	n := len(e.users[v])
	if e.outputs[v] {
		n++
	}
	return n
}

// only reports whether v has exactly one consumer and is not a graph output.
func (e *editor) only(v string) bool { return len(e.users[v]) == 1 && !e.outputs[v] }

// tensor returns the constant tensor v (an initializer or a Constant's value).
func (e *editor) tensor(v string) *Tensor {
	if t, ok := e.inits[v]; ok {
		return t
	}
	if n := e.node(v); n != nil && n.OpType == "Constant" && len(n.Inputs) == 0 {
		if a, ok := n.Attrs["value"]; ok && a.T != nil {
			return a.T
		}
		if a, ok := n.Attrs["value_float"]; ok {
			return &Tensor{DataType: Float, Floats: []float32{a.F}}
		}
		if a, ok := n.Attrs["value_int"]; ok {
			return &Tensor{DataType: Int64, Int64s: []int64{a.I}}
		}
		if a, ok := n.Attrs["value_ints"]; ok {
			return &Tensor{DataType: Int64, Dims: []int64{int64(len(a.Ints))}, Int64s: a.Ints}
		}
	}
	return nil
}

func (e *editor) isConst(v string) bool { return e.tensor(v) != nil }

// scalar returns the value of a constant float holding one element.
func (e *editor) scalar(v string) (float32, bool) {
	t := e.tensor(v)
	if t == nil || t.NumElements() != 1 {
		return 0, false
	}
	f, ok := t.Float32Values()
	if !ok || len(f) != 1 {
		return 0, false
	}
	return f[0], true
}

// ints returns the values of a constant integer tensor.
func (e *editor) ints(v string) ([]int64, bool) {
	t := e.tensor(v)
	if t == nil {
		return nil, false
	}
	return t.Int64Values()
}

// floats returns the values of a constant float tensor and its dims.
func (e *editor) floats(v string) ([]float32, []int64, bool) {
	t := e.tensor(v)
	if t == nil {
		return nil, nil, false
	}
	f, ok := t.Float32Values()
	if !ok || int64(len(f)) != t.NumElements() {
		return nil, nil, false
	}
	return f, t.Dims, true
}

// perm returns a Transpose's perm attribute.
func perm(n *Node) []int64 {
	if a, ok := n.Attrs["perm"]; ok {
		return a.Ints
	}
	return nil
}

func equalInts(a []int64, b ...int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// name returns a new value or node name with the given stem.
func (e *editor) name(stem string) string {
	for {
		e.seq++
		n := fmt.Sprintf("condition_%s_%d", stem, e.seq)
		if e.producer[n] == nil && e.inits[n] == nil && e.users[n] == nil {
			return n
		}
	}
}

// addInit adds a new initializer.
func (e *editor) addInit(t *Tensor) string {
	e.inits[t.Name] = t
	e.newInits = append(e.newInits, t)
	return t.Name
}

// replace removes the nodes old and puts the nodes new where the last of
// old was (the fused nodes read only values computed before it). Indexes
// are rebuilt by the caller with reindex.
func (e *editor) replace(old []*Node, new ...*Node) {
	drop := map[*Node]bool{}
	pos := math.Inf(-1)
	for _, n := range old {
		drop[n] = true
		if e.order[n] > pos {
			pos = e.order[n]
		}
	}
	kept := e.nodes[:0]
	for _, n := range e.nodes {
		if !drop[n] {
			kept = append(kept, n)
		}
	}
	e.nodes = kept
	for i, n := range new {
		e.order[n] = pos - 0.5 + 0.5*float64(i+1)/float64(len(new)+1)
		e.nodes = append(e.nodes, n)
	}
	for _, n := range old {
		delete(e.order, n)
	}
	// Keep e.nodes sorted by position so that later fusions see a
	// topological order.
	sort.SliceStable(e.nodes, func(i, j int) bool { return e.order[e.nodes[i]] < e.order[e.nodes[j]] })
	for i, n := range e.nodes {
		e.order[n] = float64(i)
	}
	// Indexes stay valid for lookups of untouched values until reindex.
	for _, n := range old {
		for _, o := range n.Outputs {
			if e.producer[o] == n {
				delete(e.producer, o)
			}
		}
	}
	for _, n := range new {
		for _, o := range n.Outputs {
			if o != "" {
				e.producer[o] = n
			}
		}
	}
}

// prune removes nodes none of whose outputs is used (the shape arithmetic
// the fused subgraphs no longer need).
func (e *editor) prune() {
	for {
		e.reindex()
		kept := e.nodes[:0]
		removed := false
		for _, n := range e.nodes {
			used := false
			for _, o := range n.Outputs {
				if o != "" && e.uses(o) > 0 {
					used = true
				}
			}
			if used {
				kept = append(kept, n)
			} else {
				removed = true
			}
		}
		e.nodes = kept
		if !removed {
			return
		}
	}
}

// write writes the edited model: the graph's nodes replaced by e.nodes,
// initializers no node uses dropped, new initializers added, value_info of
// values no longer computed dropped and the com.microsoft opset imported
// when a node needs it. Every other field is copied as it was. The model
// is written as it is assembled, a piece at a time: the kept fields are
// slices of the model's bytes and the new initializers' values are
// encoded as they are written, so that writing holds no copy of the graph
// (a mapped model's weights stay in the page cache).
func (e *editor) write(w io.Writer) error {
	e.prune()
	used := map[string]bool{}
	for _, n := range e.nodes {
		for _, in := range n.Inputs {
			used[in] = true
		}
	}
	for o := range e.outputs {
		used[o] = true
	}
	present := map[string]bool{}
	for _, n := range e.nodes {
		for _, o := range n.Outputs {
			present[o] = true
		}
	}
	for _, in := range e.m.Graph.Inputs {
		present[in.Name] = true
	}
	var gb pieces
	wroteNodes := false
	writeNodes := func() {
		for _, n := range e.nodes {
			gb.bytes(appendBytesField(nil, 1, nodeBytes(n)))
		}
		wroteNodes = true
	}
	err := fields(e.m.graphField.bytes, func(f field) error {
		raw := e.m.graphField.bytes[f.start:f.end]
		switch {
		case f.num == 1 && f.wire == protowire.BytesType: // node
			if !wroteNodes {
				writeNodes()
			}
			return nil
		case f.num == 5 && f.wire == protowire.BytesType: // initializer
			name, err := tensorName(f.bytes)
			if err != nil {
				return err
			}
			if !used[name] {
				return nil
			}
		case f.num == 11 && f.wire == protowire.BytesType: // input
			v, err := parseValueInfo(f.bytes)
			if err != nil {
				return err
			}
			if _, isInit := e.m.Graph.Initializers[v.Name]; isInit && !used[v.Name] {
				return nil
			}
		case f.num == 13 && f.wire == protowire.BytesType: // value_info
			v, err := parseValueInfo(f.bytes)
			if err != nil {
				return err
			}
			if !present[v.Name] {
				return nil
			}
		}
		gb.bytes(raw)
		return nil
	})
	if err != nil {
		return fmt.Errorf("onnxgraph: write: %w", err)
	}
	if !wroteNodes {
		writeNodes()
	}
	for _, t := range e.newInits {
		if used[t.Name] {
			head := tensorHead(t)
			gb.bytes(protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.BytesType), uint64(len(head))+uint64(tensorDataLen(t))))
			gb.bytes(head)
			gb.tensor(t)
		}
	}
	needMS := false
	for _, n := range e.nodes {
		if n.Domain == MSDomain {
			needMS = true
		}
	}
	var mb pieces
	err = fields(e.m.raw, func(f field) error {
		if f.num == 7 && f.wire == protowire.BytesType {
			mb.bytes(protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.BytesType), uint64(gb.n)))
			mb.append(&gb)
			return nil
		}
		mb.bytes(e.m.raw[f.start:f.end])
		return nil
	})
	if err != nil {
		return fmt.Errorf("onnxgraph: write: %w", err)
	}
	if _, ok := e.m.Opsets[MSDomain]; needMS && !ok {
		var op []byte
		op = appendStringField(op, 1, MSDomain)
		op = appendVarintField(op, 2, 1)
		mb.bytes(appendBytesField(nil, 8, op))
	}
	if err := mb.writeTo(w); err != nil {
		return fmt.Errorf("onnxgraph: write: %w", err)
	}
	return nil
}

// pieces is an encoded message assembled in order from byte slices,
// written as they are, and tensors whose values are encoded as raw_data
// when written (see writeTensorData).
type pieces struct {
	list []piece
	n    int // bytes in all
}

type piece struct {
	b []byte
	t *Tensor
}

func (p *pieces) bytes(b []byte) {
	p.list = append(p.list, piece{b: b})
	p.n += len(b)
}

func (p *pieces) tensor(t *Tensor) {
	p.list = append(p.list, piece{t: t})
	p.n += tensorDataLen(t)
}

func (p *pieces) append(q *pieces) {
	p.list = append(p.list, q.list...)
	p.n += q.n
}

// writeTo writes the pieces to w through a buffer: a model has thousands
// of small pieces (nodes) and a few large ones (weights).
func (p *pieces) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var scratch []byte
	for _, x := range p.list {
		if x.t == nil {
			if _, err := bw.Write(x.b); err != nil {
				return err
			}
			continue
		}
		if x.t.Raw != nil {
			if _, err := bw.Write(x.t.Raw); err != nil {
				return err
			}
			continue
		}
		var err error
		scratch, err = writeTensorData(bw, x.t, scratch)
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// tensorName reads a TensorProto's name.
func tensorName(b []byte) (name string, err error) {
	err = fields(b, func(f field) error {
		if f.num == 8 && f.wire == protowire.BytesType {
			name = string(f.bytes)
		}
		return nil
	})
	return name, err
}

// nodeBytes returns a node's NodeProto: the bytes it was parsed from, or
// its encoding when it was made here.
func nodeBytes(n *Node) []byte {
	if n.raw != nil {
		return n.raw
	}
	return encodeNode(*n)
}

// Build encodes g as a ModelProto with the given opset imports (domain ""
// for ai.onnx) and IR version 8: its nodes, initializers (in the model,
// not external), inputs and outputs. It is for making small graphs, in
// tests and tools; value_info is not written.
func Build(g *Graph, opsets map[string]int64) []byte {
	var gb []byte
	for i := range g.Nodes {
		gb = appendBytesField(gb, 1, nodeBytes(&g.Nodes[i]))
	}
	gb = appendStringField(gb, 2, g.Name)
	names := make([]string, 0, len(g.Initializers))
	for k := range g.Initializers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t := *g.Initializers[k]
		t.Name = k
		gb = appendBytesField(gb, 5, encodeTensor(&t))
	}
	for _, v := range g.Inputs {
		gb = appendBytesField(gb, 11, encodeValueInfo(v))
	}
	for _, v := range g.Outputs {
		gb = appendBytesField(gb, 12, encodeValueInfo(v))
	}
	var mb []byte
	mb = appendVarintField(mb, 1, 8)
	mb = appendStringField(mb, 2, "condition")
	mb = appendBytesField(mb, 7, gb)
	doms := make([]string, 0, len(opsets))
	for d := range opsets {
		doms = append(doms, d)
	}
	sort.Strings(doms)
	for _, d := range doms {
		var op []byte
		if d != "" {
			op = appendStringField(op, 1, d)
		}
		op = appendVarintField(op, 2, uint64(opsets[d]))
		mb = appendBytesField(mb, 8, op)
	}
	return mb
}
