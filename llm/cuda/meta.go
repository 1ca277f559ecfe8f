package cuda

import (
	"fmt"

	"github.com/tinyserve/tinyserve/llm/engine"
)

// batchMeta is one step's batch flattened into the int32 arrays the kernels
// read, packed into one buffer so that a step needs a single host-to-device
// copy. Offsets are in int32 elements from the start of the buffer.
//
// Layout: tokens[N] | pos[N] | seq[N] | blockTables[S*MaxBlocks] |
// sampleRows[R] | tiles[2*TilesCap] | decodeRows[S]. Row i of the flattened batch is token j of sequence s in
// batch order. sampleRows lists the token rows whose results go back: the
// last token's row of each sampled sequence, and every row of a sequence
// with PromptLogits set. Rows that need logits come first (their logits
// rows are then the first L rows of the LM head's output, so the one
// device-to-host copy of the results takes a prefix); Order maps each
// sampled row back to its place in the engine's result order.
//
// tiles and decodeRows split the rows between the attention kernels
// (forward.go): every sequence with two or more rows in the step is cut
// into query tiles of up to flashRows consecutive rows, each a pair (first
// row, row count) for flash_prefill; the rows of one-token sequences (the
// decodes) are listed in decodeRows for the row kernels. Both are padded
// to bounds that depend only on N and S — TilesCap pairs, the padding
// (0, 0), and S rows, the padding -1 — so that a launch over the bounds
// (a CUDA graph's) is the same for every step of that N and S.
type batchMeta struct {
	N, S, R, L int // token rows, sequences, sampled rows, rows needing logits
	MaxBlocks  int // block-table stride: the longest table this step needs
	MaxPos     int // largest position in the batch

	OffTokens, OffPos, OffSeq, OffBlocks, OffSample int
	// Tiles is the number of query tiles, TilesCap their bound
	// (flashTilesCap(N, S)); Dec the number of decode rows.
	Tiles, TilesCap, Dec int
	OffTiles, OffDec     int
	// SplitCtx is the context bound decode rows' splits are cut from
	// (attentionSplits); Forward sets it after packing.
	SplitCtx int
	// Len is the packed length in int32 elements.
	Len int
	// Order[k] is the result index (among sampled sequences, in batch
	// order) of sampled row k.
	Order []int
}

// metaLimits are the model and pool bounds a batch is checked against.
type metaLimits struct {
	vocab, nPositions, numBlocks, blockSize int
}

// packBatch checks b against lim and flattens it into buf (grown as needed,
// returned), filling m. The block-table stride is the longest table the
// batch needs, or minStride if that is more (CUDA graphs fix the stride).
// Nothing of b is kept: the batch is valid only during Forward.
func packBatch(buf []int32, m *batchMeta, b *engine.Batch, lim metaLimits, minStride int) ([]int32, error) {
	bs := lim.blockSize
	n, maxBlocks, r, l, maxPos := 0, max(1, minStride), 0, 0, 0
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
	*m = batchMeta{N: n, S: S, R: r, L: l, MaxBlocks: maxBlocks, MaxPos: maxPos, Order: m.Order[:0]}
	m.OffTokens = 0
	m.OffPos = n
	m.OffSeq = 2 * n
	m.OffBlocks = 3 * n
	m.OffSample = m.OffBlocks + S*maxBlocks
	m.TilesCap = flashTilesCap(n, S)
	m.OffTiles = m.OffSample + r
	m.OffDec = m.OffTiles + 2*m.TilesCap
	m.Len = m.OffDec + S
	if cap(buf) < m.Len {
		buf = make([]int32, m.Len, m.Len+m.Len/2)
	}
	buf = buf[:m.Len]
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
	tiles, dec := buf[m.OffTiles:m.OffDec], buf[m.OffDec:m.Len]
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
	for j := m.Dec; j < S; j++ {
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
