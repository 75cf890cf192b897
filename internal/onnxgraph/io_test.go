package onnxgraph

import (
	"bytes"
	"reflect"
	"testing"
)

// TestGraphIO builds a model whose weight w is both an initializer (with
// a 1 MB payload) and a graph input, as exports with
// keep_initializers_as_inputs write it: GraphIO lists x alone as an input,
// with its declared type and shape, and reads a small part of the file.
func TestGraphIO(t *testing.T) {
	x := ValueInfo{Name: "x", ElemType: 1, HasShape: true, Tensor: true, Shape: []Dim{{Param: "batch"}, {Value: 3}}}
	w := ValueInfo{Name: "w", ElemType: 1, HasShape: true, Tensor: true, Shape: []Dim{{Value: 3}, {Value: 3}}}
	y := ValueInfo{Name: "y", ElemType: 10, HasShape: true, Tensor: true, Shape: []Dim{{Param: "batch"}, {Value: 3}}}
	var init []byte
	init = appendVarintField(init, 1, 3)
	init = appendVarintField(init, 1, 3)
	init = appendVarintField(init, 2, 1)
	init = appendStringField(init, 8, "w")
	init = appendBytesField(init, 9, make([]byte, 1<<20))
	var g []byte
	g = appendBytesField(g, 5, init)
	g = appendBytesField(g, 11, encodeValueInfo(x))
	g = appendBytesField(g, 11, encodeValueInfo(w))
	g = appendBytesField(g, 12, encodeValueInfo(y))
	var m []byte
	m = appendVarintField(m, 1, 8) // ir_version
	m = appendBytesField(m, 7, g)

	r := &countingAt{r: bytes.NewReader(m)}
	ins, outs, err := GraphIO(r, int64(len(m)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ins, []ValueInfo{x}) {
		t.Errorf("inputs %+v, want x alone %+v", ins, x)
	}
	if !reflect.DeepEqual(outs, []ValueInfo{y}) {
		t.Errorf("outputs %+v, want %+v", outs, y)
	}
	if r.n > 4096 {
		t.Errorf("GraphIO read %d bytes of a %d-byte model, want only its framing", r.n, len(m))
	}

	for _, bad := range [][]byte{m[:len(m)-5], m[:3], {}, []byte("not a model at all")} {
		if _, _, err := GraphIO(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Errorf("GraphIO of %d bytes %q...: no error", len(bad), bad[:min(len(bad), 8)])
		}
	}
}

type countingAt struct {
	r *bytes.Reader
	n int
}

func (c *countingAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += n
	return n, err
}
