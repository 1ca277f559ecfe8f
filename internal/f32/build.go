package f32

import (
	"fmt"
	"math"
)

// NewPacked returns a zeroed K×N packed matrix, float32 or (bf16) bfloat16,
// to be filled with FillRow and FillColumn: for weights whose source is
// not one row-major float32 matrix (several projections side by side, a
// bfloat16 checkpoint, an out×in nn.Linear weight). Filling is not safe
// for concurrent use on overlapping panels.
func NewPacked(k, n int, bf16 bool) *Packed { return newPacked(k, n, bf16) }

// FillRow sets row kk of p from column j0 on to the values of row (the
// part of a row that one source matrix supplies), rounding to bfloat16 for
// a bfloat16 p.
func (p *Packed) FillRow(kk, j0 int, row []float32) {
	if kk < 0 || kk >= p.k || j0 < 0 || j0+len(row) > p.n {
		panic(fmt.Sprintf("f32: FillRow %d at column %d (%d values) of %d×%d", kk, j0, len(row), p.k, p.n))
	}
	for i, v := range row {
		j := j0 + i
		p.set((j/PanelWidth)*p.k*PanelWidth+kk*PanelWidth+j%PanelWidth, v)
	}
}

// FillColumn sets column j of p (K values) from col, rounding to bfloat16
// for a bfloat16 p: an out×in weight's row is a column of the in×out
// matrix the kernels multiply by.
func (p *Packed) FillColumn(j int, col []float32) {
	if j < 0 || j >= p.n || len(col) != p.k {
		panic(fmt.Sprintf("f32: FillColumn %d (%d values) of %d×%d", j, len(col), p.k, p.n))
	}
	base := (j/PanelWidth)*p.k*PanelWidth + j%PanelWidth
	if p.half != nil {
		for kk, v := range col {
			p.half[base+kk*PanelWidth] = toBF16(v)
		}
		return
	}
	for kk, v := range col {
		p.data[base+kk*PanelWidth] = v
	}
}

// RMSNorm sets y to the root-mean-square normalisation of the row x,
// x/sqrt(mean(x²) + eps)·g, as Hugging Face's LlamaRMSNorm computes it in
// float32 (the mean of squares accumulated in float64 here, which only
// makes it closer to exact). y and g must be at least as long as x; y may
// be x.
func RMSNorm(y, x, g []float32, eps float64) { best.rmsNorm(y, x, g, eps) }

func (ks *kernels) rmsNorm(y, x, g []float32, eps float64) {
	n := len(x)
	if n == 0 {
		return
	}
	y, g = y[:n], g[:n]
	var ss float64
	for i := 0; i < n; i += onesLen {
		c := x[i:min(i+onesLen, n)]
		ss += float64(ks.dotSlices(c, c))
	}
	inv := float32(1 / math.Sqrt(ss/float64(n)+eps))
	for i, v := range x {
		y[i] = v * inv * g[i]
	}
}

// SiLUMul sets gate[i] to silu(gate[i])·up[i], the gated MLP's
// activation: silu(x) = x·sigmoid(x) = x/(1+exp(−x)).
func SiLUMul(gate, up []float32) { best.siluMul(gate, up) }

func (ks *kernels) siluMul(gate, up []float32) {
	if len(gate) == 0 {
		return
	}
	up = up[:len(gate)]
	for i := asmSiLUMul(ks.isa, &gate[0], &up[0], len(gate)); i < len(gate); i++ {
		v := gate[i]
		gate[i] = v / (1 + exp32(-v)) * up[i]
	}
}
