package tensorio

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// nativeLE is whether this machine stores numbers little-endian, as the
// file formats do: then elements are copied as bytes, not one by one.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// raw returns the bytes of numeric slice d in machine order.
func raw[T any](d []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*int(unsafe.Sizeof(z)))
}

// rawData returns the bytes of t's elements in machine order, for the
// element types whose bytes are their file encoding on a little-endian
// machine (bool is not: Go does not promise 0 and 1).
func rawData(t Tensor) ([]byte, bool) {
	switch d := t.Data.(type) {
	case []float64:
		return raw(d), true
	case []float32:
		return raw(d), true
	case []uint16:
		return raw(d), true
	case []int64:
		return raw(d), true
	case []int32:
		return raw(d), true
	case []int16:
		return raw(d), true
	case []int8:
		return raw(d), true
	case []uint8:
		return d, true
	}
	return nil, false
}

// encodeLE appends the little-endian bytes of t's elements to dst.
func encodeLE(dst []byte, t Tensor) []byte {
	if nativeLE {
		if b, ok := rawData(t); ok {
			return append(dst, b...)
		}
	}
	return encodeLEPortable(dst, t)
}

// encodeLEPortable is encodeLE element by element, on any machine.
func encodeLEPortable(dst []byte, t Tensor) []byte {
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
	if nativeLE && dt != DTypeBool {
		out := makeData(dt, n)
		dst, _ := rawData(Tensor{Data: out})
		copy(dst, b)
		return out, nil
	}
	return decodeLEPortable(dt, b, n)
}

// makeData returns n zero elements of the Go type that holds dt (see
// Tensor), nil for bool and unknown types.
func makeData(dt DType, n int) any {
	switch dt {
	case DTypeF64:
		return make([]float64, n)
	case DTypeF32:
		return make([]float32, n)
	case DTypeF16, DTypeBF16:
		return make([]uint16, n)
	case DTypeI64:
		return make([]int64, n)
	case DTypeI32:
		return make([]int32, n)
	case DTypeI16:
		return make([]int16, n)
	case DTypeI8:
		return make([]int8, n)
	case DTypeU8:
		return make([]uint8, n)
	}
	return nil
}

// decodeLEPortable is decodeLE element by element, on any machine.
func decodeLEPortable(dt DType, b []byte, n int) (any, error) {
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

// AppendLE appends t's elements to dst as little-endian bytes, the layout
// .npy and safetensors files store, and returns the extended slice.
func AppendLE(dst []byte, t Tensor) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return encodeLE(dst, t), nil
}
