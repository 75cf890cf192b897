// Package tensorio reads and writes tensors in the standard file formats the
// project exchanges with Python: safetensors, NumPy .npy and .npz. Every write
// is atomic: a temporary file in the same folder, synced, then renamed.
package tensorio

import (
	"fmt"
	"math"
)

// DType names an element type as safetensors spells it.
type DType string

// Element types.
const (
	DTypeF64  DType = "F64"
	DTypeF32  DType = "F32"
	DTypeF16  DType = "F16"
	DTypeBF16 DType = "BF16"
	DTypeI64  DType = "I64"
	DTypeI32  DType = "I32"
	DTypeI16  DType = "I16"
	DTypeI8   DType = "I8"
	DTypeU8   DType = "U8"
	DTypeBool DType = "BOOL"
)

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case DTypeF64, DTypeI64:
		return 8
	case DTypeF32, DTypeI32:
		return 4
	case DTypeF16, DTypeBF16, DTypeI16:
		return 2
	case DTypeI8, DTypeU8, DTypeBool:
		return 1
	}
	return 0
}

// Tensor is a dense row-major array. Data holds the elements as
// []float64 (DTypeF64), []float32 (DTypeF32), []uint16 (DTypeF16 and DTypeBF16, raw bits),
// []int64 (DTypeI64), []int32 (DTypeI32), []int16 (DTypeI16), []int8 (DTypeI8), []uint8 (DTypeU8)
// or []bool (BOOL).
type Tensor struct {
	DType DType
	Shape []int
	Data  any
}

// F32 returns a float32 tensor of the given shape over data (not copied).
func F32(shape []int, data []float32) Tensor {
	return Tensor{DType: DTypeF32, Shape: append(make([]int, 0, len(shape)), shape...), Data: data}
}

// I64 returns an int64 tensor of the given shape over data (not copied).
func I64(shape []int, data []int64) Tensor {
	return Tensor{DType: DTypeI64, Shape: append(make([]int, 0, len(shape)), shape...), Data: data}
}

// NumElements returns the product of the shape (1 for a scalar).
func (t Tensor) NumElements() int { return numel(t.Shape) }

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// dataLen returns the number of elements in Data and whether Data's Go type
// matches DType.
func (t Tensor) dataLen() (int, bool) {
	switch d := t.Data.(type) {
	case []float64:
		return len(d), t.DType == DTypeF64
	case []float32:
		return len(d), t.DType == DTypeF32
	case []uint16:
		return len(d), t.DType == DTypeF16 || t.DType == DTypeBF16
	case []int64:
		return len(d), t.DType == DTypeI64
	case []int32:
		return len(d), t.DType == DTypeI32
	case []int16:
		return len(d), t.DType == DTypeI16
	case []int8:
		return len(d), t.DType == DTypeI8
	case []uint8:
		return len(d), t.DType == DTypeU8
	case []bool:
		return len(d), t.DType == DTypeBool
	}
	return 0, false
}

// Validate checks that Data's type matches DType and its length the shape.
func (t Tensor) Validate() error {
	for _, s := range t.Shape {
		if s < 0 {
			return fmt.Errorf("tensorio: negative dimension in shape %v", t.Shape)
		}
	}
	n, ok := t.dataLen()
	if !ok {
		return fmt.Errorf("tensorio: data of type %T does not match dtype %s", t.Data, t.DType)
	}
	if n != t.NumElements() {
		return fmt.Errorf("tensorio: %d elements for shape %v (want %d)", n, t.Shape, t.NumElements())
	}
	return nil
}

// Float32 returns the elements converted to float32. For an DTypeF32 tensor it
// returns Data itself (not a copy).
func (t Tensor) Float32() ([]float32, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	switch d := t.Data.(type) {
	case []float32:
		return d, nil
	case []float64:
		return convert(d, func(v float64) float32 { return float32(v) }), nil
	case []uint16:
		if t.DType == DTypeBF16 {
			return convert(d, BF16ToFloat32), nil
		}
		return convert(d, F16ToFloat32), nil
	case []int64:
		return convert(d, func(v int64) float32 { return float32(v) }), nil
	case []int32:
		return convert(d, func(v int32) float32 { return float32(v) }), nil
	case []int16:
		return convert(d, func(v int16) float32 { return float32(v) }), nil
	case []int8:
		return convert(d, func(v int8) float32 { return float32(v) }), nil
	case []uint8:
		return convert(d, func(v uint8) float32 { return float32(v) }), nil
	case []bool:
		return convert(d, func(v bool) float32 {
			if v {
				return 1
			}
			return 0
		}), nil
	}
	return nil, fmt.Errorf("tensorio: cannot convert %s to float32", t.DType)
}

// Int64 returns integer or boolean elements converted to int64. Floating
// tensors are an error.
func (t Tensor) Int64() ([]int64, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	switch d := t.Data.(type) {
	case []int64:
		return d, nil
	case []int32:
		return convert(d, func(v int32) int64 { return int64(v) }), nil
	case []int16:
		return convert(d, func(v int16) int64 { return int64(v) }), nil
	case []int8:
		return convert(d, func(v int8) int64 { return int64(v) }), nil
	case []uint8:
		return convert(d, func(v uint8) int64 { return int64(v) }), nil
	case []bool:
		return convert(d, func(v bool) int64 {
			if v {
				return 1
			}
			return 0
		}), nil
	}
	return nil, fmt.Errorf("tensorio: cannot convert %s to int64", t.DType)
}

func convert[S, D any](src []S, f func(S) D) []D {
	out := make([]D, len(src))
	for i, v := range src {
		out[i] = f(v)
	}
	return out
}

// F16ToFloat32 converts IEEE 754 half-precision bits to float32 exactly.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: value = mant * 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// Float32ToF16 converts float32 to half-precision bits, rounding to nearest
// even, with overflow to infinity.
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// BF16ToFloat32 converts bfloat16 bits to float32 exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
