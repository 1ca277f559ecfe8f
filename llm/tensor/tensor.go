// Package tensor holds a model parameter's values in the type a checkpoint
// stores them in (float32, float16, bfloat16 or ggml's 8-bit Q8_0), so that a 1 GB bfloat16
// checkpoint is not widened to 2 GB of float32 before a backend repacks or
// uploads it, and the conversions between those types.
//
// A Tensor may alias a read-only memory mapping of its checkpoint: never
// write to the slices it returns.
package tensor

import (
	"fmt"
	"math"
	"unsafe"
)

// DType is how a tensor's values are stored, named as safetensors names them.
type DType string

// The stored types a Tensor holds.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	// Q8_0 is ggml's Q8_0: blocks of 32 values in 34 bytes, a
	// little-endian float16 scale d, then 32 int8 q; value = d*q. The
	// last dimension is a multiple of 32 and blocks run along it
	// (row-major), so a row is a whole number of blocks.
	Q8_0 DType = "Q8_0"
)

// Size is the bytes of one value of d: 0 for an unknown type and for a
// block type such as Q8_0, whose values have no whole byte size (see
// BlockSize).
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// Tensor is a parameter's values, row-major, in their stored type. The
// zero Tensor is an absent parameter (a bias the architecture does not
// have).
type Tensor struct {
	// DType is the stored type.
	DType DType
	// Shape is the tensor's shape, outermost first.
	Shape []int64
	f32   []float32
	bits  []uint16 // F16 or BF16 values
	q8    []byte   // Q8_0 blocks
}

// FromFloat32 is a float32 tensor of the given shape over v (not copied).
func FromFloat32(v []float32, shape ...int64) Tensor {
	mustFit(len(v), shape)
	return Tensor{DType: F32, Shape: shape, f32: v}
}

// FromBits is an F16 or BF16 tensor of the given shape over the raw
// 16-bit values (not copied).
func FromBits(dtype DType, bits []uint16, shape ...int64) Tensor {
	if dtype != F16 && dtype != BF16 {
		panic(fmt.Sprintf("tensor: FromBits with dtype %s", dtype))
	}
	mustFit(len(bits), shape)
	return Tensor{DType: dtype, Shape: shape, bits: bits}
}

// FromBytes is a tensor over little-endian raw bytes in dtype: aliased when
// the host is little-endian and raw is aligned for the type, else copied.
func FromBytes(dtype DType, raw []byte, shape ...int64) (Tensor, error) {
	size := dtype.Size()
	if size == 0 {
		return Tensor{}, fmt.Errorf("unsupported dtype %s (want F32, F16 or BF16)", dtype)
	}
	n := len(raw) / size
	if len(raw)%size != 0 || int64(n) != numel(shape) {
		return Tensor{}, fmt.Errorf("%d bytes of %s do not hold shape %v", len(raw), dtype, shape)
	}
	aligned := n == 0 || (littleEndian && uintptr(unsafe.Pointer(&raw[0]))%uintptr(size) == 0)
	switch dtype {
	case F32:
		if n == 0 {
			return FromFloat32([]float32{}, shape...), nil
		}
		if aligned {
			return FromFloat32(unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), n), shape...), nil
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		return FromFloat32(v, shape...), nil
	default:
		if n == 0 {
			return FromBits(dtype, []uint16{}, shape...), nil
		}
		if aligned {
			return FromBits(dtype, unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), n), shape...), nil
		}
		v := make([]uint16, n)
		for i := range v {
			v[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
		}
		return FromBits(dtype, v, shape...), nil
	}
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func mustFit(n int, shape []int64) {
	if int64(n) != numel(shape) {
		panic(fmt.Sprintf("tensor: %d values do not fill shape %v", n, shape))
	}
}

// IsZero reports whether t is the zero Tensor: an absent parameter.
func (t Tensor) IsZero() bool { return t.DType == "" }

// Len is the number of values.
func (t Tensor) Len() int {
	switch t.DType {
	case F32:
		return len(t.f32)
	case Q8_0:
		return len(t.q8) / Q8_0BlockBytes * Q8_0BlockLen
	}
	return len(t.bits)
}

// Bytes is the memory the values take in their stored type.
func (t Tensor) Bytes() int64 {
	if t.DType == Q8_0 {
		return int64(len(t.q8))
	}
	return int64(t.Len()) * int64(t.DType.Size())
}

// Float32s returns the values as float32: the stored slice itself for F32
// (do not write to it), else a new slice, widened exactly.
func (t Tensor) Float32s() []float32 {
	if t.DType == F32 {
		return t.f32
	}
	out := make([]float32, t.Len())
	t.Float32sInto(out, 0)
	return out
}

// Float32sInto widens the values from flat index off on into dst, exactly,
// as many as dst holds: a row of an embedding table, say.
func (t Tensor) Float32sInto(dst []float32, off int) {
	switch t.DType {
	case F32:
		copy(dst, t.f32[off:off+len(dst)])
	case BF16:
		src := t.bits[off : off+len(dst)]
		for i, h := range src {
			dst[i] = BF16ToF32(h)
		}
	case F16:
		src := t.bits[off : off+len(dst)]
		for i, h := range src {
			dst[i] = F16ToF32(h)
		}
	case Q8_0:
		dequantQ8_0(dst, t.q8, off)
	default:
		panic("tensor: Float32sInto on an absent tensor")
	}
}

// At is the value at flat index i, widened to float32.
func (t Tensor) At(i int) float32 {
	switch t.DType {
	case F32:
		return t.f32[i]
	case BF16:
		return BF16ToF32(t.bits[i])
	case Q8_0:
		b := t.q8[i/Q8_0BlockLen*Q8_0BlockBytes:]
		return F16ToF32(uint16(b[0])|uint16(b[1])<<8) * float32(int8(b[2+i%Q8_0BlockLen]))
	default:
		return F16ToF32(t.bits[i])
	}
}

// Bits returns the stored 16-bit values of an F16 or BF16 tensor (nil for
// F32 and Q8_0): what a backend uploads or packs as they are.
func (t Tensor) Bits() []uint16 { return t.bits }

// Raw returns the stored values as little-endian bytes on this host (a view,
// not a copy): what a GPU backend uploads as it is.
func (t Tensor) Raw() []byte {
	switch {
	case len(t.f32) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&t.f32[0])), 4*len(t.f32))
	case len(t.bits) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&t.bits[0])), 2*len(t.bits))
	case len(t.q8) > 0:
		return t.q8
	}
	return nil
}

// Same reports whether t and u are the same storage (a tied LM head and
// its embedding table), not merely equal values.
func (t Tensor) Same(u Tensor) bool {
	if t.DType != u.DType || t.Len() != u.Len() || t.Len() == 0 {
		return false
	}
	switch t.DType {
	case F32:
		return &t.f32[0] == &u.f32[0]
	case Q8_0:
		return &t.q8[0] == &u.q8[0]
	}
	return &t.bits[0] == &u.bits[0]
}

// Slice is the tensor's first n values along its first dimension (a view):
// the rows of an embedding table a trimmed vocabulary keeps.
func (t Tensor) Slice(n int64) Tensor {
	row := numel(t.Shape[1:])
	shape := append([]int64{n}, t.Shape[1:]...)
	switch t.DType {
	case F32:
		return FromFloat32(t.f32[:n*row], shape...)
	case Q8_0:
		// Whole rows are whole blocks: the last dimension is a multiple
		// of 32.
		return Tensor{DType: Q8_0, Shape: shape, q8: t.q8[:n*row/Q8_0BlockLen*Q8_0BlockBytes]}
	}
	return FromBits(t.DType, t.bits[:n*row], shape...)
}

// FirstNonFinite returns the flat index and value of the first NaN or
// infinity in t, or ok false when every value is finite. For Q8_0 only the
// scales can be non-finite: the index is that of the block's first value.
func (t Tensor) FirstNonFinite() (i int, v float32, ok bool) {
	switch t.DType {
	case F32:
		for i, x := range t.f32 {
			if x-x != 0 {
				return i, x, true
			}
		}
	case BF16:
		for i, h := range t.bits {
			if h&0x7f80 == 0x7f80 {
				return i, BF16ToF32(h), true
			}
		}
	case F16:
		for i, h := range t.bits {
			if h&0x7c00 == 0x7c00 {
				return i, F16ToF32(h), true
			}
		}
	case Q8_0:
		for b := 0; b+Q8_0BlockBytes <= len(t.q8); b += Q8_0BlockBytes {
			if h := uint16(t.q8[b]) | uint16(t.q8[b+1])<<8; h&0x7c00 == 0x7c00 {
				return b / Q8_0BlockBytes * Q8_0BlockLen, F16ToF32(h), true
			}
		}
	}
	return 0, 0, false
}

// Convert returns t's values stored as dtype (F32, F16, BF16 or Q8_0),
// rounding to nearest even when narrowing to a float type and as
// QuantizeQ8_0 does to Q8_0; t itself when it is stored so already. It
// panics converting to Q8_0 a tensor whose last dimension is not a
// multiple of 32.
func (t Tensor) Convert(dtype DType) Tensor {
	if t.DType == dtype {
		return t
	}
	switch dtype {
	case Q8_0:
		q, err := QuantizeQ8_0(t.Float32s(), t.Shape...)
		if err != nil {
			panic("tensor: Convert: " + err.Error())
		}
		return q
	case F32:
		return FromFloat32(t.Float32s(), t.Shape...)
	case F16, BF16:
		round := F32ToBF16
		if dtype == F16 {
			round = F32ToF16
		}
		out := make([]uint16, t.Len())
		for i := range out {
			out[i] = round(t.At(i))
		}
		return FromBits(dtype, out, t.Shape...)
	}
	panic(fmt.Sprintf("tensor: Convert to %s", dtype))
}
