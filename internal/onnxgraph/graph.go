// Package onnxgraph reads the parts of an ONNX file (ModelProto → GraphProto)
// that the project needs without a protobuf library: nodes (op type, inputs,
// outputs, attributes), graph inputs and outputs with their element types and
// shapes, value_info and initializer names, shapes and small values. It can
// write the model back with nodes and outputs appended to its graph, leaving
// every other byte as it was; Expose uses that to add last_hidden_state to a
// CLIP export that outputs only pooled embeddings.
package onnxgraph

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// ONNX TensorProto element types.
const (
	Float   int32 = 1
	Uint8   int32 = 2
	Int8    int32 = 3
	Int32   int32 = 6
	Int64   int32 = 7
	Bool    int32 = 9
	Float16 int32 = 10
	Double  int32 = 11
	BFloat  int32 = 16
)

// ElemTypeName returns the ONNX name of an element type ("float", "float16", ...).
func ElemTypeName(t int32) string {
	switch t {
	case Float:
		return "float"
	case Uint8:
		return "uint8"
	case Int8:
		return "int8"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	case Float16:
		return "float16"
	case Double:
		return "double"
	case BFloat:
		return "bfloat16"
	case 0:
		return "undefined"
	}
	return fmt.Sprintf("type%d", t)
}

// Model is a parsed ONNX model. It keeps the bytes it was parsed from.
type Model struct {
	IRVersion int64
	Opsets    map[string]int64 // domain ("" for ai.onnx) → version
	Producer  string
	Graph     *Graph

	raw        []byte
	graphField field        // ModelProto.graph (field 7) in raw
	unmap      func() error // releases raw, for a model made by ParseFile
}

// Graph is a parsed GraphProto.
type Graph struct {
	Name         string
	Nodes        []Node
	Inputs       []ValueInfo
	Outputs      []ValueInfo
	ValueInfo    []ValueInfo
	Initializers map[string]*Tensor
}

// Node is a NodeProto.
type Node struct {
	Name    string
	OpType  string
	Domain  string
	Inputs  []string
	Outputs []string
	Attrs   map[string]*Attr

	raw []byte // the NodeProto it was parsed from; nil for a node made here
}

// Attr is an AttributeProto (the kinds the project reads).
type Attr struct {
	Name   string
	Type   int32
	I      int64
	F      float32
	S      []byte
	Ints   []int64
	Floats []float32
	T      *Tensor
}

// Int returns the attribute's integer value, or def when n has no attribute name.
func (n *Node) Int(name string, def int64) int64 {
	if a, ok := n.Attrs[name]; ok {
		return a.I
	}
	return def
}

// ValueInfo is a ValueInfoProto of a tensor: name, element type and shape.
type ValueInfo struct {
	Name     string
	ElemType int32 // 0 when not a tensor or not given
	Shape    []Dim // nil when the rank is unknown
	HasShape bool
	Tensor   bool // the type is a (dense) tensor type
}

// Dim is one dimension: a value, a symbolic name, or neither (unknown).
type Dim struct {
	Value int64
	Param string
}

func (d Dim) String() string {
	switch {
	case d.Param != "":
		return d.Param
	case d.Value > 0:
		return fmt.Sprint(d.Value)
	}
	return "?"
}

// Tensor is a TensorProto's description and, for small tensors, values.
type Tensor struct {
	Name     string
	Dims     []int64
	DataType int32
	External bool // data in an external file
	Location string
	Int64s   []int64
	Int32s   []int32
	Floats   []float32
	Raw      []byte // raw_data (a slice of the model's bytes)
}

// Int64Values returns the tensor's values as int64 (for int64 and int32 tensors).
func (t *Tensor) Int64Values() ([]int64, bool) {
	switch t.DataType {
	case Int64:
		if t.Raw != nil {
			if len(t.Raw)%8 != 0 {
				return nil, false
			}
			v := make([]int64, len(t.Raw)/8)
			for i := range v {
				v[i] = int64(binary.LittleEndian.Uint64(t.Raw[8*i:]))
			}
			return v, true
		}
		return t.Int64s, true
	case Int32:
		if t.Raw != nil {
			if len(t.Raw)%4 != 0 {
				return nil, false
			}
			v := make([]int64, len(t.Raw)/4)
			for i := range v {
				v[i] = int64(int32(binary.LittleEndian.Uint32(t.Raw[4*i:])))
			}
			return v, true
		}
		v := make([]int64, len(t.Int32s))
		for i, x := range t.Int32s {
			v[i] = int64(x)
		}
		return v, true
	}
	return nil, false
}

// Parse parses an ONNX model. b is kept (not copied) and must not change.
func Parse(b []byte) (*Model, error) {
	m := &Model{raw: b, Opsets: map[string]int64{}}
	haveGraph := false
	err := fields(b, func(f field) error {
		switch f.num {
		case 1:
			m.IRVersion = int64(f.v)
		case 2:
			if f.wire == protowire.BytesType {
				m.Producer = string(f.bytes)
			}
		case 7:
			if f.wire != protowire.BytesType {
				return fmt.Errorf("ModelProto.graph has wire type %d", f.wire)
			}
			if haveGraph {
				return fmt.Errorf("ModelProto has two graphs")
			}
			g, err := parseGraph(f.bytes)
			if err != nil {
				return fmt.Errorf("graph: %w", err)
			}
			m.Graph, m.graphField, haveGraph = g, f, true
		case 8:
			if f.wire != protowire.BytesType {
				return fmt.Errorf("opset_import has wire type %d", f.wire)
			}
			var dom string
			var ver int64
			if err := fields(f.bytes, func(o field) error {
				switch o.num {
				case 1:
					dom = string(o.bytes)
				case 2:
					ver = int64(o.v)
				}
				return nil
			}); err != nil {
				return err
			}
			if dom == "ai.onnx" {
				dom = ""
			}
			m.Opsets[dom] = ver
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("onnxgraph: not an ONNX model: %w", err)
	}
	if !haveGraph || m.IRVersion == 0 {
		return nil, fmt.Errorf("onnxgraph: not an ONNX model (no graph or no ir_version)")
	}
	return m, nil
}

func parseGraph(b []byte) (*Graph, error) {
	g := &Graph{Initializers: map[string]*Tensor{}}
	err := fields(b, func(f field) error {
		if f.wire != protowire.BytesType {
			return nil
		}
		switch f.num {
		case 1:
			n, err := parseNode(f.bytes)
			if err != nil {
				return fmt.Errorf("node %d: %w", len(g.Nodes), err)
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name = string(f.bytes)
		case 5:
			t, err := parseTensor(f.bytes)
			if err != nil {
				return fmt.Errorf("initializer: %w", err)
			}
			g.Initializers[t.Name] = t
		case 11, 12, 13:
			v, err := parseValueInfo(f.bytes)
			if err != nil {
				return err
			}
			switch f.num {
			case 11:
				g.Inputs = append(g.Inputs, v)
			case 12:
				g.Outputs = append(g.Outputs, v)
			default:
				g.ValueInfo = append(g.ValueInfo, v)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Graph inputs that are initializers (older exports list both) are not real inputs.
	ins := g.Inputs[:0]
	for _, in := range g.Inputs {
		if _, ok := g.Initializers[in.Name]; !ok {
			ins = append(ins, in)
		}
	}
	g.Inputs = ins
	return g, nil
}

func parseNode(b []byte) (Node, error) {
	n := Node{Attrs: map[string]*Attr{}, raw: b}
	err := fields(b, func(f field) error {
		if f.wire != protowire.BytesType {
			return nil
		}
		switch f.num {
		case 1:
			n.Inputs = append(n.Inputs, string(f.bytes))
		case 2:
			n.Outputs = append(n.Outputs, string(f.bytes))
		case 3:
			n.Name = string(f.bytes)
		case 4:
			n.OpType = string(f.bytes)
		case 7:
			n.Domain = string(f.bytes)
		case 5:
			a, err := parseAttr(f.bytes)
			if err != nil {
				return err
			}
			n.Attrs[a.Name] = a
		}
		return nil
	})
	if n.Domain == "ai.onnx" {
		n.Domain = ""
	}
	return n, err
}

func parseAttr(b []byte) (*Attr, error) {
	a := &Attr{}
	err := fields(b, func(f field) error {
		var err error
		switch f.num {
		case 1:
			a.Name = string(f.bytes)
		case 20:
			a.Type = int32(f.v)
		case 2:
			if f.wire == protowire.Fixed32Type {
				a.F = math.Float32frombits(uint32(f.v))
			}
		case 3:
			a.I = int64(f.v)
		case 4:
			a.S = f.bytes
		case 5:
			if f.wire == protowire.BytesType {
				a.T, err = parseTensor(f.bytes)
			}
		case 7:
			a.Floats, err = appendFloats(a.Floats, f)
		case 8:
			a.Ints, err = appendInts(a.Ints, f)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attribute %q: %w", a.Name, err)
	}
	return a, nil
}

func parseTensor(b []byte) (*Tensor, error) {
	t := &Tensor{}
	err := fields(b, func(f field) error {
		var err error
		switch f.num {
		case 1:
			t.Dims, err = appendInts(t.Dims, f)
		case 2:
			t.DataType = int32(f.v)
		case 4:
			t.Floats, err = appendFloats(t.Floats, f)
		case 5:
			var v []int64
			if v, err = appendInts(nil, f); err == nil {
				for _, x := range v {
					t.Int32s = append(t.Int32s, int32(x))
				}
			}
		case 7:
			t.Int64s, err = appendInts(t.Int64s, f)
		case 8:
			t.Name = string(f.bytes)
		case 9:
			t.Raw = f.bytes
			if t.Raw == nil {
				t.Raw = []byte{}
			}
		case 13: // external_data
			if k, v, _ := stringEntry(f.bytes); k == "location" {
				t.Location = v
			}
		case 14:
			t.External = f.v == 1
		}
		return err
	})
	return t, err
}

// stringEntry parses a StringStringEntryProto (key = 1, value = 2), as far
// as it is well formed.
func stringEntry(b []byte) (key, value string, err error) {
	err = fields(b, func(e field) error {
		switch e.num {
		case 1:
			key = string(e.bytes)
		case 2:
			value = string(e.bytes)
		}
		return nil
	})
	return key, value, err
}

func parseValueInfo(b []byte) (ValueInfo, error) {
	var v ValueInfo
	err := fields(b, func(f field) error {
		switch f.num {
		case 1:
			v.Name = string(f.bytes)
		case 2: // TypeProto
			return fields(f.bytes, func(tf field) error {
				if tf.num != 1 || tf.wire != protowire.BytesType { // tensor_type only
					return nil
				}
				v.Tensor = true
				return fields(tf.bytes, func(tt field) error {
					switch tt.num {
					case 1:
						v.ElemType = int32(tt.v)
					case 2:
						v.HasShape = true
						v.Shape = []Dim{}
						return fields(tt.bytes, func(df field) error {
							if df.num != 1 {
								return nil
							}
							var d Dim
							err := fields(df.bytes, func(x field) error {
								switch x.num {
								case 1:
									d.Value = int64(x.v)
								case 2:
									d.Param = string(x.bytes)
								}
								return nil
							})
							v.Shape = append(v.Shape, d)
							return err
						})
					}
					return nil
				})
			})
		}
		return nil
	})
	if err != nil {
		return v, fmt.Errorf("value_info %q: %w", v.Name, err)
	}
	return v, nil
}

// Output returns the graph output named name.
func (g *Graph) Output(name string) (ValueInfo, bool) {
	for _, o := range g.Outputs {
		if o.Name == name {
			return o, true
		}
	}
	return ValueInfo{}, false
}

// ExternalFiles returns the files (relative to the model's folder) that hold
// the data of initializers stored outside the model, sorted, each once (as
// ExternalDataFiles finds them without parsing the whole model).
func (m *Model) ExternalFiles() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range m.Graph.Initializers {
		if t.External && t.Location != "" && !seen[t.Location] {
			seen[t.Location] = true
			out = append(out, t.Location)
		}
	}
	sortStrings(out)
	return out
}

// WriteAppended writes the model with nodes appended to its graph's node list
// and outputs appended to its graph outputs; every other byte is copied as
// it was. Appended nodes come after all existing ones, so a node may use any
// existing value.
func (m *Model) WriteAppended(w io.Writer, nodes []Node, outputs []ValueInfo) error {
	var extra []byte
	for _, n := range nodes {
		extra = appendBytesField(extra, 1, encodeNode(n))
	}
	for _, o := range outputs {
		extra = appendBytesField(extra, 12, encodeValueInfo(o))
	}
	gf := m.graphField
	hdr := protowire.AppendTag(nil, 7, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(len(gf.bytes)+len(extra)))
	for _, part := range [][]byte{m.raw[:gf.start], hdr, gf.bytes, extra, m.raw[gf.end:]} {
		if _, err := w.Write(part); err != nil {
			return fmt.Errorf("onnxgraph: write: %w", err)
		}
	}
	return nil
}

func encodeNode(n Node) []byte {
	var b []byte
	for _, in := range n.Inputs {
		b = appendStringField(b, 1, in)
	}
	for _, out := range n.Outputs {
		b = appendStringField(b, 2, out)
	}
	if n.Name != "" {
		b = appendStringField(b, 3, n.Name)
	}
	b = appendStringField(b, 4, n.OpType)
	names := make([]string, 0, len(n.Attrs))
	for k := range n.Attrs {
		names = append(names, k)
	}
	sortStrings(names)
	for _, k := range names {
		b = appendBytesField(b, 5, encodeAttr(n.Attrs[k]))
	}
	if n.Domain != "" {
		b = appendStringField(b, 7, n.Domain)
	}
	return b
}

func encodeValueInfo(v ValueInfo) []byte {
	var tt []byte
	tt = appendVarintField(tt, 1, uint64(v.ElemType))
	if v.HasShape {
		var shape []byte
		for _, d := range v.Shape {
			var db []byte
			if d.Param != "" {
				db = appendStringField(db, 2, d.Param)
			} else if d.Value > 0 {
				db = appendVarintField(db, 1, uint64(d.Value))
			}
			shape = appendBytesField(shape, 1, db)
		}
		tt = appendBytesField(tt, 2, shape)
	}
	var typ []byte
	typ = appendBytesField(typ, 1, tt)
	var b []byte
	b = appendStringField(b, 1, v.Name)
	b = appendBytesField(b, 2, typ)
	return b
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
