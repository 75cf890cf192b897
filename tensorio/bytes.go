package tensorio

import (
	"encoding/binary"
	"fmt"
	"math"
)

// encodeLE appends the little-endian bytes of t's elements to dst.
func encodeLE(dst []byte, t Tensor) []byte {
	switch d := t.Data.(type) {
	case []float64:
		for _, v := range d {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
	case []float32:
		for _, v := range d {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	case []uint16:
		for _, v := range d {
			dst = binary.LittleEndian.AppendUint16(dst, v)
		}
	case []int64:
		for _, v := range d {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
		}
	case []int32:
		for _, v := range d {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		}
	case []int16:
		for _, v := range d {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
		}
	case []int8:
		for _, v := range d {
			dst = append(dst, byte(v))
		}
	case []uint8:
		dst = append(dst, d...)
	case []bool:
		for _, v := range d {
			if v {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		}
	}
	return dst
}

// decodeLE decodes n little-endian elements of type dt from b (len(b) must
// be n*dt.Size()).
func decodeLE(dt DType, b []byte, n int) (any, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("unsupported dtype %q", dt)
	}
	if len(b) != n*dt.Size() {
		return nil, fmt.Errorf("%d bytes for %d elements of %s (want %d)", len(b), n, dt, n*dt.Size())
	}
	switch dt {
	case DTypeF64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return out, nil
	case DTypeF32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	case DTypeF16, DTypeBF16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		return out, nil
	case DTypeI64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return out, nil
	case DTypeI32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	case DTypeI16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out, nil
	case DTypeI8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(b[i])
		}
		return out, nil
	case DTypeU8:
		return append([]uint8(nil), b...), nil
	case DTypeBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = b[i] != 0
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported dtype %q", dt)
}
