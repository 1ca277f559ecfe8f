package cuda

import (
	"math"
	"testing"
)

func TestFloat16Conversion(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {0.1, 0x2e66},
		{65504, 0x7bff}, {65520, 0x7c00}, {1e9, 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{1 + 1.0/2048, 0x3c00},          // tie: to even
		{1 + 3.0/2048, 0x3c02},          // tie: to even (up)
		{6.103515625e-05, 0x0400},       // smallest normal
		{5.960464477539063e-08, 0x0001}, // smallest subnormal
		{2.9802322387695312e-08, 0},     // half of it: tie to even (zero)
		{3.0e-08, 0x0001},
		{1e-8, 0},
	}
	for _, c := range cases {
		if got := f32ToF16(c.f); got != c.want {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := f32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x", h)
	}
	// Every finite half round-trips through float32.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN payloads are not preserved
		}
		if got := f32ToF16(f16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f16ToF32(uint16(h)), got)
		}
	}
}

func TestBFloat16Conversion(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {1 + 1.0/256, 0x3f80}, {1 + 3.0/256, 0x3f82}, {float32(math.Inf(1)), 0x7f80},
	}
	for _, c := range cases {
		if got := f32ToBF16(c.f); got != c.want {
			t.Errorf("f32ToBF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := f32ToBF16(float32(math.NaN())); h&0x7f80 != 0x7f80 || h&0x7f == 0 {
		t.Errorf("NaN -> %#04x", h)
	}
}

func TestParseDType(t *testing.T) {
	for in, want := range map[string]string{"": "float16", "auto": "float16", "half": "float16", "BF16": "bfloat16", "float32": "float32", "fp32": "float32"} {
		d, err := parseDType(in)
		if err != nil || d.name != want {
			t.Errorf("parseDType(%q) = %v, %v; want %s", in, d.name, err, want)
		}
	}
	if _, err := parseDType("int8"); err == nil {
		t.Error("int8 accepted")
	}
	dst := make([]byte, 4)
	dtFloat16.encode(dst, []float32{1, -2})
	if dst[0] != 0x00 || dst[1] != 0x3c || dst[2] != 0x00 || dst[3] != 0xc0 {
		t.Errorf("float16 encode: % x", dst)
	}
	dtFloat32.encode(dst, []float32{1})
	if dst[3] != 0x3f || dst[2] != 0x80 {
		t.Errorf("float32 encode: % x", dst)
	}
}
