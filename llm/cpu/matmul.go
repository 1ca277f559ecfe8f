package cpu

import (
	"math"
	"sync"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// packedLayer holds one block's matrices repacked for f32.Packed.MulAdd,
// and their biases in float32 (nil where the projection has none).
type packedLayer struct {
	qkv, o, up, down                 *f32.Packed
	qkvBias, oBias, upBias, downBias []float32
}

// packWeights repacks every matrix the forward pass multiplies by into the
// panel layout the f32 kernels stream, once, using up to threads
// goroutines: a layer's query, key and value projections side by side as
// one in×(q+k+v) matrix (one matmul per layer), a gated MLP's gate and up
// likewise, and the LM head [V, C] from its rows, so that the vocabulary
// becomes the column dimension and splits across cores by panels. The
// packed copies are private heap memory; the model's tensors (perhaps a
// read-only mapping of the checkpoint) are not read again by the matmuls.
// With bf16 the copies are bfloat16. Matrices stored as Q8_0 (a GGUF file's,
// or quantized at load by model.Quantize) stay 8-bit: see packLinears.
func packWeights(w *model.Weights, c *model.Config, threads int, bf16 bool) ([]packedLayer, *f32.Packed) {
	layers := make([]packedLayer, len(w.Layers))
	var head *f32.Packed
	var jobs []func()
	for i := range w.Layers {
		lw, pl := &w.Layers[i], &layers[i]
		jobs = append(jobs,
			func() { pl.qkv, pl.qkvBias = packLinears(lw.QKV, bf16) },
			func() { pl.o, pl.oBias = packLinears([]model.Linear{lw.O}, bf16) },
			func() { pl.up, pl.upBias = packLinears(lw.Up, bf16) },
			func() { pl.down, pl.downBias = packLinears([]model.Linear{lw.Down}, bf16) },
		)
	}
	jobs = append(jobs, func() {
		head, _ = packLinears([]model.Linear{{W: w.LMHead, In: c.Hidden, Out: c.VocabSize}}, bf16)
	})
	var wg sync.WaitGroup
	next := make(chan func())
	for range max(1, threads) {
		wg.Go(func() {
			for f := range next {
				f()
			}
		})
	}
	for _, f := range jobs {
		next <- f
	}
	close(next)
	wg.Wait()
	return layers, head
}

// packLinears packs projections that read the same input side by side, in
// order, as one In×ΣOut matrix, and concatenates their biases (nil when
// none has one; zeros for those without when others have).
//
// When any of them is stored as Q8_0 the packed matrix is Q8_0 too (1.06
// bytes a weight, ggml's blocks of 32 along In copied as they are); any
// float ones beside it are quantized the same way, so one product serves
// them all.
func packLinears(ls []model.Linear, bf16 bool) (*f32.Packed, []float32) {
	K, N := ls[0].In, 0
	hasBias, q8 := false, false
	for _, l := range ls {
		N += l.Out
		hasBias = hasBias || !l.B.IsZero()
		q8 = q8 || l.W.DType == tensor.Q8_0
	}
	if q8 {
		return packLinearsQ8(ls, K, N, hasBias)
	}
	p := f32.NewPacked(K, N, bf16)
	var bias []float32
	if hasBias {
		bias = make([]float32, N)
	}
	row := make([]float32, max(K, N))
	j0 := 0
	for _, l := range ls {
		if l.InMajor {
			// [In, Out]: each stored row is a row of the product's matrix.
			for kk := range K {
				l.W.Float32sInto(row[:l.Out], kk*l.Out)
				p.FillRow(kk, j0, row[:l.Out])
			}
		} else {
			// [Out, In]: each stored row is a column.
			for j := range l.Out {
				l.W.Float32sInto(row[:K], j*K)
				p.FillColumn(j0+j, row[:K])
			}
		}
		if !l.B.IsZero() {
			l.B.Float32sInto(bias[j0:j0+l.Out], 0)
		}
		j0 += l.Out
	}
	return p, bias
}

// matmul modes: how the product x·W + b is combined into y.
const (
	mmStore    = iota // y = x·W + b
	mmAdd             // y += x·W + b (residual connections)
	mmGeluTanh        // y = gelu_new(x·W + b)
	mmGeluErf         // y = gelu(x·W + b), exact erf form
)

// mmRowBlock is the number of rows per matmul unit when a step has more
// rows than that: large enough that the kernel's row blocks reuse each
// L1-resident slice of a panel many times, small enough that a 512-row
// prefill still gives every worker several units.
const mmRowBlock = 256

// matmul computes y[M,N] (mode) x[M,K]·W[K,N] + b[N] with the packed W
// (b nil: no bias), rows of y and x ldy and ldx apart,
// split across the pool into units of whole column panels (and blocks of
// rows for large M). A decode step (few rows) is split by single panels:
// its cost is reading W once, and every worker streams its own panels,
// each one contiguous in memory. Many rows use four panels per unit so
// that each row block of x, loaded into cache, serves 128 columns.
func (b *Backend) matmul(y []float32, ldy int, x []float32, ldx int, w *f32.Packed, bias []float32, m, mode int) {
	panels := (w.N() + f32.PanelWidth - 1) / f32.PanelWidth
	rowBlock, perUnit := m, 1
	if m > mmRowBlock {
		// Equal row blocks of at most mmRowBlock rows.
		blocks := (m + mmRowBlock - 1) / mmRowBlock
		rowBlock = (m + blocks - 1) / blocks
	}
	rb := (m + rowBlock - 1) / rowBlock
	cb := (panels + perUnit - 1) / perUnit
	b.mm = matmulTask{y: y, x: x, w: w, b: bias, ldy: ldy, ldx: ldx, m: m, mode: mode, rowBlock: rowBlock, colBlock: perUnit * f32.PanelWidth, cb: cb}
	if w.UsesQ8Rows() {
		// The integer Q8_0 kernels take x quantized per block of 32: done
		// once here rather than by every unit (a decode unit is a single
		// panel, a prefill unit one panel of up to mmRowBlock rows, so per
		// unit it would cost up to half of the product again).
		b.q8x.Reset(m, w.K())
		b.qt = quantTask{a: &b.q8x, x: x, ldx: ldx}
		b.pool.parallel(&b.qt, m, quantGrain)
		b.mm.xq = &b.q8x
	}
	b.pool.parallel(&b.mm, rb*cb, 1)
}

// quantGrain is the rows per unit of the activations' quantization: a
// few microseconds of work each, so that a decode step's rows stay on the
// caller and a prefill's spread over the workers.
const quantGrain = 64

// quantTask quantizes rows of x into a (units are rows).
type quantTask struct {
	a   *f32.Q8Rows
	x   []float32
	ldx int
}

func (t *quantTask) run(_, lo, hi int) { t.a.Quantize(t.x, t.ldx, lo, hi) }

type matmulTask struct {
	y, x, b  []float32
	xq       *f32.Q8Rows // x quantized, for a Q8_0 w with integer kernels
	ldy, ldx int
	w        *f32.Packed
	m, mode  int
	rowBlock int // rows per unit
	colBlock int // columns per unit, a multiple of f32.PanelWidth
	cb       int // column blocks
}

func (t *matmulTask) run(_, lo, hi int) {
	N, ldy, ldx := t.w.N(), t.ldy, t.ldx
	for u := lo; u < hi; u++ {
		r0 := (u / t.cb) * t.rowBlock
		j0 := (u % t.cb) * t.colBlock
		r1, j1 := min(r0+t.rowBlock, t.m), min(j0+t.colBlock, N)
		for r := r0; r < r1; r++ {
			yr := t.y[r*ldy+j0 : r*ldy+j1]
			switch {
			case t.b == nil && t.mode != mmAdd:
				clear(yr)
			case t.b == nil:
			case t.mode == mmAdd:
				f32.Axpy(yr, 1, t.b[j0:j1])
			default:
				copy(yr, t.b[j0:j1])
			}
		}
		if t.xq != nil {
			t.w.MulAddQ8Rows(t.y[r0*ldy:], ldy, t.xq, r0, r1-r0, j0, j1)
		} else {
			t.w.MulAdd(t.y[r0*ldy:], ldy, t.x[r0*ldx:], ldx, r1-r0, j0, j1)
		}
		switch t.mode {
		case mmGeluTanh:
			for r := r0; r < r1; r++ {
				f32.GeluTanh(t.y[r*ldy+j0 : r*ldy+j1])
			}
		case mmGeluErf:
			for r := r0; r < r1; r++ {
				yr := t.y[r*ldy+j0 : r*ldy+j1]
				for j, v := range yr {
					x := float64(v)
					yr[j] = float32(0.5 * x * (1 + math.Erf(x/math.Sqrt2)))
				}
			}
		}
	}
}

// headPanels is the number of vocabulary panels per LM-head unit: 256
// columns, about 200 units for GPT-2's 50257 tokens, so workers balance.
const headPanels = 8

// headTask computes the logits of the sampled rows, y[s, v] = x[s]·W[v],
// by blocks of vocabulary columns: each packed head panel is read once for
// all sampled rows.
type headTask struct {
	x, y    []float32
	xq      *f32.Q8Rows // x quantized, for a Q8_0 w with integer kernels
	w       *f32.Packed
	rows, c int
	// best[u*rows+s] is row s's largest logit in unit u's columns and its
	// first column: each worker finds its units' while their logits are
	// still in its cache, and argmaxOf combines them in unit order.
	best []unitMax
}

// unitMax is the largest value of a range of logits and where it is.
type unitMax struct {
	v float32
	i int32
}

func (t *headTask) run(_, lo, hi int) {
	V := t.w.N()
	for u := lo; u < hi; u++ {
		j0 := u * headPanels * f32.PanelWidth
		j1 := min(j0+headPanels*f32.PanelWidth, V)
		for s := range t.rows {
			clear(t.y[s*V+j0 : s*V+j1])
		}
		if t.xq != nil {
			t.w.MulAddQ8Rows(t.y, V, t.xq, 0, t.rows, j0, j1)
		} else {
			t.w.MulAdd(t.y, V, t.x, t.c, t.rows, j0, j1)
		}
		for s := range t.rows {
			t.best[u*t.rows+s] = rangeMax(t.y[s*V+j0:s*V+j1], j0)
		}
	}
}

// rangeMax is the largest of x, which starts at column j0, and its first
// column; -Inf at j0 when nothing is larger (all -Inf, or NaN, which
// argmax ignores). Two vector passes, the maximum and then where it first
// is, beat one scalar pass that tracks both.
func rangeMax(x []float32, j0 int) unitMax {
	if m := f32.Max(x); m > float32(math.Inf(-1)) {
		return unitMax{m, int32(j0 + f32.Index(x, m))}
	}
	return unitMax{v: float32(math.Inf(-1)), i: int32(j0)}
}

// argmaxOf combines row s's unit maxima, in unit (column) order, into the
// row's argmax: the lowest column on ties, 0 when no logit beats -Inf, as
// argmax gives.
func (t *headTask) argmaxOf(s, units int) int {
	best := unitMax{v: float32(math.Inf(-1))}
	for u := range units {
		if m := t.best[u*t.rows+s]; m.v > best.v {
			best = m
		}
	}
	return int(best.i)
}
