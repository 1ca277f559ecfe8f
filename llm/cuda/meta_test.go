package cuda

import (
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine"
)

var testLimits = metaLimits{vocab: 100, nPositions: 64, numBlocks: 10, blockSize: 4}

// TestPackBatch flattens a hand-made step (a 3-token prefill chunk, a
// decode that needs logits, a chunk that is not sampled) and checks every
// packed value against the layout documented on batchMeta.
func TestPackBatch(t *testing.T) {
	b := &engine.Batch{NumTokens: 6, Seqs: []engine.SeqBatch{
		{ID: 7, Tokens: []int{5, 6, 7}, StartPos: 0, BlockTable: []int32{3}, Sample: true},
		{ID: 8, Tokens: []int{9}, StartPos: 5, BlockTable: []int32{1, 4, 9}, Sample: true, NeedLogits: true},
		{ID: 9, Tokens: []int{10, 11}, StartPos: 2, BlockTable: []int32{2}},
	}}
	var m batchMeta
	buf, err := packBatch(nil, &m, b, testLimits, stepPad{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{
		5, 6, 7, 9, 10, 11, // tokens
		0, 1, 2, 5, 2, 3, // positions
		0, 0, 0, 1, 2, 2, // sequence index of each row
		3, 2, // sampled rows: seq 1 (needs logits) first, then seq 0's last row
		0, 3, 4, 2, 0, 0, 0, 0, // query tiles (first row, rows): seq 0's and seq 2's, padded to ceil(6/16)+3 = 4
		3, -1, -1, // decode rows (seq 1's), padded to 3 sequences
		3, 0, 1, 4, 2, 0, // block tables, stride 2 (seq 1 needs blocks for positions 0..5), zero-padded
	}
	if !slices.Equal(buf, want) {
		t.Errorf("packed\n got %v\nwant %v", buf, want)
	}
	wantMeta := batchMeta{N: 6, S: 3, R: 2, L: 1, NP: 6, RP: 2, MaxBlocks: 2, MaxPos: 5,
		OffTokens: 0, OffPos: 6, OffSeq: 12, OffSample: 18, Tiles: 2, TilesCap: 4, Dec: 1, OffTiles: 20, OffDec: 28, OffBlocks: 31, Len: 37, Order: []int{1, 0}}
	if m.N != wantMeta.N || m.S != wantMeta.S || m.R != wantMeta.R || m.L != wantMeta.L || m.NP != wantMeta.NP || m.RP != wantMeta.RP || m.MaxBlocks != wantMeta.MaxBlocks ||
		m.MaxPos != wantMeta.MaxPos || m.OffPos != wantMeta.OffPos || m.OffSeq != wantMeta.OffSeq || m.OffBlocks != wantMeta.OffBlocks ||
		m.OffSample != wantMeta.OffSample || m.Len != wantMeta.Len || !slices.Equal(m.Order, wantMeta.Order) ||
		m.Tiles != wantMeta.Tiles || m.TilesCap != wantMeta.TilesCap || m.Dec != wantMeta.Dec || m.OffTiles != wantMeta.OffTiles || m.OffDec != wantMeta.OffDec {
		t.Errorf("meta\n got %+v\nwant %+v", m, wantMeta)
	}

	// Reuse: a decode-only step into the same buffer allocates nothing new.
	b2 := &engine.Batch{NumTokens: 1, Seqs: []engine.SeqBatch{
		{ID: 7, Tokens: []int{42}, StartPos: 3, BlockTable: []int32{3}, Sample: true},
	}}
	buf2, err := packBatch(buf, &m, b2, testLimits, stepPad{})
	if err != nil {
		t.Fatal(err)
	}
	if &buf2[0] != &buf[0] {
		t.Error("packBatch reallocated a large enough buffer")
	}
	if want := []int32{42, 3, 0, 0, 0, 0, 0, 0, 0, 3}; !slices.Equal(buf2, want) || m.R != 1 || m.L != 0 || !slices.Equal(m.Order, []int{0}) || m.Tiles != 0 || m.Dec != 1 {
		t.Errorf("decode step: %v %+v", buf2, m)
	}
	if n := testing.AllocsPerRun(100, func() { buf2, _ = packBatch(buf2, &m, b, testLimits, stepPad{}) }); n != 0 {
		t.Errorf("steady-state packBatch allocates %v times", n)
	}
}

// TestPackBatchMinStride: a CUDA-graph step fixes the block-table stride;
// tables are zero-padded to it and the sampled rows move accordingly.
func TestPackBatchMinStride(t *testing.T) {
	b := &engine.Batch{NumTokens: 2, Seqs: []engine.SeqBatch{
		{ID: 1, Tokens: []int{4}, StartPos: 4, BlockTable: []int32{5, 6}, Sample: true},
		{ID: 2, Tokens: []int{8}, StartPos: 0, BlockTable: []int32{7}, Sample: true},
	}}
	var m batchMeta
	buf, err := packBatch(nil, &m, b, testLimits, stepPad{stride: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{4, 8, 4, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 5, 6, 0, 7, 0, 0}
	if !slices.Equal(buf, want) || m.MaxBlocks != 3 || m.OffSample != 6 || m.OffBlocks != 16 {
		t.Errorf("got %v (%+v), want %v", buf, m, want)
	}
}

// TestPackBatchPadded: a step packed to a CUDA graph's shape has padding
// token rows (token 0, position 0, sequence -1, which qkv_store and
// attention skip) and padding sampled rows (row 0, never copied back);
// every offset depends on the padded shape only, the block tables coming
// last, and the real counts stay what the step has.
func TestPackBatchPadded(t *testing.T) {
	b := &engine.Batch{NumTokens: 4, Seqs: []engine.SeqBatch{
		{ID: 1, Tokens: []int{4, 5, 6}, StartPos: 0, BlockTable: []int32{5}, Sample: true},
		{ID: 2, Tokens: []int{8}, StartPos: 4, BlockTable: []int32{7, 9}, Sample: true, NeedLogits: true},
	}}
	var m batchMeta
	pad := stepPad{rows: 8, sample: 4, stride: 3, padded: true}
	buf, err := packBatch(nil, &m, b, testLimits, pad)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{
		4, 5, 6, 8, 0, 0, 0, 0, // tokens, then four padding rows of token 0
		0, 1, 2, 4, 0, 0, 0, 0, // positions
		0, 0, 0, 1, -1, -1, -1, -1, // sequences: -1 marks the padding rows
		3, 2, 0, 0, // sampled rows: seq 1's (logits), seq 0's, then two padding rows reading row 0
		0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // query tiles: seq 0's, padded to ceil(8/16)+8 = 9 (the sequences bounded by the rows)
		3, -1, -1, -1, -1, -1, -1, -1, // decode rows: seq 1's, padded to 8
		5, 0, 0, 7, 9, 0, // block tables, stride 3
	}
	if !slices.Equal(buf, want) {
		t.Errorf("packed\n got %v\nwant %v", buf, want)
	}
	if m.N != 4 || m.R != 2 || m.L != 1 || m.NP != 8 || m.RP != 4 || m.SP != 8 || !m.Padded || m.OffPos != 8 || m.OffSeq != 16 || m.OffSample != 24 ||
		m.OffTiles != 28 || m.OffDec != 46 || m.OffBlocks != 54 || m.Len != 60 {
		t.Errorf("meta %+v", m)
	}
	// The same shape with another number of sequences: the same offsets.
	b1 := &engine.Batch{NumTokens: 5, Seqs: []engine.SeqBatch{
		{ID: 1, Tokens: []int{1, 2, 3, 4, 5}, StartPos: 0, BlockTable: []int32{5, 6}, Sample: true},
	}}
	var m1 batchMeta
	if _, err := packBatch(nil, &m1, b1, testLimits, pad); err != nil {
		t.Fatal(err)
	}
	if m1.OffPos != m.OffPos || m1.OffSeq != m.OffSeq || m1.OffSample != m.OffSample || m1.OffTiles != m.OffTiles || m1.OffDec != m.OffDec || m1.OffBlocks != m.OffBlocks || m1.NP != 8 || m1.RP != 4 || m1.R != 1 {
		t.Errorf("one sequence: meta %+v, offsets differ from %+v", m1, m)
	}
}

func TestPackBatchRejects(t *testing.T) {
	ok := engine.SeqBatch{ID: 1, Tokens: []int{1, 2}, StartPos: 0, BlockTable: []int32{0}, Sample: true}
	cases := []struct {
		name string
		edit func(s *engine.SeqBatch, b *engine.Batch)
		want string
	}{
		{"no tokens", func(s *engine.SeqBatch, b *engine.Batch) { s.Tokens = nil; b.NumTokens = 0 }, "no tokens"},
		{"past the context", func(s *engine.SeqBatch, _ *engine.Batch) { s.StartPos = 63; s.BlockTable = make([]int32, 17) }, "outside the context"},
		{"negative start", func(s *engine.SeqBatch, _ *engine.Batch) { s.StartPos = -1 }, "outside the context"},
		{"short block table", func(s *engine.SeqBatch, _ *engine.Batch) { s.StartPos = 3 }, "block table has 1 blocks"},
		{"block outside the pool", func(s *engine.SeqBatch, _ *engine.Batch) { s.BlockTable = []int32{10} }, "outside the pool"},
		{"negative block", func(s *engine.SeqBatch, _ *engine.Batch) { s.BlockTable = []int32{-1} }, "outside the pool"},
		{"token outside the vocabulary", func(s *engine.SeqBatch, _ *engine.Batch) { s.Tokens = []int{1, 100} }, "vocabulary"},
		{"NumTokens mismatch", func(_ *engine.SeqBatch, b *engine.Batch) { b.NumTokens = 3 }, "NumTokens"},
	}
	for _, c := range cases {
		s := ok
		s.Tokens = slices.Clone(ok.Tokens)
		b := &engine.Batch{NumTokens: 2}
		c.edit(&s, b)
		b.Seqs = []engine.SeqBatch{s}
		var m batchMeta
		_, err := packBatch(nil, &m, b, testLimits, stepPad{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// An empty step is valid and packs nothing.
	var m batchMeta
	if buf, err := packBatch(nil, &m, &engine.Batch{}, testLimits, stepPad{}); err != nil || len(buf) != 0 || m.N != 0 {
		t.Errorf("empty batch: %v %v %+v", buf, err, m)
	}
}

// TestPackBatchPromptLogits: every row of a sequence with PromptLogits is a
// result row with logits, whether or not the sequence samples; they keep
// batch order among the rows that need logits, ahead of argmax-only rows.
func TestPackBatchPromptLogits(t *testing.T) {
	b := &engine.Batch{NumTokens: 6, Seqs: []engine.SeqBatch{
		{ID: 1, Tokens: []int{5, 6, 7}, BlockTable: []int32{0}, PromptLogits: true},
		{ID: 2, Tokens: []int{8}, StartPos: 4, BlockTable: []int32{1, 2}, Sample: true},
		{ID: 3, Tokens: []int{9, 10}, BlockTable: []int32{3}, Sample: true, PromptLogits: true},
	}}
	var m batchMeta
	buf, err := packBatch(nil, &m, b, testLimits, stepPad{})
	if err != nil {
		t.Fatal(err)
	}
	if m.R != 6 || m.L != 5 {
		t.Fatalf("R %d L %d, want 6 and 5", m.R, m.L)
	}
	if got, want := buf[m.OffSample:m.OffTiles], []int32{0, 1, 2, 4, 5, 3}; !slices.Equal(got, want) {
		t.Errorf("sampled rows %v, want %v", got, want)
	}
	if want := []int{0, 1, 2, 4, 5, 3}; !slices.Equal(m.Order, want) {
		t.Errorf("order %v, want %v", m.Order, want)
	}
}

// TestPackBatchTiles: a sequence's rows are cut into query tiles of
// flashRows (the last one shorter), one-token sequences are decode rows,
// and the tables are padded to bounds of N and S alone.
func TestPackBatchTiles(t *testing.T) {
	lim := metaLimits{vocab: 100, nPositions: 64, numBlocks: 20, blockSize: 4}
	toks := func(n int) []int { return make([]int, n) }
	b := &engine.Batch{NumTokens: 37, Seqs: []engine.SeqBatch{
		{ID: 1, Tokens: toks(1), StartPos: 9, BlockTable: []int32{0, 1, 2}, Sample: true},
		{ID: 2, Tokens: toks(35), StartPos: 3, BlockTable: []int32{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Sample: true},
		{ID: 3, Tokens: toks(1), StartPos: 0, BlockTable: []int32{13}, Sample: true},
	}}
	var m batchMeta
	buf, err := packBatch(nil, &m, b, lim, stepPad{})
	if err != nil {
		t.Fatal(err)
	}
	if m.TilesCap != 3+3 || m.Tiles != 3 || m.Dec != 2 {
		t.Fatalf("tiles %d of %d, decode rows %d", m.Tiles, m.TilesCap, m.Dec)
	}
	if got, want := buf[m.OffTiles:m.OffDec], []int32{1, 16, 17, 16, 33, 3, 0, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("tiles %v, want %v", got, want)
	}
	if got, want := buf[m.OffDec:m.OffBlocks], []int32{0, 36, -1}; !slices.Equal(got, want) {
		t.Errorf("decode rows %v, want %v", got, want)
	}
}
