package cuda

import (
	"fmt"
	"math"
	"strings"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// dtype is a storage type for weights, KV and GEMM inputs. Arithmetic is
// float32 in every mode.
type dtype struct {
	name   string // canonical name, as Options.DType spells it
	size   int    // bytes per element
	blas   int    // cudaDataType for cuBLAS
	suffix string // kernel name suffix: _f32, _f16, _bf16
	stored string // the tensor.DType of the same layout: F32, F16, BF16
}

var (
	dtFloat32  = dtype{"float32", 4, DataFloat32, "_f32", "F32"}
	dtFloat16  = dtype{"float16", 2, DataFloat16, "_f16", "F16"}
	dtBFloat16 = dtype{"bfloat16", 2, DataBFloat16, "_bf16", "BF16"}
)

// parseDType maps Options.DType to a storage type. Empty and "auto" mean
// float16, as vLLM's auto does for a float32 GPT-2 checkpoint.
func parseDType(s string) (dtype, error) {
	switch strings.ToLower(s) {
	case "", "auto", "float16", "fp16", "half":
		return dtFloat16, nil
	case "bfloat16", "bf16":
		return dtBFloat16, nil
	case "float32", "fp32", "float":
		return dtFloat32, nil
	}
	return dtype{}, fmt.Errorf("cuda: unknown dtype %q (want float16, bfloat16 or float32)", s)
}

// f32ToF16 rounds f to the nearest IEEE half (ties to even), as CUDA's
// __float2half_rn and torch's .half() do, so float16 weights uploaded here
// equal a float16 checkpoint's.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // overflow
		return sign | 0x7c00
	case exp-127 >= -14: // normal half
		he := uint32(exp - 127 + 15)
		m := man >> 13
		rest := man & 0x1fff
		v := he<<10 | m
		if rest > 0x1000 || (rest == 0x1000 && m&1 == 1) {
			v++ // may carry into the exponent, which is still right (up to inf)
		}
		return sign | uint16(v)
	case exp-127 >= -25: // subnormal half
		full := man | 0x800000 // implicit bit
		shift := uint32(-(exp - 127) - 14 + 13)
		m := full >> shift
		rest := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && m&1 == 1) {
			m++
		}
		return sign | uint16(m)
	default: // underflow to signed zero
		return sign
	}
}

// f16ToF32 widens a half exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	default: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
}

// f32ToBF16 rounds f to bfloat16 (ties to even), as torch's .bfloat16()
// does; NaN stays a quiet NaN.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// encode writes src into dst (len(src)*size bytes) in the storage type.
func (d dtype) encode(dst []byte, src []float32) {
	switch d.size {
	case 4:
		for i, v := range src {
			u := math.Float32bits(v)
			dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
	default:
		conv := f32ToF16
		if d.blas == DataBFloat16 {
			conv = f32ToBF16
		}
		for i, v := range src {
			u := conv(v)
			dst[2*i], dst[2*i+1] = byte(u), byte(u>>8)
		}
	}
}

// encodeTensor writes t into dst (t.Len()*size bytes) in the storage type:
// its bytes as they are when it is stored so already, else converted.
func (d dtype) encodeTensor(dst []byte, t tensor.Tensor) {
	if string(t.DType) == d.stored {
		copy(dst, t.Raw())
		return
	}
	if t.DType == tensor.F32 {
		d.encode(dst, t.Float32s())
		return
	}
	// Widen one chunk at a time: a bfloat16 model is not doubled on the
	// host on its way to a float16 or float32 device copy.
	var buf [4096]float32
	for off := 0; off < t.Len(); off += len(buf) {
		n := min(len(buf), t.Len()-off)
		t.Float32sInto(buf[:n], off)
		d.encode(dst[off*d.size:], buf[:n])
	}
}
