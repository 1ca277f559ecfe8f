package cpu

import (
	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// normVecs are one norm's weights in float32: gain and, for a LayerNorm,
// bias.
type normVecs struct {
	w, b []float32
}

// layerNorms are one layer's norm weights in float32.
type layerNorms struct {
	attn, mlp    normVecs
	qNorm, kNorm []float32 // per-head gains (Config.QKNorm), nil otherwise
}

// widenNorms converts every norm weight to float32 once: they are read
// for every row, and are a few kilobytes.
func widenNorms(w *model.Weights) ([]layerNorms, normVecs) {
	vec := func(n model.NormWeights) normVecs {
		v := normVecs{w: n.W.Float32s()}
		if !n.B.IsZero() {
			v.b = n.B.Float32s()
		}
		return v
	}
	ls := make([]layerNorms, len(w.Layers))
	for i := range w.Layers {
		l := &w.Layers[i]
		ls[i] = layerNorms{attn: vec(l.AttnNorm), mlp: vec(l.MLPNorm)}
		if !l.QNorm.IsZero() {
			ls[i].qNorm, ls[i].kNorm = l.QNorm.Float32s(), l.KNorm.Float32s()
		}
	}
	return ls, vec(w.FinalNorm)
}

// normRow normalises one row x into y with the config's norm.
func normRow(c *model.Config, y, x []float32, n normVecs) {
	if c.Norm == model.RMSNorm {
		f32.RMSNorm(y, x, n.w, c.NormEps)
		return
	}
	f32.LayerNorm(y, x, n.w, n.b, c.NormEps)
}

// normRows is the rows per norm unit: below two units a step's norm runs
// on the caller (a decode step's few rows take microseconds).
const normRows = 16

// norm normalises the rows of x into y across the pool.
func (b *Backend) norm(y, x []float32, n normVecs) {
	b.nt = normTask{y: y, x: x, n: n, c: &b.cfg}
	b.pool.parallel(&b.nt, len(x)/b.cfg.Hidden, normRows)
}

// normTask is norm over units of rows.
type normTask struct {
	y, x []float32
	n    normVecs
	c    *model.Config
}

func (t *normTask) run(_, lo, hi int) {
	C := t.c.Hidden
	for r := lo; r < hi; r++ {
		normRow(t.c, t.y[r*C:(r+1)*C], t.x[r*C:(r+1)*C], t.n)
	}
}

// prepRows is the rows per unit of the per-row work between matmuls.
const prepRows = 8

// The per-row jobs of prepTask.
const (
	// prepQKV normalises (QKNorm) and rotates (Rotary) each row's query
	// and key heads and writes its keys and values into the paged cache.
	prepQKV = iota
	// prepSiLUMul turns each row's [gate | up] into silu(gate)·up.
	prepSiLUMul
)

// prepTask is per-row work between the matmuls, over units of rows.
type prepTask struct {
	b     *Backend
	batch *engine.Batch
	layer int
	mode  int
}

// prepare makes layer's queries and keys ready for attention and stores
// the keys and values of every row of the batch in the paged cache at the
// row's block and slot, before attention reads them, so that a prefill
// chunk attends to its own earlier tokens.
func (b *Backend) prepare(layer int, batch *engine.Batch, M int) {
	b.pt = prepTask{b: b, batch: batch, layer: layer, mode: prepQKV}
	b.pool.parallel(&b.pt, M, prepRows)
}

func (t *prepTask) run(_, lo, hi int) {
	b := t.b
	c := &b.cfg
	if t.mode == prepSiLUMul {
		I := c.Intermediate
		for r := lo; r < hi; r++ {
			row := b.fc[r*2*I : (r+1)*2*I]
			f32.SiLUMul(row[:I], row[I:])
		}
		return
	}
	D, Q, KV, bs := c.HeadDim, c.QDim(), c.KVDim(), b.blockSize
	nw := &b.norms[t.layer]
	for r := lo; r < hi; r++ {
		row := b.qkv[r*b.qkvW : (r+1)*b.qkvW]
		qk := row[:Q+KV] // the query heads, then the key heads
		if c.QKNorm {
			for h := 0; h < c.Heads+c.KVHeads; h++ {
				g := nw.qNorm
				if h >= c.Heads {
					g = nw.kNorm
				}
				f32.RMSNorm(qk[h*D:(h+1)*D], qk[h*D:(h+1)*D], g, c.NormEps)
			}
		}
		if c.Rotary {
			cs := b.ropeCS[r*D : (r+1)*D]
			for h := 0; h < c.Heads+c.KVHeads; h++ {
				rotate(qk[h*D:(h+1)*D], cs[:D/2], cs[D/2:])
			}
		}
		s := &t.batch.Seqs[b.rowSeq[r]]
		pos := int(b.rowPos[r])
		blk, slot := int(s.BlockTable[pos/bs]), pos%bs
		for h := range c.KVHeads {
			off := b.kvOffset(t.layer, blk, h) + slot*D
			copy(b.kc[off:off+D], row[Q+h*D:Q+(h+1)*D])
			copy(b.vc[off:off+D], row[Q+KV+h*D:Q+KV+(h+1)*D])
		}
	}
}

// rotate applies a rotary embedding to one head in Hugging Face's
// rotate-half layout: dimension i and i+D/2 form the pair rotated by angle
// i, x·cos + rotate_half(x)·sin with rotate_half(x) = (−x₂, x₁).
func rotate(x, cos, sin []float32) {
	half := len(cos)
	x1, x2 := x[:half], x[half:2*half]
	for i := range half {
		a, b := x1[i], x2[i]
		x1[i] = a*cos[i] - b*sin[i]
		x2[i] = b*cos[i] + a*sin[i]
	}
}
