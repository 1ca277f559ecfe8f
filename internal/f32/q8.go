package f32

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Q8_0 panels: a Packed built by NewPackedQ8 holds 8-bit weights, ggml's
// Q8_0 (blocks of 32 values along K with one float16 scale each),
// rearranged so that a kernel streams them front to back as it does
// float32 panels. Panel p (columns [32p, 32p+32)) is K/32 blocks of
// q8BlockBytes, block b holding
//
//	32 float16 scales, d[b, c] for column c (64 bytes), then
//	16 pairs of k, pair i 64 bytes: for columns 0–15 then 16–31, the
//	column's q[32b+2i, c] and q[32b+2i+1, c] side by side
//
// (q8Offset gives the byte of q[kk, c]), so the weight W[k, j] is d·q and a
// block is 1088 bytes for 1024 weights: 1.0625 bytes a weight, ggml's own
// 34 bytes per 32, the file's bytes rearranged, never a second copy. The
// pairs suit the integer kernels: 32 bytes widen to 16 columns' int16
// pairs, which VPDPWSSD multiplies by a pair of int16 activations.
//
// With AVX-512BW or AVX2 (kernels.q8Int) the products quantize each row of x per
// block of 32 to int16 (Q8Rows: a power-of-two scale, error at most
// 1/32768 of the block's largest |x|, a hundred times below the weights'
// own rounding) and sum in int32 exactly; elsewhere the weights are widened
// to float32 and x stays float32.
const q8BlockBytes = 64 + PanelWidth*PanelWidth

// q8Offset is the byte of q[kk, c] within a block (kk, c < 32).
func q8Offset(kk, c int) int {
	return 64 + (kk/2)*64 + (c/16)*32 + (c%16)*2 + kk%2
}

// q8Len is the values per Q8_0 block (ggml's QK8_0).
const q8Len = 32

// q8KBlock is the depth of the panel slice widened to float32 for the
// float paths: 128×32 floats, 16 KiB, so that the slice and the rows of x
// it meets fit in L1 together (at kBlock, 256, they did not, and 32-row
// products ran 20% slower than from bfloat16 panels).
const q8KBlock = 128

// q8IntMR is the most rows an AVX-512 integer kernel carries (gen_q8.go's
// q8MaxRows), q8IntMRAVX2 an AVX2 one (q8MaxRowsAVX2).
const q8IntMR, q8IntMRAVX2 = 6, 3

// q8RowsPerCall is the most rows the integer kernels of level carry.
func q8RowsPerCall(level int) int {
	if level == q8IntAVX2 {
		return q8IntMRAVX2
	}
	return q8IntMR
}

// q8SlabBlocks is the depth, in blocks, of the slice of a panel that the
// integer kernels run over for every row group: 34 KiB of weights, which
// stay in L1 (or L2) while the groups' activations stream past. Every
// product, one row or many, adds into y once per slice, so that a row's
// result does not depend on the rows beside it; 32 blocks keep that to
// one addition for K up to 1024 (a decode step's usual matrices) and a
// few for the MLP's down projection.
const q8SlabBlocks = 32

// NewPackedQ8 allocates a zeroed K×N Q8_0 matrix (k a multiple of 32),
// to be filled with FillColumnQ8 or FillColumnQuantize. Its MulAdd reads
// about 1.06 bytes per weight.
func NewPackedQ8(k, n int) *Packed {
	if k < 0 || n < 0 || k%q8Len != 0 {
		panic(fmt.Sprintf("f32: Q8_0 matrix shape %d×%d (K must be a multiple of %d)", k, n, q8Len))
	}
	size := (n + PanelWidth - 1) / PanelWidth * (k / q8Len) * q8BlockBytes
	p := &Packed{k: k, n: n}
	p.q8 = unsafe.Slice((*byte)(allocLarge(p, size)), size)
	return p
}

// Q8 reports whether the values are stored as Q8_0.
func (p *Packed) Q8() bool { return p.q8 != nil }

// FillColumnQ8 sets column j of a Q8_0 p from blocks, ggml's Q8_0 blocks
// (34 bytes: float16 scale, 32 int8) of the column's K values in order:
// one row of an out×in Q8_0 weight, whose blocks run along in = K. The
// bytes are copied as they are, so the product uses exactly the file's
// weights.
func (p *Packed) FillColumnQ8(j int, blocks []byte) {
	nb := p.k / q8Len
	if p.q8 == nil || j < 0 || j >= p.n || len(blocks) != nb*(2+q8Len) {
		panic(fmt.Sprintf("f32: FillColumnQ8 %d (%d bytes) of %d×%d", j, len(blocks), p.k, p.n))
	}
	c := j % PanelWidth
	panel := p.q8[(j/PanelWidth)*nb*q8BlockBytes:]
	for b := range nb {
		src := blocks[b*(2+q8Len) : (b+1)*(2+q8Len)]
		dst := panel[b*q8BlockBytes : (b+1)*q8BlockBytes]
		dst[2*c], dst[2*c+1] = src[0], src[1]
		for kk, q := range src[2:] {
			dst[q8Offset(kk, c)] = q
		}
	}
}

// FillColumnQuantize sets column j of a Q8_0 p to col (K values)
// quantized per block of 32 as ggml's reference quantizer does (amax/127
// scale rounded to float16, values rounded half away from zero): for a
// float checkpoint quantized at load, and for tests.
func (p *Packed) FillColumnQuantize(j int, col []float32) {
	if len(col) != p.k {
		panic(fmt.Sprintf("f32: FillColumnQuantize %d (%d values) of %d×%d", j, len(col), p.k, p.n))
	}
	q, err := tensor.QuantizeQ8_0(col, int64(p.k))
	if err != nil {
		panic("f32: " + err.Error())
	}
	p.FillColumnQ8(j, q.Q8_0Blocks())
}

// mulAddQ8 is MulAdd for Q8_0 panels (shapes already checked). With
// integer kernels the rows of x are quantized (Q8Rows) for this call
// alone: callers that split one product over many calls, as the CPU
// backend's workers do by panels, quantize once and call MulAddQ8Rows.
// Otherwise, up to mrQ8 rows (the portable kernel) a product streams each
// panel once, widening as it goes; more rows, and every product of the
// assembly float path, widen an L1-sized slice of a panel to float32 once
// and run the float32 kernels over it for every row block, so a prefill
// costs what a float32 product of L1-resident weights costs, plus one
// widening per slice.
func (p *Packed) mulAddQ8(ks *kernels, y []float32, ldy int, x []float32, ldx int, m, j0, j1 int) {
	if ks.q8Int != q8IntNone {
		a := q8RowsPool.Get().(*Q8Rows)
		a.quantize(ks, x, ldx, m, p.k, 0, m)
		p.mulAddQ8Rows(ks, y, ldy, a, 0, m, j0, j1)
		q8RowsPool.Put(a)
		return
	}
	K, nb := p.k, p.k/q8Len
	var tile [maxMR * PanelWidth]float32
	if m <= ks.mrQ8 {
		// One q8KBlock slice at a time, as the widening path below adds
		// into y, and with the same products (x·(d·q)), so that a row's
		// result does not depend on how many rows share the call.
		const sb = q8KBlock / q8Len
		for pj := j0; pj < j1; pj += PanelWidth {
			cols := min(PanelWidth, j1-pj)
			for b0 := 0; b0 < nb; b0 += sb {
				bn := min(sb, nb-b0)
				off := (pj/PanelWidth)*nb*q8BlockBytes + b0*q8BlockBytes
				w := p.q8[off : off+bn*q8BlockBytes]
				xs := x[b0*q8Len:]
				if cols == PanelWidth {
					genericTileQ8(y[pj:], ldy, xs, ldx, w, m, bn)
					continue
				}
				for i := range m {
					copy(tile[i*PanelWidth:i*PanelWidth+cols], y[i*ldy+pj:i*ldy+pj+cols])
				}
				genericTileQ8(tile[:], PanelWidth, xs, ldx, w, m, bn)
				for i := range m {
					copy(y[i*ldy+pj:i*ldy+pj+cols], tile[i*PanelWidth:i*PanelWidth+cols])
				}
			}
		}
		return
	}
	mr, halves := ks.mr, false
	if ks.mrHalf > 0 {
		mr, halves = ks.mrHalf, true
	}
	var deq [q8KBlock * PanelWidth]float32
	for k0 := 0; k0 < K; k0 += q8KBlock {
		kn := min(q8KBlock, K-k0)
		panel := deq[:kn*PanelWidth]
		for pj := j0; pj < j1; pj += PanelWidth {
			off := (pj/PanelWidth)*nb*q8BlockBytes + (k0/q8Len)*q8BlockBytes
			dequantQ8(ks, panel, p.q8[off:off+kn/q8Len*q8BlockBytes])
			cols := min(PanelWidth, j1-pj)
			for r := 0; r < m; r += mr {
				rows := min(mr, m-r)
				xs := x[r*ldx+k0:]
				if cols == PanelWidth {
					tileL1(ks, halves, y[r*ldy+pj:], ldy, xs, ldx, panel, rows, kn)
					continue
				}
				for i := range rows {
					copy(tile[i*PanelWidth:i*PanelWidth+cols], y[(r+i)*ldy+pj:(r+i)*ldy+pj+cols])
				}
				tileL1(ks, halves, tile[:], PanelWidth, xs, ldx, panel, rows, kn)
				for i := range rows {
					copy(y[(r+i)*ldy+pj:(r+i)*ldy+pj+cols], tile[i*PanelWidth:i*PanelWidth+cols])
				}
			}
		}
	}
}

// q8RowsPool holds the Q8Rows that MulAdd quantizes into, so that a
// product allocates nothing once warm.
var q8RowsPool = sync.Pool{New: func() any { return new(Q8Rows) }}

// Q8Rows is m rows of activations quantized for the integer Q8_0 kernels:
// each row's blocks of 32 values as int16, q = round(x/d) with the
// block's scale d the power of two for which the largest |x| quantizes to
// [16384, 32768) (the rounding error is at most amax/32768, far below
// the Q8_0 weights' amax/254). Quantizing once per product and sharing it between the calls
// that split the product's columns saves doing it per call; its zero
// value is ready for Reset.
type Q8Rows struct {
	m, k int
	q    []int16   // m rows of k
	s    []float32 // scale of row r's block b at s[b·m+r]: a block's rows adjacent
}

// Reset shapes a for m rows of k values (k a multiple of 32), growing its
// buffers when needed; the rows are then set with Quantize.
func (a *Q8Rows) Reset(m, k int) {
	if m < 0 || k < 0 || k%q8Len != 0 {
		panic(fmt.Sprintf("f32: Q8Rows of %d×%d (K must be a multiple of %d)", m, k, q8Len))
	}
	a.m, a.k = m, k
	if n := m * k; cap(a.q) < n {
		a.q = make([]int16, n)
	}
	if n := m * k / q8Len; cap(a.s) < n {
		a.s = make([]float32, n)
	}
	a.q, a.s = a.q[:m*k], a.s[:m*k/q8Len]
}

// Quantize sets rows [r0, r1) of a from x, whose row r is x[r·ldx :
// r·ldx+K] (K as Reset set). Disjoint row ranges may be quantized
// concurrently.
func (a *Q8Rows) Quantize(x []float32, ldx, r0, r1 int) {
	if r0 < 0 || r0 > r1 || r1 > a.m || ldx < a.k || r1 > r0 && len(x) < (r1-1)*ldx+a.k {
		panic(fmt.Sprintf("f32: Q8Rows.Quantize rows [%d, %d) of %d×%d from %d floats (ldx %d)", r0, r1, a.m, a.k, len(x), ldx))
	}
	a.quantizeRows(best, x, ldx, r0, r1)
}

// quantize is Reset then Quantize of every row, under ks.
func (a *Q8Rows) quantize(ks *kernels, x []float32, ldx, m, k, r0, r1 int) {
	a.Reset(m, k)
	a.quantizeRows(ks, x, ldx, r0, r1)
}

func (a *Q8Rows) quantizeRows(ks *kernels, x []float32, ldx, r0, r1 int) {
	nb := a.k / q8Len
	if nb == 0 {
		return
	}
	for r := r0; r < r1; r++ {
		xr := x[r*ldx : r*ldx+a.k]
		q := a.q[r*a.k : (r+1)*a.k]
		if asmQuantQ8(ks.isa, &q[0], &a.s[r], a.m, &xr[0], nb) {
			continue
		}
		for b := range nb {
			a.s[b*a.m+r] = quantizeBlock(q[b*q8Len:(b+1)*q8Len], xr[b*q8Len:(b+1)*q8Len])
		}
	}
}

// quantizeBlock is the portable quantQ8AVX512 for one block (see there
// for why the scale is a power of two): q from x, returning the scale.
func quantizeBlock(q []int16, x []float32) float32 {
	amax := float32(0x1p-100)
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	e := math.Float32bits(amax) >> 23 // E + 127
	s := math.Float32frombits((127 + 14 + 127 - e) << 23)
	for i, v := range x {
		q[i] = int16(max(-32768, min(32767, math.RoundToEven(float64(v*s)))))
	}
	return math.Float32frombits((e - 14) << 23)
}

// UsesQ8Rows reports whether MulAdd of p quantizes the rows of x (p is
// Q8_0 and this CPU has the integer kernels): a caller that splits one
// product over many MulAdd calls then saves the repeated quantization by
// quantizing once into a Q8Rows and calling MulAddQ8Rows.
func (p *Packed) UsesQ8Rows() bool { return p.q8 != nil && best.q8Int != q8IntNone }

// MulAddQ8Rows is MulAdd with x already quantized: rows [r0, r0+m) of a
// times a Q8_0 p, added to y's rows 0..m-1 (leading dimension ldy) in
// columns [j0, j1), as MulAdd. It panics unless p.UsesQ8Rows() and a is
// shaped for p's K.
func (p *Packed) MulAddQ8Rows(y []float32, ldy int, a *Q8Rows, r0, m, j0, j1 int) {
	if !p.UsesQ8Rows() || a.k != p.k || r0 < 0 || m < 0 || r0+m > a.m {
		panic(fmt.Sprintf("f32: MulAddQ8Rows rows [%d, %d) of %d×%d into a %d×%d matrix (integer Q8_0: %v)", r0, r0+m, a.m, a.k, p.k, p.n, p.UsesQ8Rows()))
	}
	// check on a stand-in x of the right size: the shapes of y and the
	// column range are MulAdd's.
	switch {
	case m == 0 || j0 == j1:
	case j0 < 0 || j0 > j1 || j1 > p.n || j0%PanelWidth != 0:
		panic(fmt.Sprintf("f32: MulAddQ8Rows columns [%d, %d) of %d (start must be a multiple of %d)", j0, j1, p.n, PanelWidth))
	case ldy < j1 || len(y) < (m-1)*ldy+j1:
		panic(fmt.Sprintf("f32: MulAddQ8Rows y of %d floats, ldy %d, too small for %d rows to column %d", len(y), ldy, m, j1))
	}
	if m == 0 || j0 == j1 || p.k == 0 {
		return
	}
	p.mulAddQ8Rows(best, y, ldy, a, r0, m, j0, j1)
}

// mulAddQ8Rows runs the integer kernels (shapes checked). Each panel is
// read once, in order, q8SlabBlocks blocks at a time; every row group of
// at most q8RowsPerCall rows runs over that slice, so the groups after the
// first read it from L1. Every row's y takes one addition per slice
// whatever the number of rows in the call, so that a row's result does not
// depend on what it is batched with: a decode step of one sequence gives
// the bits a prefill or a larger batch gives it (the engine's batch
// invariance, which two engines' runs of the same requests rely on).
func (p *Packed) mulAddQ8Rows(ks *kernels, y []float32, ldy int, a *Q8Rows, r0, m, j0, j1 int) {
	nb := p.k / q8Len
	most := q8RowsPerCall(ks.q8Int)
	groups := (m + most - 1) / most
	mr := (m + groups - 1) / groups
	const kc = q8SlabBlocks
	var tile [q8IntMR * PanelWidth]float32
	for pj := j0; pj < j1; pj += PanelWidth {
		cols := min(PanelWidth, j1-pj)
		for b0 := 0; b0 < nb; b0 += kc {
			bn := min(kc, nb-b0)
			off := (pj/PanelWidth)*nb*q8BlockBytes + b0*q8BlockBytes
			w := p.q8[off : off+bn*q8BlockBytes]
			for r := 0; r < m; r += mr {
				rows := min(mr, m-r)
				xq := a.q[(r0+r)*a.k+b0*q8Len:]
				s := a.s[b0*a.m+r0+r:]
				if cols == PanelWidth {
					tileQ8Int(ks, y[r*ldy+pj:], ldy, xq, a.k, s, a.m, w, rows, bn)
					continue
				}
				// A partial panel runs on a full-width copy of its y rows.
				for i := range rows {
					copy(tile[i*PanelWidth:i*PanelWidth+cols], y[(r+i)*ldy+pj:(r+i)*ldy+pj+cols])
				}
				tileQ8Int(ks, tile[:], PanelWidth, xq, a.k, s, a.m, w, rows, bn)
				for i := range rows {
					copy(y[(r+i)*ldy+pj:(r+i)*ldy+pj+cols], tile[i*PanelWidth:i*PanelWidth+cols])
				}
			}
		}
	}
}

// tileQ8Int adds rows×PanelWidth of y += the quantized rows xq (row r at
// xq[r·ldq], its block b's scale at s[b·lds+r]) times the nb blocks w.
func tileQ8Int(ks *kernels, y []float32, ldy int, xq []int16, ldq int, s []float32, lds int, w []byte, rows, nb int) {
	_ = y[(rows-1)*ldy+PanelWidth-1]
	_ = xq[(rows-1)*ldq+nb*q8Len-1]
	_ = s[(nb-1)*lds+rows-1]
	_ = w[nb*q8BlockBytes-1]
	if asmTileQ8Int(ks.q8Int, &y[0], ldy, &xq[0], ldq, &s[0], lds, &w[0], rows, nb) {
		return
	}
	genericTileQ8Int(y, ldy, xq, ldq, s, lds, w, rows, nb)
}

// genericTileQ8Int is the portable tileQ8Int (for tests of the layout;
// no kernel set without assembly uses it): int32 sums per block, scaled
// once per block as the assembly does.
func genericTileQ8Int(y []float32, ldy int, xq []int16, ldq int, s []float32, lds int, w []byte, rows, nb int) {
	for r := range rows {
		var tot [PanelWidth]float32
		for b := range nb {
			blk := w[b*q8BlockBytes : (b+1)*q8BlockBytes]
			xb := xq[r*ldq+b*q8Len : r*ldq+(b+1)*q8Len]
			for c := range tot {
				var sum int32
				for kk, xv := range xb {
					sum += int32(xv) * int32(int8(blk[q8Offset(kk, c)]))
				}
				d := tensor.F16ToF32(uint16(blk[2*c]) | uint16(blk[2*c+1])<<8)
				tot[c] += float32(sum) * s[b*lds+r] * d
			}
		}
		addRow(y[r*ldy:], &tot)
	}
}

// tileL1 is tileF32 for a panel slice already in L1: the AVX-512 kernels
// without the prefetches that streaming from memory needs (they only cost
// issue slots here).
func tileL1(ks *kernels, halves bool, y []float32, ldy int, x []float32, ldx int, panel []float32, rows, kn int) {
	if asmTileL1(ks.isa, &y[0], ldy, &x[0], ldx, &panel[0], rows, kn) {
		return
	}
	tileF32(ks, halves, y, ldy, x, ldx, panel, rows, kn)
}

// dequantQ8 widens the blocks w (whole blocks of one panel) into dst,
// 32 floats per k.
func dequantQ8(ks *kernels, dst []float32, w []byte) {
	nb := len(w) / q8BlockBytes
	if nb == 0 {
		return
	}
	_ = dst[nb*q8Len*PanelWidth-1]
	if asmDequantQ8(ks.isa, &dst[0], &w[0], nb) {
		return
	}
	for b := range nb {
		blk := w[b*q8BlockBytes : (b+1)*q8BlockBytes]
		out := dst[b*q8Len*PanelWidth:]
		for c := range PanelWidth {
			d := tensor.F16ToF32(uint16(blk[2*c]) | uint16(blk[2*c+1])<<8)
			for kk := range q8Len {
				out[kk*PanelWidth+c] = d * float32(int8(blk[q8Offset(kk, c)]))
			}
		}
	}
}

// genericTileQ8 is the portable Q8_0 microkernel: each weight widened to
// d·q, one row at a time.
func genericTileQ8(y []float32, ldy int, x []float32, ldx int, w []byte, rows, nb int) {
	for r := range rows {
		var a [PanelWidth]float32
		xr := x[r*ldx : r*ldx+nb*q8Len]
		for b := range nb {
			blk := w[b*q8BlockBytes : (b+1)*q8BlockBytes]
			var d [PanelWidth]float32
			for c := range d {
				d[c] = tensor.F16ToF32(uint16(blk[2*c]) | uint16(blk[2*c+1])<<8)
			}
			for kk, xv := range xr[b*q8Len : (b+1)*q8Len] {
				for c := range a {
					a[c] += xv * (d[c] * float32(int8(blk[q8Offset(kk, c)])))
				}
			}
		}
		addRow(y[r*ldy:], &a)
	}
}
