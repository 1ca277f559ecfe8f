package f32

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// q8Matrix is a random K×N matrix quantized to Q8_0 along K, packed, with
// its dequantized values W[k, j] for the reference.
func q8Matrix(rng *rand.Rand, k, n int) (*Packed, []float32) {
	p := NewPackedQ8(k, n)
	w := make([]float32, k*n)
	for j := range n {
		col := randSlice(rng, k)
		if j%7 == 3 {
			clear(col[:min(k, 32)]) // an all-zero block: scale 0
		}
		q, err := tensor.QuantizeQ8_0(col, int64(k))
		if err != nil {
			panic(err)
		}
		p.FillColumnQ8(j, q.Q8_0Blocks())
		for kk, v := range q.Float32s() {
			w[kk*n+j] = v
		}
	}
	return p, w
}

// checkMulAddQ8 compares MulAdd with Q8_0 panels under ks against a
// float64 product of the dequantized weights, on a y that starts nonzero
// (MulAdd adds) and whose columns outside [j0, j1) must not change.
func checkMulAddQ8(t *testing.T, ks *kernels, rng *rand.Rand, k, n, m, j0, j1 int) {
	t.Helper()
	p, w := q8Matrix(rng, k, n)
	x := randSlice(rng, m*k)
	y := randSlice(rng, m*n)
	y0 := append([]float32(nil), y...)
	p.mulAdd(ks, y, n, x, k, m, j0, j1)
	for r := range m {
		for j := range n {
			want := float64(y0[r*n+j])
			var mag float64
			if j >= j0 && j < j1 {
				for kk := range k {
					prod := float64(x[r*k+kk]) * float64(w[kk*n+j])
					want += prod
					mag += math.Abs(prod)
				}
			}
			got := float64(y[r*n+j])
			if tol := 1e-5*mag + 1e-6; math.Abs(got-want) > tol {
				t.Fatalf("%s k=%d n=%d m=%d cols [%d,%d): y[%d,%d] = %v, want %v (tol %g)", ks.name, k, n, m, j0, j1, r, j, got, want, tol)
			}
		}
	}
}

// TestMulAddQ8RandomShapes: every ISA path against the reference on odd N,
// K a multiple of 32 (beyond kBlock too), M from 1 (direct kernels) to 40
// (the widen-then-float32 path), with partial column ranges.
func TestMulAddQ8RandomShapes(t *testing.T) {
	const seed = 20261205
	for _, ks := range available() {
		t.Run(ks.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(ks.isa)))
			for range 120 {
				k := 32 * (1 + rng.IntN(20))
				n := 1 + 2*rng.IntN(70)
				m := 1 + rng.IntN(40)
				panels := (n + PanelWidth - 1) / PanelWidth
				j0 := rng.IntN(panels) * PanelWidth
				j1 := j0 + rng.IntN(n-j0+1)
				checkMulAddQ8(t, ks, rng, k, n, m, j0, j1)
			}
		})
	}
}

// TestMulAddQ8Edges covers every row count of the direct kernels and the
// first of the widening path, K straddling kBlock, and empty products.
func TestMulAddQ8Edges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ks := range available() {
		for m := 0; m <= ks.mrQ8+1; m++ {
			checkMulAddQ8(t, ks, rng, 64, 65, m, 0, 65)
		}
		for _, c := range []struct{ k, n, m, j0, j1 int }{
			{32, 1, 1, 0, 1},
			{kBlock + 32, 33, 3, 32, 33},
			{2*kBlock + 96, 96, 13, 32, 70},
			{768, 100, 9, 64, 100},
			{0, 40, 3, 0, 40},
			{64, 40, 3, 32, 32},
		} {
			checkMulAddQ8(t, ks, rng, c.k, c.n, c.m, c.j0, c.j1)
		}
	}
}

// TestMulAddQ8PathsAgree: the assembly paths match the portable one at a
// GPT-2 size, for the direct kernels (m = 1, 8) and the widening path.
func TestMulAddQ8PathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const k, n = 768, 2304
	p, _ := q8Matrix(rng, k, n)
	for _, m := range []int{1, 8, 37} {
		x := randSlice(rng, m*k)
		want := make([]float32, m*n)
		p.mulAdd(genericKernels, want, n, x, k, m, 0, n)
		for _, ks := range available()[1:] {
			got := make([]float32, m*n)
			p.mulAdd(ks, got, n, x, k, m, 0, n)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-3 {
					t.Fatalf("%s m=%d: y[%d] = %v, generic %v", ks.name, m, i, got[i], want[i])
				}
			}
		}
	}
}

// TestPackedQ8Layout: FillColumnQ8 puts ggml's bytes where the kernels
// read them, FillColumnQuantize equals quantizing with llm/tensor, and the
// memory is 1088 bytes per 32×32 block.
func TestPackedQ8Layout(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const k, n = 64, 40
	a, b := NewPackedQ8(k, n), NewPackedQ8(k, n)
	for j := range n {
		col := randSlice(rng, k)
		q, _ := tensor.QuantizeQ8_0(col, k)
		a.FillColumnQ8(j, q.Q8_0Blocks())
		b.FillColumnQuantize(j, col)
		blk := q.Q8_0Blocks()
		base := (j / 32) * 2 * q8BlockBytes
		c := j % 32
		if a.q8[base+2*c] != blk[0] || a.q8[base+2*c+1] != blk[1] || a.q8[base+64+5*32+c] != blk[2+5] || a.q8[base+q8BlockBytes+64+c] != blk[34+2] {
			t.Fatalf("column %d is not where the kernels read it", j)
		}
	}
	if !bytes.Equal(a.q8, b.q8) {
		t.Fatal("FillColumnQuantize differs from FillColumnQ8 of tensor.QuantizeQ8_0")
	}
	if got := a.Bytes(); got != 2*2*q8BlockBytes || !a.Q8() {
		t.Fatalf("Bytes = %d", got)
	}
	for _, bad := range []func(){
		func() { NewPackedQ8(48, 3) },
		func() { a.FillColumnQ8(0, make([]byte, 33)) },
		func() { a.FillColumnQ8(n, make([]byte, 68)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			bad()
		}()
	}
}
