package cpu

import (
	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// Forward implements engine.Backend. Every returned row has Argmax set (ties
// to the lowest id); Logits is set only when the sequence's NeedLogits or
// PromptLogits asked for it, so that a greedy request takes the engine's
// argmax path without a pass over the vocabulary. Rows and logits are
// reused by the next call.
func (b *Backend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	maxEnd, err := b.validate(batch)
	if err != nil {
		return nil, err
	}
	c := &b.cfg
	C, M := c.Hidden, batch.NumTokens
	nSample, promptRows := 0, false
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		if s.PromptLogits {
			nSample += len(s.Tokens)
			promptRows = true
		} else if s.Sample {
			nSample++
		}
	}
	b.grow(M, nSample, maxEnd)
	if M == 0 {
		return b.out[:0], nil
	}
	// batch.Dropped needs no work: the backend keeps no per-sequence state
	// between steps (the KV lives in the engine's blocks, and everything a
	// step needs comes with the batch).
	b.embed(batch)
	if b.hook != nil {
		b.hook(0, b.h[:M*C], M)
	}

	b.planAttention(batch)
	for l := range c.Layers {
		pl, nw := &b.packed[l], &b.norms[l]
		b.norm(b.xn[:M*C], b.h[:M*C], nw.attn)
		b.matmul(b.qkv, b.qkvW, b.xn, C, pl.qkv, pl.qkvBias, M, mmStore)
		b.prepare(l, batch, M)
		b.attention(l, batch)
		b.matmul(b.h, C, b.att, c.QDim(), pl.o, pl.oBias, M, mmAdd)
		b.norm(b.xn[:M*C], b.h[:M*C], nw.mlp)
		b.mlp(pl, M)
		if b.hook != nil {
			b.hook(l+1, b.h[:M*C], M)
		}
	}
	return b.head(batch, promptRows), nil
}

// embed writes each row's token embedding (plus its learned position's)
// into the residual stream and records which sequence and position each
// row is, and which rows are sampled.
func (b *Backend) embed(batch *engine.Batch) {
	c := &b.cfg
	C, half := c.Hidden, c.HeadDim/2
	w := &b.m.Weights
	b.sampled = b.sampled[:0]
	r := 0
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		for j, tok := range s.Tokens {
			pos := s.StartPos + j
			b.rowSeq[r], b.rowPos[r] = int32(i), int32(pos)
			dst := b.h[r*C : (r+1)*C]
			w.Embed.Float32sInto(dst, tok*C)
			if c.LearnedPositions {
				for k := range dst {
					dst[k] += w.Positions.At(pos*C + k)
				}
			}
			if c.Rotary {
				cs := b.ropeCS[r*c.HeadDim : (r+1)*c.HeadDim]
				model.RopeAngles(cs[:half], cs[half:], b.invFreq, pos)
			}
			if s.PromptLogits || (s.Sample && j == len(s.Tokens)-1) {
				b.sampled = append(b.sampled, int32(r))
			}
			r++
		}
	}
}

// mlp adds the feed-forward block of one layer to the residual stream,
// reading the normalised rows in xn.
func (b *Backend) mlp(pl *packedLayer, M int) {
	c := &b.cfg
	C, I := c.Hidden, c.Intermediate
	if c.MLP == model.MLPGated {
		// fc holds [gate | up] per row; the activation leaves
		// silu(gate)·up in the gate half, which the down projection reads
		// with the row stride 2I.
		b.matmul(b.fc, 2*I, b.xn, C, pl.up, pl.upBias, M, mmStore)
		b.pt = prepTask{b: b, mode: prepSiLUMul}
		b.pool.parallel(&b.pt, M, prepRows)
		b.matmul(b.h, C, b.fc, 2*I, pl.down, pl.downBias, M, mmAdd)
		return
	}
	mode := mmGeluTanh
	if c.Activation == model.GeluErf {
		mode = mmGeluErf
	}
	b.matmul(b.fc, I, b.xn, C, pl.up, pl.upBias, M, mode)
	b.matmul(b.h, C, b.fc, I, pl.down, pl.downBias, M, mmAdd)
}

// head runs the sampled rows through the final norm and the LM head and
// returns the engine's rows.
func (b *Backend) head(batch *engine.Batch, promptRows bool) []engine.SampleRow {
	c := &b.cfg
	C, V := c.Hidden, c.VocabSize
	S := len(b.sampled)
	for i, row := range b.sampled {
		normRow(c, b.hs[i*C:(i+1)*C], b.h[int(row)*C:(int(row)+1)*C], b.final)
	}
	if b.hook != nil {
		b.hook(c.Layers+1, b.hs[:S*C], S)
	}
	logits := b.logitsFor(S, promptRows)
	headUnits := (V + headPanels*f32.PanelWidth - 1) / (headPanels * f32.PanelWidth)
	if n := headUnits * S; n > cap(b.headBest) {
		b.headBest = make([]unitMax, n)
	}
	b.ht = headTask{x: b.hs[:S*C], w: b.lmHead, y: logits, rows: S, c: C, best: b.headBest[:headUnits*S]}
	if b.lmHead.UsesQ8Rows() {
		// Quantized once here for the integer Q8_0 kernels, not per unit.
		b.q8x.Reset(S, C)
		b.q8x.Quantize(b.hs, C, 0, S)
		b.ht.xq = &b.q8x
	}
	b.pool.parallel(&b.ht, headUnits, 1)
	out := b.out[:S]
	for i := range out {
		row := logits[i*V : (i+1)*V]
		out[i] = engine.SampleRow{Argmax: b.ht.argmaxOf(i, headUnits)}
		if b.wantLogits(batch, int(b.sampled[i])) {
			out[i].Logits = row
		}
	}
	return out
}

// wantLogits reports whether the sequence of batch row r asked for logits.
func (b *Backend) wantLogits(batch *engine.Batch, r int) bool {
	s := &batch.Seqs[b.rowSeq[r]]
	return s.NeedLogits || s.PromptLogits
}
