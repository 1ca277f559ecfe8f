package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Load returns the named tensor as a tensor.Tensor of shape Shape()
// (outermost first): F32, F16 and BF16 alias the file's bytes where their
// alignment allows, Q8_0 always does; Q4_0 becomes Q8_0 (a copy, exact:
// see the package comment). Any other type is an error naming the tensor
// and its ggml type.
func (f *File) Load(name string) (tensor.Tensor, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("%w: gguf: missing tensor %q", ErrBad, name)
	}
	return f.LoadInfo(t)
}

// LoadInfo is Load for a tensor description of f.
func (f *File) LoadInfo(t *TensorInfo) (tensor.Tensor, error) {
	var dt tensor.DType
	switch t.Type {
	case TypeF32:
		dt = tensor.F32
	case TypeF16:
		dt = tensor.F16
	case TypeBF16:
		dt = tensor.BF16
	case TypeQ8_0, TypeQ4_0:
		dt = tensor.Q8_0
	default:
		return tensor.Tensor{}, fmt.Errorf("%w: gguf: tensor %q has ggml type %s, which tinyserve does not implement (it reads F32, F16, BF16, Q8_0 and Q4_0)",
			ErrBad, t.Name, t.Type)
	}
	raw, err := f.Data(t)
	if err != nil {
		return tensor.Tensor{}, err
	}
	shape := t.Shape()
	var out tensor.Tensor
	switch t.Type {
	case TypeQ8_0:
		out, err = tensor.FromQ8_0(raw, shape...)
	case TypeQ4_0:
		out, err = tensor.FromQ8_0(Q4_0ToQ8_0(raw), shape...)
	default:
		out, err = tensor.FromBytes(dt, raw, shape...)
	}
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("%w: gguf: tensor %q: %w", ErrBad, t.Name, err)
	}
	return out, nil
}

// Q4_0ToQ8_0 rewrites Q4_0 blocks (a float16 scale d, then 16 bytes
// holding 32 four-bit q: value j in the low nibble of byte j, value j+16
// in the high one, each d·(q−8)) as Q8_0 blocks with the same d and the
// int8 q−8: the same values exactly, at 34 bytes per block instead of 18.
// A trailing partial block is dropped.
func Q4_0ToQ8_0(raw []byte) []byte {
	const in, out = 18, tensor.Q8_0BlockBytes
	nb := len(raw) / in
	dst := make([]byte, nb*out)
	for b := range nb {
		s, d := raw[b*in:(b+1)*in], dst[b*out:(b+1)*out]
		d[0], d[1] = s[0], s[1]
		for j := range 16 {
			d[2+j] = byte(int8(s[2+j]&0x0f) - 8)
			d[2+j+16] = byte(int8(s[2+j]>>4) - 8)
		}
	}
	return dst
}

// QuantizeQ4_0 quantizes v (a whole number of 32-value blocks) to ggml's
// Q4_0 blocks with llama.cpp's reference rounding (quantize_row_q4_0_ref):
// per block, d = m/−8 where m is the value of largest magnitude, q =
// min(15, trunc(x/d + 8.5)), d stored as float16. Files with Q4_0 weights
// are read back as Q8_0 (Q4_0ToQ8_0).
func QuantizeQ4_0(v []float32) ([]byte, error) {
	if len(v)%32 != 0 {
		return nil, fmt.Errorf("gguf: Q4_0 needs whole blocks of 32 values, got %d", len(v))
	}
	out := make([]byte, len(v)/32*18)
	for b := range len(v) / 32 {
		x, y := v[b*32:(b+1)*32], out[b*18:(b+1)*18]
		var amax, m float32
		for _, f := range x {
			if a := float32(math.Abs(float64(f))); a > amax {
				amax, m = a, f
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(y, tensor.F32ToF16(d))
		for j := range 16 {
			q0 := min(15, int8(x[j]*id+8.5))
			q1 := min(15, int8(x[16+j]*id+8.5))
			y[2+j] = byte(q0) | byte(q1)<<4
		}
	}
	return out, nil
}
