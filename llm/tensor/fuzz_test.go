package tensor

import (
	"math"
	"testing"
)

// FuzzFloat32ToHalf: F32ToF16 and F32ToBF16, which write the
// F16 and BF16 checkpoints, round every float32 to the nearest value of the
// narrower type, ties to even, overflowing to infinity as IEEE 754 does
// (infinity counts as the next power of two after the largest finite
// value), keeping the sign; a NaN stays a NaN. TestFloat16 covers the
// round trip of every half value; this covers the float32s between them.
func FuzzFloat32ToHalf(f *testing.F) {
	for _, x := range []float32{0, 1, 1 + 1.0/2048, 1 + 1.0/256, 65504, 65519, 65520, 6e-8, 2.9e-8, 3e-8, -1e-45, 3.4e38, float32(math.NaN())} {
		f.Add(math.Float32bits(x))
	}
	f16 := func(h uint16) float64 {
		if h&0x7fff == 0x7c00 {
			return 65536 // infinity, as the rounding sees it
		}
		return float64(F16ToF32(h & 0x7fff))
	}
	bf16 := func(h uint16) float64 {
		if h&0x7fff == 0x7f80 {
			return 0x1p128
		}
		return float64(math.Float32frombits(uint32(h&0x7fff) << 16))
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		for _, c := range []struct {
			name     string
			conv     func(float32) uint16
			value    func(uint16) float64
			inf, nan uint16 // +infinity; the exponent bits of a NaN
		}{
			{"F32ToF16", F32ToF16, f16, 0x7c00, 0x7c00},
			{"F32ToBF16", F32ToBF16, bf16, 0x7f80, 0x7f80},
		} {
			h := c.conv(x)
			if math.IsNaN(float64(x)) {
				if h&c.nan != c.nan || h&0x7fff == c.inf {
					t.Fatalf("%s(NaN %#08x) = %#04x, not a NaN", c.name, bits, h)
				}
				continue
			}
			if h>>15 != uint16(bits>>31) {
				t.Fatalf("%s(%v) = %#04x: sign lost", c.name, x, h)
			}
			m := h & 0x7fff
			if m > c.inf {
				t.Fatalf("%s(%v) = %#04x, a NaN", c.name, x, h)
			}
			ax := math.Abs(float64(x))
			if math.IsInf(ax, 0) {
				if m != c.inf {
					t.Fatalf("%s(%v) = %#04x, want infinity", c.name, x, h)
				}
				continue
			}
			d := math.Abs(ax - c.value(m))
			for _, n := range []uint16{m - 1, m + 1} {
				if m == 0 && n == m-1 || n > c.inf {
					continue
				}
				dn := math.Abs(ax - c.value(n))
				if dn < d || dn == d && m&1 == 1 {
					t.Fatalf("%s(%v) = %#04x (%v), but %#04x (%v) is nearer or an even tie", c.name, x, h, c.value(m), n, c.value(n))
				}
			}
		}
	})
}
