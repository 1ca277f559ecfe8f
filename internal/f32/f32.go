// Package f32 holds the float32 kernels of tinyserve's CPU backends: a
// matrix product against weights packed once at load, and the vector
// helpers attention and normalisation need.
//
// Decoding a small transformer on a CPU reads every weight once per step,
// so the matrix kernel is built to stream the weights exactly once, in the
// order it uses them: Pack rearranges a K×N matrix into column panels of
// PanelWidth floats, each stored K-major, so that a microkernel reads one
// panel front to back while a few rows of x stay in registers. Packing at
// load (rather than per call, as a BLAS sgemm does) is what lets batch-1 to
// batch-8 decoding run at the memory-bandwidth floor.
//
// The kernels are Go assembly for AVX-512 and AVX2+FMA, chosen once at
// start-up from golang.org/x/sys/cpu, with a portable Go path for other
// CPUs (and for the purego build tag). GODEBUG=cpu.avx512f=off selects the
// AVX2 path on an AVX-512 machine.
package f32

import (
	"fmt"
	"math"
	"unsafe"
)

// PanelWidth is the number of output columns in one packed panel. MulAdd's
// column range must start at a multiple of it, so a caller that splits a
// product across cores hands each core whole panels. 32 floats are two
// AVX-512 or four AVX2 vectors, a 128-byte row per k.
const PanelWidth = 32

// kBlock is the depth of one pass: a 256×32 slice of a panel (32 KiB)
// stays in L1 while every row block of x runs over it. Every product adds
// into y once per slice, however many rows it has, so that a row's result
// does not depend on what it is batched with.
const kBlock = 256

// KBlock is the depth of the slices of K that MulAdd adds into y one at a
// time, in order: code that must give MulAdd's bits another way (the CPU
// backend's attention, by AxpyRows) sums its slices alike.
const KBlock = kBlock

// maxMR is the most rows any microkernel carries.
const maxMR = 8

// isa is an instruction set the kernels are written for.
type isa int

const (
	isaGeneric isa = iota // portable Go
	isaAVX2               // AVX2 + FMA
	isaAVX512             // AVX-512F
)

// kernels is one implementation of every operation, selected as a whole.
// The assembly is called directly from a switch on isa, never through func
// values: an indirect call makes every pointer argument escape, which
// would move stack buffers to the heap and allocate on every call.
type kernels struct {
	name   string
	isa    isa
	mr     int // rows per microkernel call
	mrBF16 int // rows per call for bfloat16 panels
	// mrHalf, when set, is the rows per call of half-panel kernels used
	// instead of the full-width ones for products of more than mr rows.
	mrHalf int
	// mrQ8 is the most rows the portable direct Q8_0 kernel carries (the
	// assembly sets have none): products of more rows, and without
	// integer kernels, widen the weights to float32 a slice at a time
	// (see mulAddQ8).
	mrQ8 int
	// q8Int is which integer Q8_0 kernels run (q8IntNone: the weights are
	// widened to float32 and the activations stay float32).
	q8Int int
}

// The integer Q8_0 kernel levels (kernels.q8Int).
const (
	q8IntNone = iota // no integer kernels: widen the weights to float32
	q8IntMadd        // AVX-512BW: VPMADDWD + VPADDD
	q8IntVNNI        // AVX512-VNNI: VPDPWSSD
	q8IntAVX2        // AVX2 (and F16C): VPMADDWD + VPADDD on half panels
)

// The kernel sets: immutable tables.
var (
	genericKernels = &kernels{name: "generic", isa: isaGeneric, mr: 4, mrBF16: 4, mrQ8: 4}
	avx2Kernels    = &kernels{name: "avx2", isa: isaAVX2, mr: 3, mrBF16: 2, mrHalf: 6, q8Int: q8IntLevelAVX2}
	avx512Kernels  = &kernels{name: "avx512", isa: isaAVX512, mr: 8, mrBF16: 8, q8Int: q8IntLevel}
)

// best is the kernel set for this CPU, chosen once at start-up and never
// changed: an immutable table, not configuration.
var best = detect()

// Impl names the implementation in use ("avx512", "avx2" or "generic"),
// for benchmark reports and logs.
func Impl() string { return best.name }

// Packed is a K×N weight matrix rearranged for MulAdd: ceil(N/PanelWidth)
// panels, panel p holding columns [p·PanelWidth, (p+1)·PanelWidth) as K
// rows of PanelWidth values, the ragged last panel padded with zeros. The
// values are float32, or bfloat16 for the PackBF16 variants, or Q8_0
// blocks for NewPackedQ8 (see q8.go; computed in float32 all the same).
// It is read-only after packing and safe for concurrent MulAdd calls.
type Packed struct {
	k, n int
	data []float32 // float32 panels, 64-byte aligned, len = panels·k·PanelWidth
	half []uint16  // bfloat16 panels instead of data, same layout
	q8   []byte    // Q8_0 panels instead of data (q8BlockBytes per 32×32 block)
}

// K is the inner dimension (rows of the original matrix).
func (p *Packed) K() int { return p.k }

// N is the number of output columns.
func (p *Packed) N() int { return p.n }

// Bytes is the memory the packed matrix occupies: what MulAdd reads to
// multiply all of it.
func (p *Packed) Bytes() int64 {
	return int64(len(p.data))*4 + int64(len(p.half))*2 + int64(len(p.q8))
}

// BF16 reports whether the values are stored as bfloat16.
func (p *Packed) BF16() bool { return p.half != nil }

// newPacked allocates the panels (float32, or bfloat16 when bf16 is set),
// aligned to a cache line so that no panel row straddles two lines (see
// allocLarge for large matrices).
func newPacked(k, n int, bf16 bool) *Packed {
	if k < 0 || n < 0 {
		panic(fmt.Sprintf("f32: negative matrix shape %d×%d", k, n))
	}
	count := (n + PanelWidth - 1) / PanelWidth * k * PanelWidth
	p := &Packed{k: k, n: n}
	if bf16 {
		p.half = unsafe.Slice((*uint16)(allocLarge(p, 2*count)), count)
	} else {
		p.data = unsafe.Slice((*float32)(allocLarge(p, 4*count)), count)
	}
	return p
}

// heapPanels returns size zeroed bytes from the Go heap, aligned to a cache
// line. The pointer keeps the allocation alive.
func heapPanels(size int) unsafe.Pointer {
	buf := make([]uint64, size/8+9) // uint64: 8-byte aligned, no pointers
	off := (64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64 / 8
	return unsafe.Pointer(&buf[off])
}

// toBF16 rounds f to the nearest bfloat16 (ties to even), keeping NaNs NaN.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: truncating could make it Inf
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// fromBF16 widens a bfloat16 to float32 exactly.
func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// PackBF16 is Pack with the values rounded to bfloat16 (to nearest, ties
// to even): half the bytes for MulAdd to stream, at a relative error of at
// most 2⁻⁹ per weight. Products and sums stay float32.
func PackBF16(w []float32, k, n int) *Packed {
	return packInto(newPacked(k, n, true), w, false)
}

// PackTransposedBF16 is PackTransposed with bfloat16 values, as PackBF16.
func PackTransposedBF16(wt []float32, n, k int) *Packed {
	return packInto(newPacked(k, n, true), wt, true)
}

// set stores the value of panel element i.
func (p *Packed) set(i int, v float32) {
	if p.half != nil {
		p.half[i] = toBF16(v)
	} else {
		p.data[i] = v
	}
}

// packInto fills p from the row-major K×N matrix w, or from its N×K
// transpose when transposed is set.
func packInto(p *Packed, w []float32, transposed bool) *Packed {
	k, n := p.k, p.n
	if len(w) < k*n {
		panic(fmt.Sprintf("f32: packing %d×%d needs %d floats, got %d", k, n, k*n, len(w)))
	}
	for j0 := 0; j0 < n; j0 += PanelWidth {
		cols := min(PanelWidth, n-j0)
		base := (j0 / PanelWidth) * k * PanelWidth
		if transposed {
			for c := range cols {
				src := w[(j0+c)*k : (j0+c+1)*k]
				for kk, v := range src {
					p.set(base+kk*PanelWidth+c, v)
				}
			}
			continue
		}
		for kk := range k {
			src := w[kk*n+j0 : kk*n+j0+cols]
			if p.data != nil {
				copy(p.data[base+kk*PanelWidth:], src)
				continue
			}
			for c, v := range src {
				p.half[base+kk*PanelWidth+c] = toBF16(v)
			}
		}
	}
	return p
}

// Pack copies the row-major K×N matrix w (element [k, j] at w[k·n+j], as
// GPT-2's Conv1D stores its weight) into panels. The result does not refer
// to w, so w may be released or unmapped afterwards.
func Pack(w []float32, k, n int) *Packed {
	return packInto(newPacked(k, n, false), w, false)
}

// PackTransposed packs the K×N matrix whose transpose wt is given row-major
// as N×K (element [j, k] at wt[j·k+k]): an LM head tied to the token
// embedding [vocab, C] multiplies by the embedding's transpose.
func PackTransposed(wt []float32, n, k int) *Packed {
	return packInto(newPacked(k, n, false), wt, true)
}

// MulAdd adds x·W to y for rows r < m and columns [j0, j1):
//
//	y[r·ldy + j] += Σ_k x[r·ldx + k]·W[k, j]
//
// x is m rows of K floats with leading dimension ldx ≥ K, y has leading
// dimension ldy ≥ j1. j0 must be a multiple of PanelWidth and
// 0 ≤ j0 ≤ j1 ≤ N, so that concurrent callers can each take whole panels
// of the same y; j1 may end inside a panel (the last one, or any split a
// caller chooses). Other columns of y are not touched.
//
// MulAdd panics, like an out-of-range index, when the shapes do not fit:
// they come from the program, never from input data.
func (p *Packed) MulAdd(y []float32, ldy int, x []float32, ldx int, m, j0, j1 int) {
	p.mulAdd(best, y, ldy, x, ldx, m, j0, j1)
}

func (p *Packed) check(y []float32, ldy int, x []float32, ldx int, m, j0, j1 int) {
	switch {
	case m < 0:
		panic(fmt.Sprintf("f32: MulAdd with %d rows", m))
	case j0 < 0 || j0 > j1 || j1 > p.n || j0%PanelWidth != 0:
		panic(fmt.Sprintf("f32: MulAdd columns [%d, %d) of %d (start must be a multiple of %d)", j0, j1, p.n, PanelWidth))
	case m == 0 || j0 == j1:
		return
	case ldx < p.k || len(x) < (m-1)*ldx+p.k:
		panic(fmt.Sprintf("f32: MulAdd x of %d floats, ldx %d, too small for %d×%d", len(x), ldx, m, p.k))
	case ldy < j1 || len(y) < (m-1)*ldy+j1:
		panic(fmt.Sprintf("f32: MulAdd y of %d floats, ldy %d, too small for %d rows to column %d", len(y), ldy, m, j1))
	}
}

func (p *Packed) mulAdd(ks *kernels, y []float32, ldy int, x []float32, ldx int, m, j0, j1 int) {
	p.check(y, ldy, x, ldx, m, j0, j1)
	if m == 0 || j0 == j1 || p.k == 0 {
		return
	}
	if p.q8 != nil {
		p.mulAddQ8(ks, y, ldy, x, ldx, m, j0, j1)
		return
	}
	K := p.k
	mr, halves := ks.mr, false
	switch {
	case p.half != nil:
		mr = ks.mrBF16
	case ks.mrHalf > 0 && m > ks.mr:
		mr, halves = ks.mrHalf, true
	}
	// Each row's y takes one addition per kBlock slice of K, in order,
	// whatever m is: a decode step of one sequence then gives the bits a
	// prefill or a larger batch gives that row (the engine's batch
	// invariance). One row block streams each panel once, from memory,
	// slice after slice; more rows take a slice of every panel in turn and
	// reuse it, in L1, across their row blocks.
	var tile [maxMR * PanelWidth]float32
	if m <= mr {
		for pj := j0; pj < j1; pj += PanelWidth {
			for k0 := 0; k0 < K; k0 += kBlock {
				p.tileRows(ks, halves, y, ldy, x, ldx, &tile, k0, min(kBlock, K-k0), pj, j1, 0, m)
			}
		}
		return
	}
	for k0 := 0; k0 < K; k0 += kBlock {
		kn := min(kBlock, K-k0)
		for pj := j0; pj < j1; pj += PanelWidth {
			for r := 0; r < m; r += mr {
				p.tileRows(ks, halves, y, ldy, x, ldx, &tile, k0, kn, pj, j1, r, min(mr, m-r))
			}
		}
	}
}

// tileRows adds rows [r, r+rows) of x's columns [k0, k0+kn) times that
// slice of the panel at column pj to y, a partial last panel (ending at
// j1) through a full-width copy of its y rows in tile, so that the
// kernels never need masked stores.
func (p *Packed) tileRows(ks *kernels, halves bool, y []float32, ldy int, x []float32, ldx int, tile *[maxMR * PanelWidth]float32, k0, kn, pj, j1, r, rows int) {
	off := (pj/PanelWidth)*p.k*PanelWidth + k0*PanelWidth
	xs := x[r*ldx+k0:]
	cols := min(PanelWidth, j1-pj)
	if cols == PanelWidth {
		p.tile(ks, halves, y[r*ldy+pj:], ldy, xs, ldx, off, rows, kn)
		return
	}
	for i := range rows {
		copy(tile[i*PanelWidth:i*PanelWidth+cols], y[(r+i)*ldy+pj:(r+i)*ldy+pj+cols])
	}
	p.tile(ks, halves, tile[:], PanelWidth, xs, ldx, off, rows, kn)
	for i := range rows {
		copy(y[(r+i)*ldy+pj:(r+i)*ldy+pj+cols], tile[i*PanelWidth:i*PanelWidth+cols])
	}
}

// tile adds rows×PanelWidth of y (leading dimension ldy) += x[rows, kn] ·
// panel[kn, PanelWidth], the panel starting at element off of p's storage,
// with the half-panel kernels when halves is set. The caller has checked
// that every row of y holds PanelWidth floats and every row of x holds kn.
func (p *Packed) tile(ks *kernels, halves bool, y []float32, ldy int, x []float32, ldx int, off, rows, kn int) {
	n := kn * PanelWidth
	if p.half != nil {
		panel := p.half[off : off+n]
		if asmTileBF16(ks.isa, &y[0], ldy, &x[0], ldx, &panel[0], rows, kn) {
			return
		}
		genericTileBF16(y, ldy, x, ldx, panel, rows, kn)
		return
	}
	tileF32(ks, halves, y, ldy, x, ldx, p.data[off:off+n], rows, kn)
}

// tileF32 is tile for a float32 panel slice of kn rows.
func tileF32(ks *kernels, halves bool, y []float32, ldy int, x []float32, ldx int, panel []float32, rows, kn int) {
	const h = PanelWidth / 2
	if halves && asmTileHalf(ks.isa, &y[0], ldy, &x[0], ldx, &panel[0], rows, kn) {
		asmTileHalf(ks.isa, &y[h], ldy, &x[0], ldx, &panel[h], rows, kn)
		return
	}
	if asmTile(ks.isa, &y[0], ldy, &x[0], ldx, &panel[0], rows, kn) {
		return
	}
	genericTile(y, ldy, x, ldx, panel, rows, kn)
}

// genericTileBF16 is the portable microkernel for bfloat16 panels, one row
// at a time (the widening, not the loads, dominates here).
func genericTileBF16(y []float32, ldy int, x []float32, ldx int, panel []uint16, rows, kn int) {
	for r := range rows {
		var a [PanelWidth]float32
		xr := x[r*ldx : r*ldx+kn]
		for kk, b := range xr {
			w := (*[PanelWidth]uint16)(panel[kk*PanelWidth:])
			for j, h := range w {
				a[j] += b * fromBF16(h)
			}
		}
		addRow(y[r*ldy:], &a)
	}
}

// genericTile is the portable microkernel, four rows at a time so that
// each panel row loaded is used four times.
func genericTile(y []float32, ldy int, x []float32, ldx int, panel []float32, rows, kn int) {
	r := 0
	for ; r+4 <= rows; r += 4 {
		var a0, a1, a2, a3 [PanelWidth]float32
		x0, x1, x2, x3 := x[r*ldx:r*ldx+kn], x[(r+1)*ldx:(r+1)*ldx+kn], x[(r+2)*ldx:(r+2)*ldx+kn], x[(r+3)*ldx:(r+3)*ldx+kn]
		for kk := range kn {
			w := (*[PanelWidth]float32)(panel[kk*PanelWidth:])
			b0, b1, b2, b3 := x0[kk], x1[kk], x2[kk], x3[kk]
			for j, v := range w {
				a0[j] += b0 * v
				a1[j] += b1 * v
				a2[j] += b2 * v
				a3[j] += b3 * v
			}
		}
		addRow(y[r*ldy:], &a0)
		addRow(y[(r+1)*ldy:], &a1)
		addRow(y[(r+2)*ldy:], &a2)
		addRow(y[(r+3)*ldy:], &a3)
	}
	for ; r < rows; r++ {
		var a0 [PanelWidth]float32
		x0 := x[r*ldx : r*ldx+kn]
		for kk, b0 := range x0 {
			w := (*[PanelWidth]float32)(panel[kk*PanelWidth:])
			for j, v := range w {
				a0[j] += b0 * v
			}
		}
		addRow(y[r*ldy:], &a0)
	}
}

func addRow(y []float32, a *[PanelWidth]float32) {
	y = y[:PanelWidth]
	for j, v := range a {
		y[j] += v
	}
}

// ExpLow is the smallest argument the exp of ExpSubSum and GeluTanh
// honours: smaller ones count as ExpLow, so that 2^n stays a normal float.
// exp(−86) ≈ 4e−38 is far below anything a softmax or GELU can resolve.
const ExpLow = -86

// onesLen floats of 1, for sums as dot products.
const onesLen = 1024

var ones = func() *[onesLen]float32 {
	var o [onesLen]float32
	for i := range o {
		o[i] = 1
	}
	return &o
}()
