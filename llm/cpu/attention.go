package cpu

import (
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
//     are gathered once into the worker's scratch, contiguous; each row's
//     scores are DotRows over the gathered keys, and the weighted sums one
//     matrix product on the same microkernels as the weights, so every
//     value is loaded once per row block instead of once per row. A
//     512-token prefill spent about a quarter of its time in row-unit
//     attention.
//
// Both compute softmax(q·kᵀ·scale)·v over positions 0..pos of the row's own
// sequence with the same operations in the same order, so that a row's
// result does not depend on the path, and so neither on how its prompt was
// chunked nor on what shared its step: the scores are the same DotRows;
// the row units sum the weighted values a kBlock of positions at a time
// (f32.KBlock), as the product adds its slices into its result; masked positions
// weigh exactly 0, which adds nothing.
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
// sequence, consecutive positions) and one KV head with the query heads
// that read it (grouped-query attention: the unit loads the KV head's keys
// and values once for the whole group). rows == 1 is a row unit.
type attnUnit struct {
	row, rows, kvHead int32
}

// blockScratch is one worker's memory for block units, sized for the
// longest context seen: the keys as rows of D, the values as a keys×D
// matrix, the scores of a row block, and the rows' softmax normalisers.
type blockScratch struct {
	keys   []float32 // [keys, D]
	values *f32.Packed
	scores []float32 // [attnRowBlock, keys]
	inv    []float32 // [attnRowBlock]
}

// planAttention lists this step's attention units, once for all layers.
func (b *Backend) planAttention(batch *engine.Batch) {
	KV := int32(b.cfg.KVHeads)
	b.units = b.units[:0]
	r := int32(0)
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		n := int32(len(s.Tokens))
		if n >= attnBlockMin {
			b.growBlockScratch(s.StartPos + len(s.Tokens))
			for r0 := r; r0 < r+n; r0 += attnRowBlock {
				rows := min(attnRowBlock, r+n-r0)
				for h := range KV {
					b.units = append(b.units, attnUnit{row: r0, rows: rows, kvHead: h})
				}
			}
		} else {
			for j := r; j < r+n; j++ {
				for h := range KV {
					b.units = append(b.units, attnUnit{row: j, rows: 1, kvHead: h})
				}
			}
		}
		r += n
	}
}

// growBlockScratch sizes the block units' scratch for contexts of n
// positions: a backend that only ever decodes never needs it, and one that
// serves short prompts of a long-context model needs little.
func (b *Backend) growBlockScratch(n int) {
	if b.blk != nil && n <= b.blkLen {
		return
	}
	D := b.cfg.HeadDim
	P := min(max(n, 2*b.blkLen, 256), b.cfg.MaxPositions)
	b.blk = make([]blockScratch, b.threads)
	for i := range b.blk {
		b.blk[i] = blockScratch{
			keys:   make([]float32, P*D),
			values: f32.NewScratch(P, D),
			scores: make([]float32, attnRowBlock*P),
			inv:    make([]float32, attnRowBlock),
		}
	}
	b.blkLen = P
}

// kvOffset is where block blk's keys (or values) of one KV head start.
func (b *Backend) kvOffset(layer, blk, head int) int {
	return ((layer*b.numBlocks+blk)*b.cfg.KVHeads + head) * b.blockSize * b.cfg.HeadDim
}

// attention runs causal attention for every unit planned for this step.
func (b *Backend) attention(layer int, batch *engine.Batch) {
	scale := float32(b.cfg.AttnScale)
	if b.cfg.ScaleAttnByInverseLayerIdx {
		scale /= float32(layer + 1)
	}
	b.at = attnTask{b: b, batch: batch, layer: layer, scale: scale}
	b.pool.parallel(&b.at, len(b.units), 1)
}

// attnTask computes causal attention for the planned units, reading keys
// and values through each row's block table.
type attnTask struct {
	b     *Backend
	batch *engine.Batch
	layer int
	scale float32
}

func (t *attnTask) run(w, lo, hi int) {
	for _, u := range t.b.units[lo:hi] {
		if u.rows == 1 {
			t.row(w, int(u.row), int(u.kvHead))
		} else {
			t.block(w, u)
		}
	}
}

// row is a row unit: row r, KV head kvh and its query heads.
func (t *attnTask) row(w, r, kvh int) {
	b := t.b
	c := &b.cfg
	D, bs, G := c.HeadDim, b.blockSize, c.GroupSize()
	table := t.batch.Seqs[b.rowSeq[r]].BlockTable
	n := int(b.rowPos[r]) + 1 // causal: positions 0..pos
	sc := b.scores[w][:n]
	// The row's keys and values sit in scattered blocks of a few KiB, and
	// the hardware prefetchers lose the stream at every block boundary:
	// ask for all of them up front, into L2, so that their misses overlap
	// instead of each block's first lines waiting in turn. In paired runs
	// (GPT-2 124M, batch 8 and 32, context 170) this took attention from
	// 27-31 to 28-40 GB/s, the speed of a plain read of the same blocks.
	for j0 := 0; j0 < n; j0 += bs {
		off := b.kvOffset(t.layer, int(table[j0/bs]), kvh)
		cnt := min(bs, n-j0)
		f32.PrefetchL2(b.kc[off : off+cnt*D])
		f32.PrefetchL2(b.vc[off : off+cnt*D])
	}
	for h := kvh * G; h < (kvh+1)*G; h++ {
		q := b.qkv[r*b.qkvW+h*D : r*b.qkvW+(h+1)*D]
		for j0 := 0; j0 < n; j0 += bs {
			off := b.kvOffset(t.layer, int(table[j0/bs]), kvh)
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
		o := b.att[r*c.QDim()+h*D : r*c.QDim()+(h+1)*D]
		clear(o)
		// The weighted values a slice of f32.KBlock positions at a time:
		// the first summed into o, each later one on its own and then
		// added, as a block unit's product adds its slices.
		for s0 := 0; s0 < n; s0 += f32.KBlock {
			acc := o
			if s0 > 0 {
				acc = b.valueSlice[w]
				clear(acc)
			}
			for j := s0; j < min(s0+f32.KBlock, n); {
				blk := j / bs
				off := b.kvOffset(t.layer, int(table[blk]), kvh) + (j-blk*bs)*D
				cnt := min((blk+1)*bs, s0+f32.KBlock, n) - j
				f32.AxpyRows(acc, sc[j:j+cnt], b.vc[off:off+cnt*D])
				j += cnt
			}
			if s0 > 0 {
				f32.Axpy(o, 1, acc)
			}
		}
		f32.Scale(o, inv)
	}
}

// block is a block unit: rows u.row.. of one sequence at consecutive
// positions p0.., KV head u.kvHead and its query heads. Keys and values
// 0..p0+rows-1 are gathered once into the worker's scratch; for each query
// head the scores are DotRows per row and O = softmax(S)·V one matrix
// product.
func (t *attnTask) block(w int, u attnUnit) {
	b := t.b
	c := &b.cfg
	D, bs, G, QD := c.HeadDim, b.blockSize, c.GroupSize(), c.QDim()
	r0, R, kvh := int(u.row), int(u.rows), int(u.kvHead)
	table := t.batch.Seqs[b.rowSeq[r0]].BlockTable
	p0 := int(b.rowPos[r0])
	n := p0 + R // the last row sees every key up to its own position
	ws := &b.blk[w]
	ws.values.Reshape(n, D)
	for j0 := 0; j0 < n; j0 += bs {
		off := b.kvOffset(t.layer, int(table[j0/bs]), kvh)
		cnt := min(bs, n-j0)
		copy(ws.keys[j0*D:(j0+cnt)*D], b.kc[off:off+cnt*D])
		for j := j0; j < j0+cnt; j++ {
			kv := off + (j-j0)*D
			ws.values.SetRow(j, b.vc[kv:kv+D])
		}
	}
	for h := kvh * G; h < (kvh+1)*G; h++ {
		// Scores of row i are sc[i·n : i·n+n]: over its own positions, as
		// a row unit computes them; the masked rest weigh nothing.
		sc := ws.scores[:R*n]
		for i := range R {
			valid := p0 + i + 1 // causal
			row := sc[i*n : i*n+valid]
			q := b.qkv[(r0+i)*b.qkvW+h*D : (r0+i)*b.qkvW+(h+1)*D]
			f32.DotRows(row, q, ws.keys[:valid*D])
			f32.Scale(row, t.scale)
			ws.inv[i] = 1 / f32.ExpSubSum(row, f32.Max(row))
			clear(sc[i*n+valid : (i+1)*n])
		}
		o := b.att[r0*QD+h*D:]
		for i := range R {
			clear(o[i*QD : i*QD+D])
		}
		ws.values.MulAdd(o, QD, sc, n, R, 0, D)
		for i := range R {
			f32.Scale(o[i*QD:i*QD+D], ws.inv[i])
		}
	}
}
