package cuda

import (
	"fmt"

	"github.com/tinyserve/tinyserve/llm/engine"
)

// batchMeta is one step's batch flattened into the int32 arrays the kernels
// read, packed into one buffer so that a step needs a single host-to-device
// copy. Offsets are in int32 elements from the start of the buffer.
//
// Layout: tokens[NP] | pos[NP] | seq[NP] | sampleRows[RP] |
// tiles[2*TilesCap] | decodeRows[SP] | blockTables[S*MaxBlocks]. Row i < N
// of the flattened batch is token j of sequence s in batch order.
// sampleRows lists the token rows whose results go back: the last token's
// row of each sampled sequence, and every row of a sequence with
// PromptLogits set. Rows that need logits come first (their logits rows
// are then the first L rows of the LM head's output, so the one
// device-to-host copy of the results takes a prefix); Order maps each
// sampled row back to its place in the engine's result order.
//
// tiles and decodeRows split the rows between the attention kernels
// (forward.go): every sequence with two or more rows in the step is cut
// into query tiles of up to flashRows consecutive rows, each a pair (first
// row, row count) for flash_prefill; the rows of one-token sequences (the
// decodes) are listed in decodeRows for the row kernels. Both are padded
// to bounds that depend only on NP and SP — TilesCap pairs, the padding
// (0, 0), and SP rows, the padding -1 — so that a launch over the bounds
// is the same for every step of that shape.
//
// A CUDA-graph step is padded to its graph's shape (graph.go): NP ≥ N token
// rows and RP ≥ R sampled rows are launched, and SP = NP bounds the
// sequences (a step never has more sequences than rows). A padding row
// i ≥ N has token 0, position 0 and sequence -1, which qkv_store and the
// attention kernels take as "no row": they return at once, so it writes no
// KV cache and reads none; the other kernels and the GEMMs compute it like
// any row, and since every one of them computes each row from that row
// alone, it changes no real row. A padding sampled row k ≥ R is row 0
// again, its argmax and logits written past the R (and L) that are copied
// back. The offsets of every array the forward pass reads depend only on
// NP, RP and SP; the block tables come last so that the number of
// sequences changes only the copy's length.
type batchMeta struct {
	N, S, R, L int // token rows, sequences, sampled rows, rows needing logits
	NP, RP     int // token rows and sampled rows launched: N and R, or a graph's padded shape
	MaxBlocks  int // block-table stride: the longest table this step needs, or a graph's stride
	Need       int // the longest table this step needs, in blocks
	MaxPos     int // largest position in the batch

	OffTokens, OffPos, OffSeq, OffBlocks, OffSample int
	// Tiles is the number of query tiles, TilesCap their bound
	// (flashTilesCap(NP, SP)); Dec the number of decode rows, SP their
	// bound (S, or NP in a padded graph step).
	Tiles, TilesCap, Dec, SP int
	// Padded is set for a step packed to a padded graph shape: the
	// attention launches then cover the bounds, whatever the rows are.
	Padded           bool
	OffTiles, OffDec int
	// SplitCtx is the context bound decode rows' splits are cut from
	// (attentionSplits); Forward sets it after packing.
	SplitCtx int
	// SplitRows, when set, is the rows the decode split count is cut for:
	// a padded graph shape's rows, whether or not the step runs from its
	// graph (Forward sets it); otherwise the rows attention launches.
	SplitRows int
	// Len is the packed length in int32 elements.
	Len int
	// Order[k] is the result index (among sampled sequences, in batch
	// order) of sampled row k.
	Order []int
}

// stepPad is the shape a step is packed to: at least rows token rows and
// sample sampled rows, block tables of at least stride blocks. The zero
// value packs the batch as it is (an eager step).
type stepPad struct {
	rows, sample, stride int
	padded               bool // a bucket's shape (graphKey.padded)
}

// metaLimits are the model and pool bounds a batch is checked against.
type metaLimits struct {
	vocab, nPositions, numBlocks, blockSize int
}

// packBatch checks b against lim and flattens it into buf (grown as needed,
// returned), filling m. The block-table stride is the longest table the
// batch needs, or pad.stride if that is more, and the rows launched are
// padded to pad.rows and pad.sample (CUDA graphs fix them; see batchMeta).
// Nothing of b is kept: the batch is valid only during Forward.
func packBatch(buf []int32, m *batchMeta, b *engine.Batch, lim metaLimits, pad stepPad) ([]int32, error) {
	bs := lim.blockSize
	n, maxBlocks, longest, r, l, maxPos := 0, max(1, pad.stride), 1, 0, 0, 0
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if len(s.Tokens) == 0 {
			return buf, fmt.Errorf("cuda: batch seq %d (id %d) has no tokens", i, s.ID)
		}
		end := s.StartPos + len(s.Tokens)
		if s.StartPos < 0 || end > lim.nPositions {
			return buf, fmt.Errorf("cuda: batch seq %d (id %d): positions [%d, %d) outside the context [0, %d)", i, s.ID, s.StartPos, end, lim.nPositions)
		}
		need := (end + bs - 1) / bs
		if len(s.BlockTable) < need {
			return buf, fmt.Errorf("cuda: batch seq %d (id %d): block table has %d blocks, positions up to %d need %d", i, s.ID, len(s.BlockTable), end, need)
		}
		for _, id := range s.BlockTable[:need] {
			if id < 0 || int(id) >= lim.numBlocks {
				return buf, fmt.Errorf("cuda: batch seq %d (id %d): block id %d outside the pool [0, %d)", i, s.ID, id, lim.numBlocks)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || t >= lim.vocab {
				return buf, fmt.Errorf("cuda: batch seq %d (id %d): token id %d outside the vocabulary [0, %d)", i, s.ID, t, lim.vocab)
			}
		}
		maxBlocks = max(maxBlocks, need)
		longest = max(longest, need)
		maxPos = max(maxPos, end-1)
		n += len(s.Tokens)
		k, logits := resultRows(s)
		r += k
		if logits {
			l += k
		}
	}
	if n != b.NumTokens {
		return buf, fmt.Errorf("cuda: batch NumTokens is %d, its sequences hold %d tokens", b.NumTokens, n)
	}
	S := len(b.Seqs)
	np, rp := max(n, pad.rows), max(r, pad.sample)
	*m = batchMeta{N: n, S: S, R: r, L: l, NP: np, RP: rp, MaxBlocks: maxBlocks, Need: longest, MaxPos: maxPos, Order: m.Order[:0]}
	m.OffTokens = 0
	m.OffPos = np
	m.OffSeq = 2 * np
	m.OffSample = 3 * np
	m.SP = S
	if pad.padded {
		m.SP, m.Padded = np, true
	}
	m.TilesCap = flashTilesCap(np, m.SP)
	m.OffTiles = m.OffSample + rp
	m.OffDec = m.OffTiles + 2*m.TilesCap
	m.OffBlocks = m.OffDec + m.SP
	m.Len = m.OffBlocks + S*maxBlocks
	if cap(buf) < m.Len {
		buf = make([]int32, m.Len, m.Len+m.Len/2)
	}
	buf = buf[:m.Len]
	// Padding rows: token 0 at position 0 of no sequence; padding sampled
	// rows: row 0 (batchMeta).
	for i := n; i < np; i++ {
		buf[m.OffTokens+i], buf[m.OffPos+i], buf[m.OffSeq+i] = 0, 0, -1
	}
	clear(buf[m.OffSample+r : m.OffSample+rp])
	row := 0
	// Sampled rows needing logits take slots 0..L-1, the others L..R-1.
	kLogits, kArgmax := 0, l
	for i := range b.Seqs {
		s := &b.Seqs[i]
		for j, t := range s.Tokens {
			buf[m.OffTokens+row] = int32(t)
			buf[m.OffPos+row] = int32(s.StartPos + j)
			buf[m.OffSeq+row] = int32(i)
			row++
		}
		tbl := buf[m.OffBlocks+i*maxBlocks : m.OffBlocks+(i+1)*maxBlocks]
		need := (s.StartPos + len(s.Tokens) + bs - 1) / bs
		copy(tbl, s.BlockTable[:need])
		clear(tbl[need:])
		nr, logits := resultRows(s)
		k := &kArgmax
		if logits {
			k = &kLogits
		}
		for j := row - nr; j < row; j++ {
			buf[m.OffSample+*k] = int32(j)
			*k++
		}
	}
	// Query tiles of the multi-row sequences, decode rows of the others.
	tiles, dec := buf[m.OffTiles:m.OffDec], buf[m.OffDec:m.OffBlocks]
	clear(tiles)
	row = 0
	for i := range b.Seqs {
		k := len(b.Seqs[i].Tokens)
		if k == 1 {
			dec[m.Dec] = int32(row)
			m.Dec++
		} else {
			for r0 := 0; r0 < k; r0 += flashRows {
				tiles[2*m.Tiles] = int32(row + r0)
				tiles[2*m.Tiles+1] = int32(min(flashRows, k-r0))
				m.Tiles++
			}
		}
		row += k
	}
	for j := m.Dec; j < m.SP; j++ {
		dec[j] = -1
	}
	// Order: the same walk, recording each sampled row's result index.
	kLogits, kArgmax = 0, l
	res := 0
	if cap(m.Order) < r {
		m.Order = make([]int, r)
	}
	m.Order = m.Order[:r]
	for i := range b.Seqs {
		nr, logits := resultRows(&b.Seqs[i])
		k := &kArgmax
		if logits {
			k = &kLogits
		}
		for range nr {
			m.Order[*k] = res
			*k++
			res++
		}
	}
	return buf, nil
}

// resultRows is how many of a sequence's rows return results (its last
// when sampled, all of them for prompt logits) and whether they need logits.
func resultRows(s *engine.SeqBatch) (n int, logits bool) {
	switch {
	case s.PromptLogits:
		return len(s.Tokens), true
	case s.Sample:
		return 1, s.NeedLogits
	}
	return 0, false
}

// flashTilesCap bounds the query tiles of a step of n rows in s sequences:
// a sequence of k rows has ceil(k/flashRows) <= k/flashRows + 1 tiles.
func flashTilesCap(n, s int) int { return (n+flashRows-1)/flashRows + s }
