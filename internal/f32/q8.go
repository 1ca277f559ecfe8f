package f32

import (
	"fmt"
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
//	32 k-rows of 32 int8 values, q[32b+kk, c] at 64 + 32·kk + c,
//
// so the weight W[k, j] is d·q and a block is 1088 bytes for 1024 weights:
// 1.0625 bytes a weight, ggml's own 34 bytes per 32. The products keep the
// activations in float32 (each weight widened to d·q exactly, then the
// float32 FMAs): no rounding of x to 8 bits as llama.cpp's Q8_0 dot
// products do, so the only error against float32 weights is the weights'.
const q8BlockBytes = 64 + PanelWidth*PanelWidth

// q8Len is the values per Q8_0 block (ggml's QK8_0).
const q8Len = 32

// q8KBlock is the depth of the panel slice widened to float32 for
// products of many rows: 128×32 floats, 16 KiB, so that the slice and the
// rows of x it meets fit in L1 together (at kBlock, 256, they did not, and
// 32-row products ran 20% slower than from bfloat16 panels).
const q8KBlock = 128

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
			dst[64+kk*PanelWidth+c] = q
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

// mulAddQ8 is MulAdd for Q8_0 panels (shapes already checked). Up to the
// kernel's rows a product streams each panel once, widening as it goes (a
// decode step: memory-bound, so the 8-bit weights' fewer bytes are the
// gain). More rows widen an L1-sized slice of a panel to float32 once and
// run the float32 kernels over it for every row block, so a prefill costs
// what a float32 product of L1-resident weights costs, plus one widening
// per slice.
func (p *Packed) mulAddQ8(ks *kernels, y []float32, ldy int, x []float32, ldx int, m, j0, j1 int) {
	K, nb := p.k, p.k/q8Len
	var tile [maxMR * PanelWidth]float32
	if m <= ks.mrQ8 {
		for pj := j0; pj < j1; pj += PanelWidth {
			off := (pj / PanelWidth) * nb * q8BlockBytes
			cols := min(PanelWidth, j1-pj)
			if cols == PanelWidth {
				p.tileQ8(ks, y[pj:], ldy, x, ldx, off, m, nb)
				continue
			}
			for i := range m {
				copy(tile[i*PanelWidth:i*PanelWidth+cols], y[i*ldy+pj:i*ldy+pj+cols])
			}
			p.tileQ8(ks, tile[:], PanelWidth, x, ldx, off, m, nb)
			for i := range m {
				copy(y[i*ldy+pj:i*ldy+pj+cols], tile[i*PanelWidth:i*PanelWidth+cols])
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

// tileL1 is tileF32 for a panel slice already in L1: the AVX-512 kernels
// without the prefetches that streaming from memory needs (they only cost
// issue slots here).
func tileL1(ks *kernels, halves bool, y []float32, ldy int, x []float32, ldx int, panel []float32, rows, kn int) {
	if asmTileL1(ks.isa, &y[0], ldy, &x[0], ldx, &panel[0], rows, kn) {
		return
	}
	tileF32(ks, halves, y, ldy, x, ldx, panel, rows, kn)
}

// tileQ8 adds rows×PanelWidth of y += x[rows, K]·panel, the panel's
// blocks starting at byte off of p.q8.
func (p *Packed) tileQ8(ks *kernels, y []float32, ldy int, x []float32, ldx int, off, rows, nb int) {
	w := p.q8[off : off+nb*q8BlockBytes]
	if asmTileQ8(ks.isa, &y[0], ldy, &x[0], ldx, &w[0], rows, nb) {
		return
	}
	genericTileQ8(y, ldy, x, ldx, w, rows, nb)
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
		var d [PanelWidth]float32
		for c := range d {
			d[c] = tensor.F16ToF32(uint16(blk[2*c]) | uint16(blk[2*c+1])<<8)
		}
		out := dst[b*q8Len*PanelWidth:]
		for i, q := range blk[64:] {
			out[i] = d[i%PanelWidth] * float32(int8(q))
		}
	}
}

// genericTileQ8 is the portable Q8_0 microkernel: each weight widened to
// d·q, as the assembly does, one row at a time.
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
				q := blk[64+kk*PanelWidth : 64+(kk+1)*PanelWidth]
				for c := range a {
					a[c] += xv * (d[c] * float32(int8(q[c])))
				}
			}
		}
		addRow(y[r*ldy:], &a)
	}
}
