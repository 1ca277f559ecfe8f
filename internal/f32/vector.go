package f32

import "math"

// Dot returns Σ a[i]·b[i] over len(a); b must be at least as long.
func Dot(a, b []float32) float32 { return best.dotSlices(a, b) }

// Axpy adds a·x to y element-wise over len(y); x must be at least as long.
func Axpy(y []float32, a float32, x []float32) { best.axpySlices(y, a, x) }

// Scale multiplies every element of y by a.
func Scale(y []float32, a float32) { best.scaleSlice(y, a) }

// Max returns the largest element of x, or -Inf for an empty slice. NaNs
// are ignored (all NaNs give -Inf), as by a loop of "if v > m { m = v }".
// Softmax calls it once per attention row, and the LM head's argmax once
// per row and vocabulary unit.
func Max(x []float32) float32 { return best.max(x) }

func (ks *kernels) max(x []float32) float32 {
	if len(x) == 0 {
		return float32(math.Inf(-1))
	}
	done, m := asmMax(ks.isa, &x[0], len(x))
	for _, v := range x[done:] {
		if v > m {
			m = v
		}
	}
	return m
}

// Index returns the first i with x[i] == v, or -1 when there is none (always
// for a NaN v; +0 and -0 match each other, as with ==). The LM head's argmax
// calls it to find where a range's maximum, from Max, stands.
func Index(x []float32, v float32) int { return best.index(x, v) }

func (ks *kernels) index(x []float32, v float32) int {
	if len(x) == 0 {
		return -1
	}
	done, i := asmIndex(ks.isa, &x[0], len(x), v)
	if i >= 0 {
		return i
	}
	for j := done; j < len(x); j++ {
		if x[j] == v {
			return j
		}
	}
	return -1
}

// AxpyRows adds a·W to y, where W is len(a) rows of len(y) floats stored
// row-major in w: y[j] += Σ_i a[i]·w[i·len(y)+j]. Attention's weighted sum
// of a block of value rows is one call, with y held in registers across
// the block instead of loaded and stored once per row. The result is
// bit-identical to calling Axpy once per row, in order, so it does not
// depend on how a caller splits the rows (the GPT-2 backend's results do
// not depend on its KV block size).
func AxpyRows(y, a, w []float32) { best.axpyRows(y, a, w) }

// DotRows sets dst[i] to the dot product of q with row i of keys (rows of
// len(q) floats, row-major) for i < len(dst): attention's scores for a
// block of keys in one call. Each result is bit-identical however the rows
// are split into calls (it depends on q and its key row only), so callers'
// results do not depend on their block sizes.
func DotRows(dst, q, keys []float32) { best.dotRows(dst, q, keys) }

func (ks *kernels) axpyRows(y, a, w []float32) {
	n, k := len(y), len(a)
	if n == 0 || k == 0 {
		return
	}
	w = w[:n*k]
	if asmAxpyRows(ks.isa, &y[0], &a[0], &w[0], n, k) {
		return
	}
	for i, v := range a {
		ks.axpySlices(y, v, w[i*n:(i+1)*n])
	}
}

func (ks *kernels) dotRows(dst, q, keys []float32) {
	d, rows := len(q), len(dst)
	if rows == 0 {
		return
	}
	keys = keys[:rows*d]
	if d > 0 && asmDotRows(ks.isa, &dst[0], &q[0], &keys[0], rows, d) {
		return
	}
	for i := range dst {
		dst[i] = ks.dotSlices(q, keys[i*d:(i+1)*d])
	}
}

// ExpSubSum replaces every x[i] by exp(x[i] − m) and returns the sum of
// the results: the body of a softmax once m is the row's maximum. The exp
// is a vector polynomial within 3 ulps of the true value for arguments in
// [ExpLow, 88]; arguments outside are clamped to that range.
func ExpSubSum(x []float32, m float32) float32 { return best.expSubSum(x, m) }

// GeluTanh applies GPT-2's gelu_new, 0.5x(1 + tanh(sqrt(2/π)(x + 0.044715x³))),
// to every element of x in place, computed as x/(1 + exp(−2u)) with the
// exp of ExpSubSum: one exp and one division per element instead of a
// tanh, within a few ulps of the float64 formula.
func GeluTanh(x []float32) { best.geluTanh(x) }

// exp32 is the scalar exp with the vector code's clamping, for tails and
// the portable path.
func exp32(v float32) float32 {
	return float32(math.Exp(float64(min(max(v, ExpLow), 88))))
}

func (ks *kernels) expSubSum(x []float32, m float32) float32 {
	if len(x) == 0 {
		return 0
	}
	done, sum := asmExpSubSum(ks.isa, &x[0], len(x), m)
	for i := done; i < len(x); i++ {
		e := exp32(x[i] - m)
		x[i] = e
		sum += e
	}
	return sum
}

func (ks *kernels) geluTanh(x []float32) {
	if len(x) == 0 {
		return
	}
	for i := asmGelu(ks.isa, &x[0], len(x)); i < len(x); i++ {
		v := x[i]
		u := 0.7978845608028654 * (v + 0.044715*v*v*v)
		x[i] = v / (1 + exp32(-2*u))
	}
}

func (ks *kernels) dotSlices(a, b []float32) float32 {
	b = b[:len(a)]
	if len(a) == 0 {
		return 0
	}
	if s, ok := asmDot(ks.isa, &a[0], &b[0], len(a)); ok {
		return s
	}
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func (ks *kernels) axpySlices(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	if len(y) == 0 {
		return
	}
	if asmAxpy(ks.isa, &y[0], &x[0], len(y), a) {
		return
	}
	for i, v := range x {
		y[i] += a * v
	}
}

func (ks *kernels) scaleSlice(y []float32, a float32) {
	if len(y) == 0 {
		return
	}
	if asmScale(ks.isa, &y[0], len(y), a) {
		return
	}
	for i := range y {
		y[i] *= a
	}
}

// PrefetchL2 asks the CPU to start loading x into its L2 cache and
// returns at once. Attention calls it for a row's keys and values: paged
// blocks are scattered in memory, a few KiB each, and the hardware
// prefetchers lose the stream at every block boundary. It changes no
// value, and does nothing without assembly.
func PrefetchL2(x []float32) {
	if len(x) > 0 {
		prefetchT1(&x[0], (len(x)+15)/16)
	}
}

// Sum returns Σ x[i] with the vectorised dot product against ones.
func Sum(x []float32) float32 { return best.sum(x) }

func (ks *kernels) sum(x []float32) float32 {
	var s float32
	for len(x) > 0 {
		n := min(len(x), onesLen)
		s += ks.dotSlices(x[:n], ones[:n])
		x = x[n:]
	}
	return s
}

// LayerNorm sets y to the layer normalisation of the row x:
// (x − mean)/sqrt(var + eps)·g + b, with the population variance, in
// vectorised passes over the centred row (no E[x²] − mean² cancellation).
// y, g and b must be at least as long as x; y may be x.
func LayerNorm(y, x, g, b []float32, eps float64) { best.layerNorm(y, x, g, b, eps) }

func (ks *kernels) layerNorm(y, x, g, b []float32, eps float64) {
	n := len(x)
	if n == 0 {
		return
	}
	y, g, b = y[:n], g[:n], b[:n]
	mean := ks.sum(x) / float32(n)
	copy(y, x)
	for i := 0; i < n; i += onesLen {
		ks.axpySlices(y[i:min(i+onesLen, n)], -mean, ones[:])
	}
	inv := float32(1 / math.Sqrt(float64(ks.dotSlices(y, y))/float64(n)+eps))
	ks.scaleMulAdd(y, g, b, inv)
}

func (ks *kernels) scaleMulAdd(y, g, b []float32, a float32) {
	g, b = g[:len(y)], b[:len(y)]
	if len(y) == 0 || asmScaleMulAdd(ks.isa, &y[0], &g[0], &b[0], len(y), a) {
		return
	}
	for i, v := range y {
		y[i] = v*a*g[i] + b[i]
	}
}
