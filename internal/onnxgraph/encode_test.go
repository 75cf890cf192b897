package onnxgraph

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// TestEncodeTensorData: a tensor's values are encoded as little-endian
// raw_data, a block at a time for long ones, whether it holds Raw bytes,
// Floats, Int64s or Int32s, and tensorDataLen says how many bytes.
func TestEncodeTensorData(t *testing.T) {
	floats := make([]float32, 40000) // more than one 64 KiB block
	for i := range floats {
		floats[i] = float32(i)*0.25 - 3
	}
	int64s := []int64{-1, 0, 1 << 40}
	int32s := []int32{-7, 0, 1 << 30}
	var wantF, want64, want32 []byte
	for _, f := range floats {
		wantF = binary.LittleEndian.AppendUint32(wantF, math.Float32bits(f))
	}
	for _, v := range int64s {
		want64 = binary.LittleEndian.AppendUint64(want64, uint64(v))
	}
	for _, v := range int32s {
		want32 = binary.LittleEndian.AppendUint32(want32, uint32(v))
	}
	for _, c := range []struct {
		name string
		t    *Tensor
		want []byte
	}{
		{"floats", &Tensor{Name: "f", Dims: []int64{200, 200}, DataType: Float, Floats: floats}, wantF},
		{"int64s", &Tensor{Name: "i", Dims: []int64{3}, DataType: Int64, Int64s: int64s}, want64},
		{"int32s", &Tensor{Name: "j", Dims: []int64{3}, DataType: Int32, Int32s: int32s}, want32},
		{"raw", &Tensor{Name: "r", Dims: []int64{3}, DataType: Int8, Raw: []byte{1, 2, 3}}, []byte{1, 2, 3}},
		{"empty", &Tensor{Name: "e", DataType: Float}, []byte{}},
	} {
		if n := tensorDataLen(c.t); n != len(c.want) {
			t.Errorf("%s: tensorDataLen %d, want %d", c.name, n, len(c.want))
		}
		var buf bytes.Buffer
		if _, err := writeTensorData(&buf, c.t, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), c.want) {
			t.Errorf("%s: writeTensorData wrote %d bytes, not the values' %d", c.name, buf.Len(), len(c.want))
		}
		back, err := parseTensor(encodeTensor(c.t))
		if err != nil {
			t.Fatal(err)
		}
		if back.Name != c.t.Name || back.DataType != c.t.DataType || len(back.Dims) != len(c.t.Dims) || !bytes.Equal(back.Raw, c.want) {
			t.Errorf("%s: encoded and parsed back: %q type %d dims %v, %d raw bytes", c.name, back.Name, back.DataType, back.Dims, len(back.Raw))
		}
	}
}
