package tensor

import (
	"bytes"
	"math"
	"testing"
)

// q8Block is one block as ggml lays it out: the float16 scale's two bytes,
// little-endian, then the 32 int8 values.
func q8Block(d uint16, q ...int8) []byte {
	b := make([]byte, Q8_0BlockBytes)
	b[0], b[1] = byte(d), byte(d>>8)
	for i, v := range q {
		b[2+i] = byte(v)
	}
	return b
}

// TestQuantizeQ8_0Bytes checks the bytes of blocks computed by hand as
// ggml's quantize_row_q8_0_ref computes them: ties round away from zero
// (roundf), the scale is amax/127 rounded to float16, a zero block has a
// zero scale.
func TestQuantizeQ8_0Bytes(t *testing.T) {
	v := make([]float32, 4*32)
	// Block 0: amax 127, so d = 1 (0x3c00) and q = round(x): ties away
	// from zero, not to even.
	copy(v[0:], []float32{127, 0.5, -0.5, 1.5, -2.5, 2.5, -127, 0, 0.49})
	// Block 1: all zero: d = 0, q = 0.
	// Block 2: amax 63.5, so d = 0.5 (0x3800) and q = round(2x).
	copy(v[64:], []float32{0.25, -0.75, 63.5, 0.2, -63.5})
	// Block 3: amax 1: d = 1/127 = 0.0078740..., whose nearest float16 is
	// 2^-7 * (1 + 8/1024) (0x2008); q = round(127x).
	copy(v[96:], []float32{1, -1, 0.25, 0.1})
	q, err := QuantizeQ8_0(v, 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join([][]byte{
		q8Block(0x3c00, 127, 1, -1, 2, -3, 3, -127, 0, 0),
		q8Block(0),
		q8Block(0x3800, 1, -2, 127, 0, -127),
		q8Block(0x2008, 127, -127, 32, 13),
	}, nil)
	if got := q.Q8_0Blocks(); !bytes.Equal(got, want) {
		t.Fatalf("blocks\n got %x\nwant %x", got, want)
	}
	if q.Len() != 128 || q.Bytes() != 4*34 || !bytes.Equal(q.Raw(), want) {
		t.Fatalf("Len %d Bytes %d Raw %x", q.Len(), q.Bytes(), q.Raw())
	}
	d3 := float32(0x1p-7 * (1 + 8.0/1024))
	for _, c := range []struct {
		i    int
		want float32
	}{{0, 127}, {1, 1}, {4, -3}, {40, 0}, {65, -1}, {66, 63.5}, {96, 127 * d3}, {99, 13 * d3}} {
		if got := q.At(c.i); got != c.want {
			t.Errorf("At(%d) = %v, want %v", c.i, got, c.want)
		}
	}
	// Float32sInto from an offset inside a block, across a block boundary.
	dst := make([]float32, 40)
	q.Float32sInto(dst, 60)
	for i, x := range dst {
		if want := q.At(60 + i); x != want {
			t.Fatalf("Float32sInto[%d] = %v, want %v", i, x, want)
		}
	}
	all := q.Float32s()
	if len(all) != 128 || all[66] != 63.5 || all[6] != -127 {
		t.Fatalf("Float32s = %v", all)
	}
	// Convert back and forth: to F32 dequantizes; quantizing the
	// dequantized values again gives the same blocks.
	if f := q.Convert(F32); f.DType != F32 || !bytes.Equal(f.Convert(Q8_0).Q8_0Blocks(), want) {
		t.Fatal("Convert round trip changed the blocks")
	}
	if q.Convert(BF16).At(66) != 63.5 {
		t.Fatal("Convert to BF16")
	}
	if q.Convert(Q8_0).Q8_0Blocks()[0] != want[0] || !q.Same(q.Convert(Q8_0)) {
		t.Fatal("Convert to its own type is not the tensor itself")
	}
	if _, _, bad := q.FirstNonFinite(); bad {
		t.Fatal("finite tensor reported non-finite")
	}
}

func TestFromQ8_0(t *testing.T) {
	raw := bytes.Join([][]byte{q8Block(0x3c00, 1, 2), q8Block(0x4000, -1), q8Block(0x7c00, 3)}, nil)
	q, err := FromQ8_0(raw, 3, 32)
	if err != nil {
		t.Fatal(err)
	}
	if &q.Q8_0Blocks()[0] != &raw[0] {
		t.Fatal("FromQ8_0 copied its bytes")
	}
	if q.At(1) != 2 || q.At(32) != -2 {
		t.Fatalf("At: %v %v", q.At(1), q.At(32))
	}
	if i, v, bad := q.FirstNonFinite(); !bad || i != 64 || !math.IsInf(float64(v), 1) {
		t.Fatalf("FirstNonFinite = %d %v %v", i, v, bad)
	}
	s := q.Slice(2)
	if s.Len() != 64 || s.Bytes() != 68 || s.Shape[0] != 2 || &s.Q8_0Blocks()[0] != &raw[0] {
		t.Fatalf("Slice: %v %d %d", s.Shape, s.Len(), s.Bytes())
	}
	if _, _, bad := s.FirstNonFinite(); bad {
		t.Fatal("Slice kept the third row")
	}
	for _, c := range []struct {
		n     int
		shape []int64
	}{
		{len(raw) - 1, []int64{3, 32}}, // not whole blocks
		{len(raw), []int64{2, 48}},     // last dimension not a multiple of 32
		{len(raw), []int64{2, 32}},     // too many bytes
		{len(raw), nil},                // scalar
	} {
		if _, err := FromQ8_0(raw[:c.n], c.shape...); err == nil {
			t.Errorf("FromQ8_0(%d bytes, %v) succeeded", c.n, c.shape)
		}
	}
	if _, err := QuantizeQ8_0(make([]float32, 48), 48); err == nil {
		t.Error("QuantizeQ8_0 of a last dimension of 48 succeeded")
	}
	if _, err := QuantizeQ8_0(make([]float32, 32), 2, 32); err == nil {
		t.Error("QuantizeQ8_0 with too few values succeeded")
	}
	if v, b := Q8_0.BlockSize(); v != 32 || b != 34 || Q8_0.Size() != 0 {
		t.Errorf("BlockSize = %d, %d; Size = %d", v, b, Q8_0.Size())
	}
	if v, b := BF16.BlockSize(); v != 1 || b != 2 {
		t.Errorf("BF16 BlockSize = %d, %d", v, b)
	}
}

// TestQuantizeQ8_0Error: every dequantized value is within half a step
// (d/2, plus the scale's float16 rounding) of the original.
func TestQuantizeQ8_0Error(t *testing.T) {
	v := make([]float32, 64*32)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)*0.37)) * float32(1+i%7)
	}
	q, err := QuantizeQ8_0(v, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range q.Float32s() {
		b := v[i/32*32 : i/32*32+32]
		var amax float64
		for _, y := range b {
			amax = max(amax, math.Abs(float64(y)))
		}
		if e := math.Abs(float64(x - v[i])); e > amax/127*0.5+amax*1e-3 {
			t.Fatalf("value %d: %v dequantized to %v", i, v[i], x)
		}
	}
}
