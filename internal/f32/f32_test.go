package f32

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// eps32 is float32's unit roundoff.
const eps32 = 1.0 / (1 << 23)

// refMulAdd is the obvious triple loop in float64, with the sum of |terms|
// for each output so the tolerance can follow the magnitudes involved.
func refMulAdd(y []float32, ldy int, x []float32, ldx int, w []float32, k, n, m, j0, j1 int) (ref, mag []float64) {
	ref = make([]float64, len(y))
	mag = make([]float64, len(y))
	for i, v := range y {
		ref[i] = float64(v)
		mag[i] = math.Abs(float64(v))
	}
	for r := range m {
		for j := j0; j < j1; j++ {
			for kk := range k {
				t := float64(x[r*ldx+kk]) * float64(w[kk*n+j])
				ref[r*ldy+j] += t
				mag[r*ldy+j] += math.Abs(t)
			}
		}
	}
	return ref, mag
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// checkMulAdd runs one case on kernel set ks and compares it with the
// reference. Float32 accumulation over K terms is off by at most about
// (K+2)·eps·Σ|terms| (a standard bound for recursive summation); we allow
// exactly that, which is loose enough for any summation order and tight
// enough to catch a wrong or missing term.
//
// With bf16 the weights are packed as bfloat16 and the reference uses the
// same rounded weights, so the bound is unchanged.
func checkMulAdd(t *testing.T, ks *kernels, rng *rand.Rand, k, n, m, j0, j1 int, transposed, bf16 bool) {
	t.Helper()
	ldx := k + rng.IntN(3)
	ldy := n + rng.IntN(3)
	w := randSlice(rng, k*n)
	var p *Packed
	if transposed {
		wt := make([]float32, n*k)
		for kk := range k {
			for j := range n {
				wt[j*k+kk] = w[kk*n+j]
			}
		}
		if bf16 {
			p = PackTransposedBF16(wt, n, k)
		} else {
			p = PackTransposed(wt, n, k)
		}
	} else if bf16 {
		p = PackBF16(w, k, n)
	} else {
		p = Pack(w, k, n)
	}
	if bf16 {
		for i, v := range w {
			w[i] = fromBF16(toBF16(v))
		}
	}
	x := randSlice(rng, max(0, (m-1)*ldx+k))
	y := randSlice(rng, m*ldy+5) // guard floats past the last row
	y0 := append([]float32(nil), y...)
	ref, mag := refMulAdd(y, ldy, x, ldx, w, k, n, m, j0, j1)
	p.mulAdd(ks, y, ldy, x, ldx, m, j0, j1)
	for i := range y {
		r, j := i/ldy, i%ldy
		inside := r < m && j >= j0 && j < j1
		if !inside {
			if y[i] != y0[i] {
				t.Fatalf("%s k=%d n=%d m=%d cols [%d,%d) transposed=%v bf16=%v: y[%d] (row %d col %d) outside the range changed from %v to %v",
					ks.name, k, n, m, j0, j1, transposed, bf16, i, r, j, y0[i], y[i])
			}
			continue
		}
		tol := float64(k+2)*eps32*mag[i] + 1e-30
		if d := math.Abs(float64(y[i]) - ref[i]); d > tol {
			t.Fatalf("%s k=%d n=%d m=%d cols [%d,%d) transposed=%v bf16=%v: y[%d,%d] = %v, want %v (diff %g > tol %g)",
				ks.name, k, n, m, j0, j1, transposed, bf16, r, j, y[i], ref[i], d, tol)
		}
	}
}

func TestMulAddRandomShapes(t *testing.T) {
	const seed = 20261202
	for _, ks := range available() {
		t.Run(ks.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(ks.isa)))
			t.Logf("seed %d", seed)
			for range 300 {
				k := 1 + rng.IntN(300)
				n := 1 + rng.IntN(130)
				m := 1 + rng.IntN(37)
				panels := (n + PanelWidth - 1) / PanelWidth
				j0 := rng.IntN(panels) * PanelWidth
				j1 := j0 + rng.IntN(n-j0+1)
				checkMulAdd(t, ks, rng, k, n, m, j0, j1, rng.IntN(2) == 0, rng.IntN(3) == 0)
			}
		})
	}
}

// TestMulAddEdges covers the shapes random draws rarely hit: one column,
// one k, K straddling the k-block, N one past a panel, empty ranges.
func TestMulAddEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct{ k, n, m, j0, j1 int }{
		{1, 1, 1, 0, 1},
		{1, 33, 7, 32, 33},
		{kBlock, 64, 13, 0, 64},
		{kBlock + 1, 65, 37, 0, 65},
		{2*kBlock - 1, 96, 6, 32, 70},
		{768, 100, 1, 0, 100},
		{768, 100, 8, 64, 100},
		{5, 40, 0, 0, 40},
		{5, 40, 3, 32, 32},
		{0, 40, 3, 0, 40},
	}
	for _, ks := range available() {
		for _, c := range cases {
			checkMulAdd(t, ks, rng, c.k, c.n, c.m, c.j0, c.j1, false, false)
			checkMulAdd(t, ks, rng, c.k, c.n, c.m, c.j0, c.j1, true, true)
		}
	}
}

// TestMulAddPathsAgree checks that the assembly paths match the portable
// one on a GPT-2 shape, not only the reference: the layouts are shared, so
// a kernel that read the wrong panel row would show here at full size.
func TestMulAddPathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const k, n, m = 768, 2304, 9
	p := Pack(randSlice(rng, k*n), k, n)
	x := randSlice(rng, m*k)
	want := make([]float32, m*n)
	p.mulAdd(genericKernels, want, n, x, k, m, 0, n)
	for _, ks := range available()[1:] {
		got := make([]float32, m*n)
		p.mulAdd(ks, got, n, x, k, m, 0, n)
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-3 {
				t.Fatalf("%s: y[%d] = %v, generic %v", ks.name, i, got[i], want[i])
			}
		}
	}
}

func TestPackLayout(t *testing.T) {
	const k, n = 3, 35
	w := make([]float32, k*n)
	for i := range w {
		w[i] = float32(i + 1)
	}
	p := Pack(w, k, n)
	if len(p.data) != 2*k*PanelWidth {
		t.Fatalf("packed length %d, want %d", len(p.data), 2*k*PanelWidth)
	}
	for pi := range 2 {
		for kk := range k {
			for c := range PanelWidth {
				j := pi*PanelWidth + c
				want := float32(0) // padding
				if j < n {
					want = w[kk*n+j]
				}
				if got := p.data[(pi*k+kk)*PanelWidth+c]; got != want {
					t.Fatalf("panel %d row %d col %d = %v, want %v", pi, kk, c, got, want)
				}
			}
		}
	}
	if p.K() != k || p.N() != n || p.Bytes() != int64(2*k*PanelWidth*4) {
		t.Fatalf("K, N, Bytes = %d, %d, %d", p.K(), p.N(), p.Bytes())
	}
}

func TestMulAddPanicsOnBadShapes(t *testing.T) {
	p := Pack(make([]float32, 4*64), 4, 64)
	y := make([]float32, 2*64)
	x := make([]float32, 2*4)
	bad := map[string]func(){
		"unaligned j0": func() { p.MulAdd(y, 64, x, 4, 2, 1, 64) },
		"j1 past N":    func() { p.MulAdd(y, 64, x, 4, 2, 0, 65) },
		"short x":      func() { p.MulAdd(y, 64, x[:7], 4, 2, 0, 64) },
		"short y":      func() { p.MulAdd(y[:127], 64, x, 4, 2, 0, 64) },
		"small ldx":    func() { p.MulAdd(y, 64, x, 3, 2, 0, 64) },
	}
	for name, f := range bad {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestVectorHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ks := range available() {
		for n := range 150 {
			a, b := randSlice(rng, n), randSlice(rng, n+3)
			var want, mag float64
			for i := range n {
				want += float64(a[i]) * float64(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
			}
			if got := ks.dotSlices(a, b); math.Abs(float64(got)-want) > float64(n+2)*eps32*mag {
				t.Fatalf("%s Dot n=%d = %v, want %v", ks.name, n, got, want)
			}

			y := randSlice(rng, n+2)
			y0 := append([]float32(nil), y...)
			const alpha = float32(-0.75)
			ks.axpySlices(y[:n], alpha, b)
			for i := range y {
				want := y0[i]
				if i < n {
					want = y0[i] + alpha*b[i]
				}
				// One rounding (FMA) or two (mul, add): within 2 ulps.
				if d := math.Abs(float64(y[i] - want)); d > 2*eps32*(math.Abs(float64(want))+math.Abs(float64(alpha*b[i]))) {
					t.Fatalf("%s Axpy n=%d: y[%d] = %v, want %v", ks.name, n, i, y[i], want)
				}
			}

			copy(y, y0)
			ks.scaleSlice(y[:n], alpha)
			for i := range y {
				want := y0[i]
				if i < n {
					want = alpha * y0[i]
				}
				if y[i] != want { // one multiply rounds the same everywhere
					t.Fatalf("%s Scale n=%d: y[%d] = %v, want %v", ks.name, n, i, y[i], want)
				}
			}
		}
	}
}

func TestMax(t *testing.T) {
	if got := Max(nil); !math.IsInf(float64(got), -1) {
		t.Fatalf("Max(nil) = %v", got)
	}
	if got := Max([]float32{-3, 2, float32(math.NaN()), 7, 1}); got != 7 {
		t.Fatalf("Max = %v, want 7", got)
	}
	// Every kernel set agrees with the scalar loop at every length around
	// the vector widths, with NaNs (skipped), infinities and signed zeros
	// (which zero comes back may differ: they compare equal, and both
	// callers only compare and subtract).
	loop := func(x []float32) float32 {
		m := float32(math.Inf(-1))
		for _, v := range x {
			if v > m {
				m = v
			}
		}
		return m
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	rng := rand.New(rand.NewPCG(21, 22))
	for _, ks := range available() {
		for n := range 70 {
			for trial := range 8 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
					switch rng.IntN(12) {
					case 0:
						x[i] = nan
					case 1:
						x[i] = -inf
					case 2 * min(trial, 1):
						x[i] = negZero
					case 3 * min(trial, 1):
						x[i] = 0
					}
				}
				if trial == 1 {
					for i := range x {
						x[i] = nan
					}
				}
				if trial == 2 && n > 0 {
					x[rng.IntN(n)] = inf
				}
				got, want := ks.max(x), loop(x)
				if got != want {
					t.Fatalf("%s: max of %v = %v, want %v", ks.name, x, got, want)
				}
			}
		}
	}
}

// TestIndex checks every kernel set against the scalar search at every
// length around the vector widths: the value first at each position, in
// several places at once, absent, NaN (never found) and a zero of either
// sign (found as the other).
func TestIndex(t *testing.T) {
	loop := func(x []float32, v float32) int {
		for i, w := range x {
			if w == v {
				return i
			}
		}
		return -1
	}
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	rng := rand.New(rand.NewPCG(23, 24))
	for _, ks := range available() {
		for n := range 70 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.IntN(5)) // duplicates everywhere
				if rng.IntN(9) == 0 {
					x[i] = nan
				}
			}
			vs := []float32{0, negZero, 1, 2, 3, 4, 5, nan, float32(math.Inf(1))}
			for _, v := range vs {
				if got, want := ks.index(x, v), loop(x, v); got != want {
					t.Fatalf("%s: index of %v in %v = %d, want %d", ks.name, v, x, got, want)
				}
			}
			// A value found only at position p, for every p: the lane and
			// the vector it is in both count.
			for p := range n {
				y := make([]float32, n)
				y[p] = 7
				if got := ks.index(y, 7); got != p {
					t.Fatalf("%s: index of 7 at %d of %d = %d", ks.name, p, n, got)
				}
			}
			// The value only past n, where the slice's array goes on: a
			// kernel reading beyond its whole vectors (a step or a bound
			// off by part of a vector) finds it there.
			buf := make([]float32, n+16)
			for i := n; i < len(buf); i++ {
				buf[i] = 7
			}
			if got := ks.index(buf[:n], 7); got != -1 {
				t.Fatalf("%s: index of 7 in %d zeros followed by 7s = %d, want -1", ks.name, n, got)
			}
		}
	}
}

// TestDetect checks that the chosen set is one this machine can run and,
// on amd64 with AVX2, that it is not the portable one: a plain build must
// get the fast path.
func TestDetect(t *testing.T) {
	av := available()
	if best != av[len(av)-1] {
		t.Fatalf("best is %s, widest available is %s", best.name, av[len(av)-1].name)
	}
	if Impl() != best.name {
		t.Fatalf("Impl() = %q", Impl())
	}
}

func TestExpSubSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, ks := range available() {
		for n := range 70 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.Float64()*110 - 90) // below the low clamp, and up to e^18
			}
			if n > 3 {
				x[0], x[1], x[2] = 0, -1e-8, 91 // 91 − m is past the high clamp
			}
			const m = float32(1.5)
			orig := append([]float32(nil), x...)
			sum := ks.expSubSum(x, m)
			var want float64
			for i, v := range orig {
				a := min(max(float64(v-m), ExpLow), 88)
				e := math.Exp(a)
				want += e
				if d := math.Abs(float64(x[i]) - e); d > 3*eps32*e {
					t.Fatalf("%s: exp(%v) = %v, want %v (%.2g ulps)", ks.name, a, x[i], e, d/e/eps32)
				}
			}
			if d := math.Abs(float64(sum) - want); d > float64(n+3)*eps32*want {
				t.Fatalf("%s n=%d: sum %v, want %v", ks.name, n, sum, want)
			}
		}
	}
}

func TestGeluTanh(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, ks := range available() {
		for n := range 70 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 4)
			}
			if n > 2 {
				x[0], x[1] = -30, 30
			}
			orig := append([]float32(nil), x...)
			ks.geluTanh(x)
			for i, v := range orig {
				f := float64(v)
				u := 0.7978845608028654 * (f + 0.044715*f*f*f)
				// x·σ(2u) equals 0.5x(1 + tanh u) and, unlike it, does not
				// cancel to zero for x < −5 in float64.
				want := f / (1 + math.Exp(-2*u))
				// Rounding u costs an absolute error of a few ulps of 2u in
				// the exp's argument, which becomes a relative error of the
				// result where x < 0; then the exp's 3 ulps and the division.
				if d := math.Abs(float64(x[i]) - want); d > 4*eps32*(2+math.Abs(2*u))*math.Abs(want)+1e-37*math.Abs(f) {
					t.Fatalf("%s: gelu(%v) = %v, want %v", ks.name, v, x[i], want)
				}
			}
		}
	}
}

func TestRowsHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, ks := range available() {
		for _, n := range []int{1, 7, 8, 16, 24, 48, 64, 80, 100, 128} {
			for _, k := range []int{0, 1, 3, 7, 16, 64} {
				a, w := randSlice(rng, k), randSlice(rng, n*k+2)
				y := randSlice(rng, n+2)
				y0 := append([]float32(nil), y...)
				ks.axpyRows(y[:n], a, w)
				for j := range y {
					want, mag := float64(y0[j]), math.Abs(float64(y0[j]))
					if j < n {
						for i := range k {
							tm := float64(a[i]) * float64(w[i*n+j])
							want += tm
							mag += math.Abs(tm)
						}
					}
					if d := math.Abs(float64(y[j]) - want); d > float64(k+2)*eps32*mag {
						t.Fatalf("%s AxpyRows n=%d k=%d: y[%d] = %v, want %v", ks.name, n, k, j, y[j], want)
					}
				}

				q, keys := randSlice(rng, n), randSlice(rng, k*n+3)
				dst := randSlice(rng, k+1)
				last := dst[k]
				ks.dotRows(dst[:k], q, keys)
				for i := range k {
					var want, mag float64
					for j := range n {
						tm := float64(q[j]) * float64(keys[i*n+j])
						want += tm
						mag += math.Abs(tm)
					}
					if d := math.Abs(float64(dst[i]) - want); d > float64(n+2)*eps32*mag {
						t.Fatalf("%s DotRows d=%d rows=%d: dst[%d] = %v, want %v", ks.name, n, k, i, dst[i], want)
					}
				}
				if dst[k] != last {
					t.Fatalf("%s DotRows wrote past its rows", ks.name)
				}
			}
		}
	}
}

func TestBF16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above the tie
		{float32(math.Inf(1)), 0x7f80},
		{math.MaxFloat32, 0x7f80}, // rounds to +Inf, as IEEE does
	}
	for _, c := range cases {
		if got := toBF16(c.in); got != c.want {
			t.Errorf("toBF16(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if nan := fromBF16(toBF16(float32(math.NaN()))); nan == nan {
		t.Errorf("NaN did not stay NaN: %v", nan)
	}
	p32, p16 := Pack(make([]float32, 40*70), 40, 70), PackBF16(make([]float32, 40*70), 40, 70)
	if p16.Bytes()*2 != p32.Bytes() || !p16.BF16() || p32.BF16() {
		t.Errorf("Bytes %d (bf16) vs %d (float32), BF16 %v %v", p16.Bytes(), p32.Bytes(), p16.BF16(), p32.BF16())
	}
}

// TestAxpyRowsMatchesAxpy checks that AxpyRows rounds exactly as one Axpy
// per row, whatever the split of rows into calls: callers rely on results
// that do not depend on their block sizes.
func TestAxpyRowsMatchesAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, ks := range available() {
		for _, n := range []int{8, 16, 24, 64} {
			const k = 37
			a, w := randSlice(rng, k), randSlice(rng, n*k)
			want := randSlice(rng, n)
			got := append([]float32(nil), want...)
			for i := range k {
				ks.axpySlices(want, a[i], w[i*n:(i+1)*n])
			}
			for i0 := 0; i0 < k; i0 += 5 { // blocks of 5 rows, then 2
				i1 := min(i0+5, k)
				ks.axpyRows(got, a[i0:i1], w[i0*n:i1*n])
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("%s n=%d: y[%d] = %v by blocks, %v row by row", ks.name, n, j, got[j], want[j])
				}
			}
		}
	}
}

// TestDotRowsSplitInvariant checks that a key's score does not depend on
// how the keys are grouped into DotRows calls (four at a time or singly).
func TestDotRowsSplitInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, ks := range available() {
		for _, d := range []int{8, 16, 48, 64, 80} {
			const rows = 11
			q, keys := randSlice(rng, d), randSlice(rng, rows*d)
			whole := make([]float32, rows)
			ks.dotRows(whole, q, keys)
			parts := make([]float32, rows)
			for i0, step := 0, 1; i0 < rows; i0, step = i0+step, step+1 { // 1, 2, 3, 5 keys
				i1 := min(i0+step, rows)
				ks.dotRows(parts[i0:i1], q, keys[i0*d:i1*d])
			}
			for i := range whole {
				if whole[i] != parts[i] {
					t.Fatalf("%s d=%d: key %d scores %v in one call, %v in parts", ks.name, d, i, whole[i], parts[i])
				}
			}
		}
	}
}

// TestSiLUMul: every kernel set computes silu(g)·u = g/(1+exp(−g))·u to a
// few ulps, including the tails shorter than a vector and arguments far
// outside the exp's clamped range.
func TestSiLUMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, ks := range available() {
		for n := range 70 {
			g, u := make([]float32, n), make([]float32, n)
			for i := range g {
				g[i], u[i] = float32(rng.NormFloat64()*4), float32(rng.NormFloat64())
			}
			if n > 3 {
				g[0], g[1], g[2] = -120, 120, 0
			}
			orig := append([]float32(nil), g...)
			ks.siluMul(g, u)
			for i, v := range orig {
				f := float64(v)
				want := f / (1 + math.Exp(-f)) * float64(u[i])
				// The exp's argument is exact; its 3 ulps, the division
				// and the product round a few more. Below −88 the exp is
				// clamped (ExpLow's twin), so silu is some 1e-37 instead of
				// 1e-51: zero for any activation.
				if d := math.Abs(float64(g[i]) - want); d > 8*eps32*(1+math.Abs(f))*math.Abs(want)+1e-35 {
					t.Fatalf("%s: silu(%v)·%v = %v, want %v", ks.name, v, u[i], g[i], want)
				}
			}
		}
	}
}

// TestRMSNorm: x/sqrt(mean(x²)+eps)·g against a float64 computation.
func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, ks := range available() {
		for _, n := range []int{1, 7, 64, 896, 1500} {
			x, g, y := make([]float32, n), make([]float32, n), make([]float32, n)
			var ss float64
			for i := range x {
				x[i], g[i] = float32(rng.NormFloat64()*0.05), float32(1+rng.NormFloat64()*0.1)
				ss += float64(x[i]) * float64(x[i])
			}
			ks.rmsNorm(y, x, g, 1e-6)
			inv := 1 / math.Sqrt(ss/float64(n)+1e-6)
			for i := range x {
				want := float64(x[i]) * inv * float64(g[i])
				if d := math.Abs(float64(y[i]) - want); d > 4*eps32*math.Abs(want)+1e-30 {
					t.Fatalf("%s n=%d: y[%d] = %v, want %v", ks.name, n, i, y[i], want)
				}
			}
		}
	}
}

// TestMulAddBatchInvariant: under every kernel set, a row's product is
// the same to the bit whether it is computed alone or among other rows
// (every row count from the direct kernels to several row blocks), for
// float32, bfloat16 and Q8_0 matrices with K over two kBlock slices, and
// whether y starts at zero or not. The engine's batch invariance rests on
// it: a sequence's logits must not depend on the rest of its step.
func TestMulAddBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const k, n, rows = 2*kBlock + 96, 40, 23 // a partial slice; a partial panel
	w := randSlice(rng, k*n)
	q8, _ := q8Matrix(rng, k, n)
	mats := []struct {
		name string
		p    *Packed
	}{{"float32", Pack(w, k, n)}, {"bfloat16", PackBF16(w, k, n)}, {"q8_0", q8}}
	x := randSlice(rng, rows*k)
	y0 := randSlice(rng, rows*n)
	for _, ks := range q8KernelSets() {
		for _, mat := range mats {
			t.Run(ks.name+"/"+mat.name, func(t *testing.T) {
				alone := slices.Clone(y0)
				for r := range rows {
					mat.p.mulAdd(ks, alone[r*n:], n, x[r*k:], k, 1, 0, n)
				}
				for _, m := range []int{2, 3, 4, 5, 6, 7, 8, 9, 13, 23} {
					for r0 := 0; r0+m <= rows; r0 += m {
						got := slices.Clone(y0[r0*n : (r0+m)*n])
						mat.p.mulAdd(ks, got, n, x[r0*k:], k, m, 0, n)
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
}
