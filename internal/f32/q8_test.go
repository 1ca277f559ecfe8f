package f32

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
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
		// The integer kernels round x to 16 bits per block of 32: at most
		// a step, amax/16384, per value (half a step, or a whole one for
		// the value that saturates).
		amax := make([]float64, k/32)
		for kk := range k {
			amax[kk/32] = max(amax[kk/32], math.Abs(float64(x[r*k+kk])))
		}
		for j := range n {
			want := float64(y0[r*n+j])
			var mag, xerr float64
			if j >= j0 && j < j1 {
				for kk := range k {
					prod := float64(x[r*k+kk]) * float64(w[kk*n+j])
					want += prod
					mag += math.Abs(prod)
					xerr += math.Abs(float64(w[kk*n+j])) * amax[kk/32] / 16384
				}
			}
			if ks.q8Int == q8IntNone {
				xerr = 0
			}
			got := float64(y[r*n+j])
			if tol := 1e-5*mag + 1.01*xerr + 1e-6; math.Abs(got-want) > tol {
				t.Fatalf("%s k=%d n=%d m=%d cols [%d,%d): y[%d,%d] = %v, want %v (tol %g)", ks.name, k, n, m, j0, j1, r, j, got, want, tol)
			}
		}
	}
}

// q8KernelSets are the kernel sets whose Q8_0 paths the tests check: the
// available ones and, on AVX-512, the integer kernels without VNNI and
// the float path.
func q8KernelSets() []*kernels { return append(available(), q8Variants()...) }

// TestMulAddQ8RandomShapes: every ISA path against the reference on odd N,
// K a multiple of 32 (beyond kBlock and the integer kernels' slab too), M
// from 1 (direct kernels) to 40 (row groups, the widen-then-float32
// path), with partial column ranges.
func TestMulAddQ8RandomShapes(t *testing.T) {
	const seed = 20261205
	for _, ks := range q8KernelSets() {
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

// TestMulAddQ8Edges covers every row count of the direct kernels, of
// two and three integer row groups and the first of the widening path, K
// straddling kBlock and the integer slab, and empty products.
func TestMulAddQ8Edges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ks := range q8KernelSets() {
		for m := 0; m <= max(ks.mrQ8, 2*q8IntMR)+5; m++ {
			checkMulAddQ8(t, ks, rng, 64, 65, m, 0, 65)
			checkMulAddQ8(t, ks, rng, 32*(q8SlabBlocks+3), 40, m, 0, 40)
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
// GPT-2 size, for one and two integer row groups (m = 1, 8) and more.
func TestMulAddQ8PathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const k, n = 768, 2304
	p, _ := q8Matrix(rng, k, n)
	for _, m := range []int{1, 8, 37} {
		x := randSlice(rng, m*k)
		want := make([]float32, m*n)
		p.mulAdd(genericKernels, want, n, x, k, m, 0, n)
		for _, ks := range q8KernelSets()[1:] {
			got := make([]float32, m*n)
			p.mulAdd(ks, got, n, x, k, m, 0, n)
			for i := range got {
				// The integer kernels' 16-bit activations move a sum
				// of 768 products by about 2e-5 of its size.
				if d := math.Abs(float64(got[i] - want[i])); d > 4e-3+1e-4*math.Abs(float64(want[i])) {
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
		// q[5, c] is in pair 2, odd k; q[32, c] is the second block's
		// first, pair 0, even k.
		if a.q8[base+2*c] != blk[0] || a.q8[base+2*c+1] != blk[1] || a.q8[base+64+2*64+(c/16)*32+(c%16)*2+1] != blk[2+5] || a.q8[base+q8BlockBytes+64+(c/16)*32+(c%16)*2] != blk[34+2] {
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

// TestQ8RowsQuantize: the assembly quantizer gives the portable one's
// values and scales bit for bit, on random rows, an all-zero block, a
// block whose largest value is a power of two (the top of the range), one
// just below the next (the value that rounds to 32768 and saturates), and
// tiny values; each value is within a step of x, and the scales are
// block-major.
func TestQ8RowsQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const m, k = 5, 7 * 32
	x := randSlice(rng, m*k)
	clear(x[32:64])                      // row 0, block 1: zeros
	x[2*k+5] = 4                         // row 2, block 0: amax a power of two
	x[2*k+40] = math.Nextafter32(8, 0)   // row 2, block 1: rounds to 32768
	for i := 3*k + 64; i < 3*k+96; i++ { // row 3, block 2: tiny
		x[i] *= 1e-30
	}
	var want Q8Rows
	want.quantize(genericKernels, x, k, m, k, 0, m)
	for _, ks := range q8KernelSets()[1:] {
		var got Q8Rows
		got.quantize(ks, x, k, m, k, 0, m)
		if !slices.Equal(got.q, want.q) || !slices.Equal(got.s, want.s) {
			t.Errorf("%s: quantized rows differ from the portable quantizer's", ks.name)
		}
	}
	for r := range m {
		for kk := range k {
			b := kk / 32
			d := want.s[b*m+r]
			if e := math.Abs(float64(x[r*k+kk]) - float64(d)*float64(want.q[r*k+kk])); e > float64(d) {
				t.Fatalf("x[%d, %d] = %v quantized to %d × %v", r, kk, x[r*k+kk], want.q[r*k+kk], d)
			}
		}
	}
	if q := want.q[2*k+40]; q != 32767 {
		t.Errorf("the value just under 2^(E+1) quantized to %d, want 32767 (saturated)", q)
	}
	if q := want.q[2*k+5]; q != 16384 {
		t.Errorf("amax 4 quantized to %d, want 16384", q)
	}
}

// TestMulAddQ8RowsBatchInvariant: a row's integer Q8_0 product is the
// same bits however many rows the call carries and wherever the row sits
// among them (one decode row, a few, several row groups of a prefill), so
// that a sequence's logits do not depend on what it is batched with.
func TestMulAddQ8RowsBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const k, n = 32 * (2*q8SlabBlocks + 3), 40 // two full slabs and a partial one; a partial panel
	p, _ := q8Matrix(rng, k, n)
	const rows = 23
	x := randSlice(rng, rows*k)
	for _, ks := range q8KernelSets() {
		if ks.q8Int == q8IntNone {
			continue
		}
		t.Run(ks.name, func(t *testing.T) {
			var a Q8Rows
			a.quantize(ks, x, k, rows, k, 0, rows)
			alone := make([]float32, rows*n)
			for r := range rows {
				p.mulAddQ8Rows(ks, alone[r*n:], n, &a, r, 1, 0, n)
			}
			for _, m := range []int{2, 5, 6, 7, 13, 23} {
				for r0 := 0; r0+m <= rows; r0 += m {
					got := make([]float32, m*n)
					p.mulAddQ8Rows(ks, got, n, &a, r0, m, 0, n)
					for i := range got {
						if got[i] != alone[r0*n+i] {
							t.Fatalf("m=%d rows from %d: y[%d] = %v, the row alone %v", m, r0, i, got[i], alone[r0*n+i])
						}
					}
				}
			}
		})
	}
}
