package gpt2

import (
	"math"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/engine"
)

// Attention over the paged KV cache comes in two forms, chosen per
// sequence each step:
//
//   - Row units: one (row, head) at a time, scores from DotRows over each
//     block's keys and the weighted sum from AxpyRows over its values.
//     Decode rows (one per sequence) and short chunks take this path: each
//     reads its keys and values once, which is all a decode row needs.
//   - Block units: up to attnRowBlock rows of one sequence's prefill chunk
//     and one head. The head's keys and values (through the block table)
//     are gathered once into f32 scratch matrices, and the scores and the
//     weighted sums become two matrix products on the same microkernels as
//     the weights: every key is loaded once per row block instead of once
//     per row, and no dot product needs a horizontal sum. A 512-token
//     prefill spent about a quarter of its time in row-unit attention.
//
// Both compute the same softmax(q·kᵀ·scale)·v over positions 0..pos of the
// row's own sequence; they differ only in rounding.
const (
	// attnBlockMin is the fewest rows of one sequence in a step that take
	// the block path: below it, gathering the keys costs more than it saves.
	attnBlockMin = 16
	// attnRowBlock is the query rows per block unit: enough to amortise the
	// gather, few enough that a prefill still splits into several units per
	// head for the workers.
	attnRowBlock = 64
)

// attnUnit is one unit of attention work: rows query rows from row (of one
// sequence, consecutive positions) and one head. rows == 1 is a row unit.
type attnUnit struct {
	row, rows, head int32
}

// blockScratch is one worker's memory for block units, sized for the
// longest context: the keys as a D×keys matrix, the values as keys×D, the
// scores of a row block, and the rows' softmax normalisers.
type blockScratch struct {
	keys, values *f32.Packed
	scores       []float32 // [attnRowBlock, keys]
	inv          []float32 // [attnRowBlock]
}

// planAttention lists this step's attention units, once for all layers.
func (b *CPUBackend) planAttention(batch *engine.Batch) {
	H := int32(b.cfg.NHead)
	b.units = b.units[:0]
	r := int32(0)
	for i := range batch.Seqs {
		n := int32(len(batch.Seqs[i].Tokens))
		if n >= attnBlockMin {
			b.growBlockScratch()
			for r0 := r; r0 < r+n; r0 += attnRowBlock {
				rows := min(attnRowBlock, r+n-r0)
				for h := range H {
					b.units = append(b.units, attnUnit{row: r0, rows: rows, head: h})
				}
			}
		} else {
			for j := r; j < r+n; j++ {
				for h := range H {
					b.units = append(b.units, attnUnit{row: j, rows: 1, head: h})
				}
			}
		}
		r += n
	}
}

// growBlockScratch allocates the block units' scratch on first use: a
// backend that only ever decodes never needs it.
func (b *CPUBackend) growBlockScratch() {
	if b.blk != nil {
		return
	}
	D, P := b.cfg.HeadDim(), b.cfg.NPositions
	b.blk = make([]blockScratch, b.threads)
	for i := range b.blk {
		b.blk[i] = blockScratch{
			keys:   f32.NewScratch(D, P),
			values: f32.NewScratch(P, D),
			scores: make([]float32, attnRowBlock*P),
			inv:    make([]float32, attnRowBlock),
		}
	}
}

// writeKV stores the K and V of every row of the batch into the paged cache
// at the row's block and slot, before attention reads them, so that a
// prefill chunk attends to its own earlier tokens.
func (b *CPUBackend) writeKV(layer int, batch *engine.Batch, M int) {
	C, H, D, bs := b.cfg.NEmbd, b.cfg.NHead, b.cfg.HeadDim(), b.blockSize
	for r := range M {
		s := &batch.Seqs[b.rowSeq[r]]
		pos := int(b.rowPos[r])
		blk := int(s.BlockTable[pos/bs])
		slot := pos % bs
		q := b.qkv[r*3*C : (r+1)*3*C]
		for h := range H {
			off := b.kvOffset(layer, blk, h) + slot*D
			copy(b.kc[off:off+D], q[C+h*D:C+(h+1)*D])
			copy(b.vc[off:off+D], q[2*C+h*D:2*C+(h+1)*D])
		}
	}
}

// kvOffset is where block blk's keys (or values) of one head start.
func (b *CPUBackend) kvOffset(layer, blk, head int) int {
	return ((layer*b.numBlocks+blk)*b.cfg.NHead + head) * b.blockSize * b.cfg.HeadDim()
}

// attention runs causal attention for every unit planned for this step.
func (b *CPUBackend) attention(layer int, batch *engine.Batch) {
	scale := float32(1)
	if b.cfg.ScaleAttnWeights {
		scale = float32(1 / math.Sqrt(float64(b.cfg.HeadDim())))
	}
	if b.cfg.ScaleAttnByInverseLayerIdx {
		scale /= float32(layer + 1)
	}
	b.at = attnTask{b: b, batch: batch, layer: layer, scale: scale}
	b.pool.parallel(&b.at, len(b.units), 1)
}

// attnTask computes causal attention for the planned units, reading keys
// and values through each row's block table.
type attnTask struct {
	b     *CPUBackend
	batch *engine.Batch
	layer int
	scale float32
}

func (t *attnTask) run(w, lo, hi int) {
	for _, u := range t.b.units[lo:hi] {
		if u.rows == 1 {
			t.row(w, int(u.row), int(u.head))
		} else {
			t.block(w, u)
		}
	}
}

// row is a row unit: row r, head h.
func (t *attnTask) row(w, r, h int) {
	b := t.b
	C, D, bs := b.cfg.NEmbd, b.cfg.HeadDim(), b.blockSize
	table := t.batch.Seqs[b.rowSeq[r]].BlockTable
	n := int(b.rowPos[r]) + 1 // causal: positions 0..pos
	q := b.qkv[r*3*C+h*D : r*3*C+(h+1)*D]
	sc := b.scores[w][:n]
	// The row's keys and values sit in scattered blocks of a few KiB, and
	// the hardware prefetchers lose the stream at every block boundary:
	// ask for all of them up front, into L2, so that their misses overlap
	// instead of each block's first lines waiting in turn. In paired runs
	// (batch 8 and 32, context 170) this took attention from 27-31 to
	// 28-40 GB/s, the speed of a plain read of the same blocks.
	for j0 := 0; j0 < n; j0 += bs {
		off := b.kvOffset(t.layer, int(table[j0/bs]), h)
		cnt := min(bs, n-j0)
		f32.PrefetchL2(b.kc[off : off+cnt*D])
		f32.PrefetchL2(b.vc[off : off+cnt*D])
	}
	for j0 := 0; j0 < n; j0 += bs {
		off := b.kvOffset(t.layer, int(table[j0/bs]), h)
		cnt := min(bs, n-j0)
		f32.DotRows(sc[j0:j0+cnt], q, b.kc[off:off+cnt*D])
	}
	// The scale is applied to the scores, not to q: q is part of the
	// qkv buffer, and scaling afterwards rounds exactly as before.
	f32.Scale(sc, t.scale)
	maxv := f32.Max(sc)
	// Softmax: the exponentials are left unnormalised and the weighted
	// sum of values is scaled once at the end.
	inv := 1 / f32.ExpSubSum(sc, maxv)
	o := b.att[r*C+h*D : r*C+(h+1)*D]
	clear(o)
	for j0 := 0; j0 < n; j0 += bs {
		off := b.kvOffset(t.layer, int(table[j0/bs]), h)
		cnt := min(bs, n-j0)
		f32.AxpyRows(o, sc[j0:j0+cnt], b.vc[off:off+cnt*D])
	}
	f32.Scale(o, inv)
}

// block is a block unit: rows u.row.. of one sequence at consecutive
// positions p0.., head u.head. Keys 0..p0+rows-1 are gathered into the
// worker's scratch, S = Q·Kᵀ and O = softmax(S)·V are matrix products.
func (t *attnTask) block(w int, u attnUnit) {
	b := t.b
	C, D, bs := b.cfg.NEmbd, b.cfg.HeadDim(), b.blockSize
	r0, R, h := int(u.row), int(u.rows), int(u.head)
	table := t.batch.Seqs[b.rowSeq[r0]].BlockTable
	p0 := int(b.rowPos[r0])
	n := p0 + R // the last row sees every key up to its own position
	ws := &b.blk[w]
	ws.keys.Reshape(D, n)
	ws.values.Reshape(n, D)
	for j0 := 0; j0 < n; j0 += bs {
		off := b.kvOffset(t.layer, int(table[j0/bs]), h)
		for j := j0; j < min(j0+bs, n); j++ {
			kv := off + (j-j0)*D
			ws.keys.SetColumn(j, b.kc[kv:kv+D])
			ws.values.SetRow(j, b.vc[kv:kv+D])
		}
	}
	// Scores of row i are sc[i·n : i·n+n]; the query rows are read in place
	// from qkv (leading dimension 3C).
	sc := ws.scores[:R*n]
	clear(sc)
	ws.keys.MulAdd(sc, n, b.qkv[r0*3*C+h*D:], 3*C, R, 0, n)
	for i := range R {
		valid := p0 + i + 1 // causal
		row := sc[i*n : i*n+valid]
		f32.Scale(row, t.scale)
		ws.inv[i] = 1 / f32.ExpSubSum(row, f32.Max(row))
		clear(sc[i*n+valid : (i+1)*n]) // masked keys weigh nothing
	}
	o := b.att[r0*C+h*D:]
	for i := range R {
		clear(o[i*C : i*C+D])
	}
	ws.values.MulAdd(o, C, sc, n, R, 0, D)
	for i := range R {
		f32.Scale(o[i*C:i*C+D], ws.inv[i])
	}
}
