package tensor

import (
	"fmt"
	"math"
)

// The Q8_0 block: Q8_0BlockLen values stored in Q8_0BlockBytes bytes (a
// float16 scale, then one int8 per value).
const (
	Q8_0BlockLen   = 32
	Q8_0BlockBytes = 2 + Q8_0BlockLen
)

// BlockSize is the values per block and the bytes per block of d: (32, 34)
// for Q8_0, (1, Size()) for the float types, whose every value is a block.
func (d DType) BlockSize() (values, bytes int) {
	if d == Q8_0 {
		return Q8_0BlockLen, Q8_0BlockBytes
	}
	return 1, d.Size()
}

// checkQ8_0Shape says why shape cannot be stored as Q8_0 (nil when it can)
// and returns its number of blocks.
func checkQ8_0Shape(shape []int64) (int64, error) {
	if len(shape) == 0 || shape[len(shape)-1]%Q8_0BlockLen != 0 {
		return 0, fmt.Errorf("tensor: Q8_0 shape %v: the last dimension must be a multiple of %d", shape, Q8_0BlockLen)
	}
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor: Q8_0 shape %v has a negative dimension", shape)
		}
	}
	return numel(shape) / Q8_0BlockLen, nil
}

// FromQ8_0 is a Q8_0 tensor of the given shape over raw, ggml's blocks as
// a GGUF file stores them (aliased, not copied: it may be a read-only
// memory mapping, as the blocks need no alignment).
func FromQ8_0(raw []byte, shape ...int64) (Tensor, error) {
	nb, err := checkQ8_0Shape(shape)
	if err != nil {
		return Tensor{}, err
	}
	if int64(len(raw)) != nb*Q8_0BlockBytes {
		return Tensor{}, fmt.Errorf("tensor: %d bytes of Q8_0 do not hold shape %v (want %d)", len(raw), shape, nb*Q8_0BlockBytes)
	}
	return Tensor{DType: Q8_0, Shape: shape, q8: raw}, nil
}

// QuantizeQ8_0 is v of the given shape quantized to Q8_0 with llama.cpp's
// reference rounding (quantize_row_q8_0_ref), so that a file this writes
// holds the same bytes as ggml's: per block of 32, amax = max |x|,
// d = amax/127, q = round(x * (1/d)) half away from zero (q = 0 when
// d = 0), d stored as float16 rounded to nearest even.
func QuantizeQ8_0(v []float32, shape ...int64) (Tensor, error) {
	nb, err := checkQ8_0Shape(shape)
	if err != nil {
		return Tensor{}, err
	}
	if int64(len(v)) != nb*Q8_0BlockLen {
		return Tensor{}, fmt.Errorf("tensor: %d values do not fill shape %v", len(v), shape)
	}
	out := make([]byte, nb*Q8_0BlockBytes)
	for b := range int(nb) {
		quantizeBlockQ8_0(out[b*Q8_0BlockBytes:(b+1)*Q8_0BlockBytes], v[b*Q8_0BlockLen:(b+1)*Q8_0BlockLen])
	}
	return Tensor{DType: Q8_0, Shape: shape, q8: out}, nil
}

// quantizeBlockQ8_0 writes one block as quantize_row_q8_0_ref does, in
// float32 arithmetic as its C does (the product x*id is rounded to float32
// before roundf).
func quantizeBlockQ8_0(dst []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	h := F32ToF16(d)
	dst[0], dst[1] = byte(h), byte(h>>8)
	for j, v := range x {
		dst[2+j] = byte(int8(math.Round(float64(float32(v * id)))))
	}
}

// Q8_0Blocks returns the raw blocks of a Q8_0 tensor (nil for any other
// type): what a backend repacks or uploads.
func (t Tensor) Q8_0Blocks() []byte { return t.q8 }

// dequantQ8_0 writes d*q for the values from flat index off on into dst,
// as many as dst holds; off need not start a block.
func dequantQ8_0(dst []float32, blocks []byte, off int) {
	for i := 0; i < len(dst); {
		k := off + i
		b := blocks[k/Q8_0BlockLen*Q8_0BlockBytes:]
		d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
		for j := k % Q8_0BlockLen; j < Q8_0BlockLen && i < len(dst); j++ {
			dst[i] = d * float32(int8(b[2+j]))
			i++
		}
	}
}
