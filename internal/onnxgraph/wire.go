package onnxgraph

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The protocol buffers wire format is read and written with protowire; this
// file holds the few helpers ONNX files need on top of it.

var errTruncated = errors.New("truncated protobuf")

// field is one decoded field: its number, wire type, and either its varint
// (or fixed) value or its bytes (a slice of the input, not a copy).
type field struct {
	num   protowire.Number
	wire  protowire.Type
	v     uint64
	bytes []byte
	start int // offset of the tag in the message
	end   int // offset after the field
}

// wireError describes a negative length returned by a protowire Consume
// function.
func wireError(n int) error {
	return fmt.Errorf("bad protobuf: %w", protowire.ParseError(n))
}

// fields iterates the fields of message b, calling fn for each; fn returning
// an error stops the walk.
func fields(b []byte, fn func(f field) error) error {
	i := 0
	for i < len(b) {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return wireError(n)
		}
		f := field{num: num, wire: typ, start: i}
		i += n
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b[i:])
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b[i:])
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b[i:])
			f.v = uint64(v)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b[i:])
		default:
			return fmt.Errorf("unsupported protobuf wire type %d (field %d)", typ, num)
		}
		if n < 0 {
			return wireError(n)
		}
		i += n
		f.end = i
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// appendInts decodes a repeated int64 field that may be packed or not.
func appendInts(dst []int64, f field) ([]int64, error) {
	switch f.wire {
	case protowire.VarintType:
		return append(dst, int64(f.v)), nil
	case protowire.BytesType:
		for b := f.bytes; len(b) > 0; {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, wireError(n)
			}
			dst = append(dst, int64(v))
			b = b[n:]
		}
		return dst, nil
	}
	return nil, fmt.Errorf("bad wire type %d for an integer field", f.wire)
}

// appendFloats decodes a repeated float field that may be packed or not.
func appendFloats(dst []float32, f field) ([]float32, error) {
	switch f.wire {
	case protowire.Fixed32Type:
		return append(dst, math.Float32frombits(uint32(f.v))), nil
	case protowire.BytesType:
		if len(f.bytes)%4 != 0 {
			return nil, errTruncated
		}
		for b := f.bytes; len(b) > 0; {
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return nil, wireError(n)
			}
			dst = append(dst, math.Float32frombits(v))
			b = b[n:]
		}
		return dst, nil
	}
	return nil, fmt.Errorf("bad wire type %d for a float field", f.wire)
}

// appendVarintField appends field num holding the varint v.
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// appendBytesField appends field num holding the length-delimited v.
func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// appendStringField appends field num holding the string s.
func appendStringField(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}
