package onnxgraph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Protocol buffers wire format, as much as ONNX files need.

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

var errTruncated = errors.New("truncated protobuf")

// field is one decoded field: its number, wire type, and either its varint
// (or fixed) value or its bytes (a slice of the input, not a copy).
type field struct {
	num   int
	wire  int
	v     uint64
	bytes []byte
	start int // offset of the tag in the message
	end   int // offset after the field
}

// fields iterates the fields of message b, calling fn for each; fn returning
// an error stops the walk.
func fields(b []byte, fn func(f field) error) error {
	i := 0
	for i < len(b) {
		start := i
		tag, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return errTruncated
		}
		i += n
		f := field{num: int(tag >> 3), wire: int(tag & 7), start: start}
		if f.num <= 0 {
			return fmt.Errorf("bad protobuf field number %d", f.num)
		}
		switch f.wire {
		case wireVarint:
			v, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return errTruncated
			}
			f.v, i = v, i+n
		case wireFixed64:
			if len(b)-i < 8 {
				return errTruncated
			}
			f.v, i = binary.LittleEndian.Uint64(b[i:]), i+8
		case wireFixed32:
			if len(b)-i < 4 {
				return errTruncated
			}
			f.v, i = uint64(binary.LittleEndian.Uint32(b[i:])), i+4
		case wireBytes:
			l, n := binary.Uvarint(b[i:])
			if n <= 0 || l > uint64(len(b)-i-n) {
				return errTruncated
			}
			i += n
			f.bytes, i = b[i:i+int(l)], i+int(l)
		default:
			return fmt.Errorf("unsupported protobuf wire type %d (field %d)", f.wire, f.num)
		}
		f.end = i
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// ints decodes a repeated int64 field that may be packed or not.
func appendInts(dst []int64, f field) ([]int64, error) {
	switch f.wire {
	case wireVarint:
		return append(dst, int64(f.v)), nil
	case wireBytes:
		b := f.bytes
		for len(b) > 0 {
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, errTruncated
			}
			dst = append(dst, int64(v))
			b = b[n:]
		}
		return dst, nil
	}
	return nil, fmt.Errorf("bad wire type %d for an integer field", f.wire)
}

func appendFloats(dst []float32, f field) ([]float32, error) {
	switch f.wire {
	case wireFixed32:
		return append(dst, math.Float32frombits(uint32(f.v))), nil
	case wireBytes:
		if len(f.bytes)%4 != 0 {
			return nil, errTruncated
		}
		for i := 0; i < len(f.bytes); i += 4 {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(f.bytes[i:])))
		}
		return dst, nil
	}
	return nil, fmt.Errorf("bad wire type %d for a float field", f.wire)
}

// Encoding.

func appendTag(b []byte, num, wire int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(wire))
}

func appendVarintField(b []byte, num int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, num, wireVarint), v)
}

func appendBytesField(b []byte, num int, v []byte) []byte {
	b = binary.AppendUvarint(appendTag(b, num, wireBytes), uint64(len(v)))
	return append(b, v...)
}

func appendStringField(b []byte, num int, s string) []byte {
	return appendBytesField(b, num, []byte(s))
}
