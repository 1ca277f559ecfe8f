package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// TestForwardRejectsBadBatches checks that malformed batches are errors
// that say what is wrong, not panics.
func TestForwardRejectsBadBatches(t *testing.T) {
	m := smallModel(t) // 8 positions, vocab 11
	b, err := New(m, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seq := func(tokens []int, start int, table ...int32) engine.SeqBatch {
		return engine.SeqBatch{ID: 1, Tokens: tokens, StartPos: start, BlockTable: table, Sample: true}
	}
	one := func(s engine.SeqBatch) *engine.Batch {
		return &engine.Batch{Seqs: []engine.SeqBatch{s}, NumTokens: len(s.Tokens)}
	}
	if _, err := b.Forward(one(seq([]int{1}, 0, 0))); err == nil || !strings.Contains(err.Error(), "before AllocateKV") {
		t.Errorf("Forward before AllocateKV: %v", err)
	}
	if err := b.AllocateKV(4, 4); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		batch *engine.Batch
		want  string
	}{
		{"token out of vocab", one(seq([]int{1, 11}, 0, 0)), "token id 11 outside the vocabulary"},
		{"negative token", one(seq([]int{-1}, 0, 0)), "token id -1"},
		{"past the context", one(seq([]int{1, 2}, 7, 0, 1)), "positions [7, 9) outside the context [0, 8)"},
		{"negative start", one(seq([]int{1}, -1, 0)), "positions [-1, 0)"},
		{"short block table", one(seq([]int{1, 2, 3, 4, 5}, 0, 0)), "block table has 1 blocks"},
		{"block outside pool", one(seq([]int{1}, 0, 4)), "block id 4 outside the pool [0, 4)"},
		{"no tokens", one(seq(nil, 0, 0)), "has no tokens"},
		{"NumTokens mismatch", &engine.Batch{Seqs: []engine.SeqBatch{seq([]int{1}, 0, 0)}, NumTokens: 3}, "NumTokens is 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := b.Forward(tc.batch)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Forward = %v, %v; want error containing %q", rows, err, tc.want)
			}
		})
	}
	// The exact end of the context is fine.
	if rows, err := b.Forward(one(seq([]int{1, 2, 3, 4, 5, 6, 7, 8}, 0, 2, 3))); err != nil || len(rows) != 1 {
		t.Errorf("full-context prefill: %v, %v", rows, err)
	}
	b.Close()
	if _, err := b.Forward(one(seq([]int{1}, 0, 0))); err == nil {
		t.Error("Forward after Close succeeded")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	m := smallModel(t)
	for _, o := range []Options{{Threads: -1}, {Threads: MaxThreads + 1}, {KVCacheBytes: -5}} {
		if b, err := New(m, o); err == nil {
			b.Close()
			t.Errorf("New(%+v) succeeded", o)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("nil model accepted")
	}
}

func TestMaxKVBlocks(t *testing.T) {
	tiny, err := model.BuiltinConfig(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	big, err := model.BuiltinConfig(model.Builtin124M)
	if err != nil {
		t.Fatal(err)
	}
	// Per block of 16 tokens: 2 (K,V) x 4 bytes x layers x width x 16.
	tinyBlock := int64(2 * 4 * 4 * 64 * 16)  // 32 KiB
	bigBlock := int64(2 * 4 * 12 * 768 * 16) // 1152 KiB
	tests := []struct {
		name  string
		cfg   model.Config
		opts  Options
		block int
		want  int
		err   string
	}{
		{"tiny default: 64 full-context seqs", tiny, Options{}, 16, 64 * 64, ""},
		{"124M default: 1 GiB", big, Options{}, 16, int((1 << 30) / bigBlock), ""},
		{"explicit budget", tiny, Options{KVCacheBytes: 10*tinyBlock + 5}, 16, 10, ""},
		{"explicit budget above the default cap", tiny, Options{KVCacheBytes: 8 << 30}, 16, int((8 << 30) / tinyBlock), ""},
		{"budget below one block", tiny, Options{KVCacheBytes: 100}, 16, 0, "smaller than one block"},
		{"zero block size", tiny, Options{}, 0, 0, "block size must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := maxKVBlocks(&tc.cfg, tc.opts.KVCacheBytes, tc.block)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("MaxKVBlocks = %d, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("MaxKVBlocks = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	// Through the backend, with the options it was built with.
	m := smallModel(t)
	b, err := New(m, Options{KVCacheBytes: 3 * 2 * 4 * 2 * 4 * 16})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n, err := b.MaxKVBlocks(16); n != 3 || err != nil {
		t.Errorf("backend MaxKVBlocks = %d, %v; want 3", n, err)
	}
}

func TestNewChecksWeights(t *testing.T) {
	m := smallModel(t)
	m.Weights.Layers[1].Up[0].B = m.Weights.Layers[1].Up[0].B.Slice(3)
	b, err := New(m, Options{})
	if err == nil {
		b.Close()
		t.Fatal("New accepted a short tensor")
	}
	if !strings.Contains(err.Error(), `"h.1.mlp.c_fc.bias" has 3 values`) {
		t.Errorf("error %q does not name the tensor", err)
	}
}

// TestThreadsAndLayoutDoNotChangeResults runs the same mixed batch (a
// chunked prefill beside decodes) with 1 and 3 threads and with different
// block sizes and block ids: each output element is computed by one worker
// in a fixed order, so the logits must be bit-identical.
func TestThreadsAndLayoutDoNotChangeResults(t *testing.T) {
	m := randomModel(t, "t", gpt2Config(300, 64, 32, 2, 4), 3, 0.2)
	prompts := [][]int{{5, 9, 200, 7, 7, 1, 0, 299, 42, 17, 3}, {8}, {100, 101, 102, 103, 104}}
	run := func(threads, blockSize, churn int) [][]float32 {
		h := newHarness(t, m, 64, blockSize, Options{Threads: threads})
		if churn > 0 { // take and free blocks so ids differ between runs
			if ok, _ := h.kv.Allocate(99, churn*blockSize); !ok {
				t.Fatal("churn allocation failed")
			}
			defer h.kv.Free(99)
		}
		var out [][]float32
		// Step 1: seq 1 prefills its first 6 tokens, seqs 2 and 3 whole.
		rows := h.step(part{id: 1, tokens: prompts[0][:6]}, part{id: 2, tokens: prompts[1], sample: true}, part{id: 3, tokens: prompts[2], sample: true})
		for _, r := range rows {
			out = append(out, r.Logits)
		}
		// Step 2: seq 1 finishes its prompt while 2 and 3 decode.
		rows = h.step(part{id: 2, tokens: []int{rows[0].Argmax}, start: 1, sample: true},
			part{id: 1, tokens: prompts[0][6:], start: 6, sample: true},
			part{id: 3, tokens: []int{rows[1].Argmax}, start: 5, sample: true})
		for _, r := range rows {
			out = append(out, r.Logits)
		}
		return out
	}
	ref := run(1, 16, 0)
	if len(ref) != 5 {
		t.Fatalf("%d rows, want 5", len(ref))
	}
	for _, v := range []struct{ threads, block, churn int }{{3, 16, 0}, {2, 4, 3}, {1, 1, 5}, {3, 5, 2}} {
		got := run(v.threads, v.block, v.churn)
		for i := range ref {
			if !slices.Equal(got[i], ref[i]) {
				t.Errorf("threads %d block %d churn %d: row %d differs", v.threads, v.block, v.churn, i)
			}
		}
	}
}

// TestUntiedHead checks that a separate lm_head.weight, not wte, produces
// the logits, and that every returned row has its argmax set.
func TestUntiedHead(t *testing.T) {
	m := smallModel(t)
	head := make([]float32, m.Weights.Embed.Len())
	for i := range head {
		head[i] = float32(math.Sin(float64(i)))
	}
	m.Weights.LMHead = tensor.FromFloat32(head, m.Weights.Embed.Shape...)
	m.Config.TiedEmbeddings = false
	h := newHarness(t, m, 4, 4, Options{})
	var lnf []float32
	h.b.hook = func(stage int, x []float32, rows int) {
		if stage == m.Config.Layers+1 {
			lnf = slices.Clone(x)
		}
	}
	rows := h.step(part{id: 1, tokens: []int{3, 4, 5}, sample: true})
	C := m.Config.Hidden
	for v := range m.Config.VocabSize {
		var want float64
		for k := range C {
			want += float64(lnf[k]) * float64(head[v*C+k])
		}
		if d := math.Abs(float64(rows[0].Logits[v]) - want); d > 1e-5 {
			t.Errorf("logit %d = %v, want %v", v, rows[0].Logits[v], want)
		}
	}
	if rows[0].Argmax != argmax(rows[0].Logits) {
		t.Errorf("Argmax %d, want %d", rows[0].Argmax, argmax(rows[0].Logits))
	}
}

func TestArgmaxTiesToLowestID(t *testing.T) {
	tests := []struct {
		x    []float32
		want int
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{-1, -1}, 0},
		{[]float32{float32(math.Inf(-1)), 0, 0}, 1},
		{[]float32{5}, 0},
	}
	for _, tc := range tests {
		if got := argmax(tc.x); got != tc.want {
			t.Errorf("argmax(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

// TestSteadyStateAllocations checks that, once buffers have grown to the
// batch size, a decode step allocates nothing.
func TestSteadyStateAllocations(t *testing.T) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, m, 16, 16, Options{})
	var batch engine.Batch
	for i := range 4 {
		id := kv.SeqID(i + 1)
		if ok, _ := h.kv.Allocate(id, 64); !ok {
			t.Fatal("allocate")
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{10 + i}, StartPos: 40, BlockTable: h.kv.BlockTable(id), Sample: true, NeedLogits: i%2 == 0})
	}
	batch.NumTokens = 4
	if _, err := h.b.Forward(&batch); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := h.b.Forward(&batch); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a steady-state decode step allocates %v times, want 0", allocs)
	}
}

// TestLogitsOnlyWhenAsked checks that a greedy row (NeedLogits false) gets
// only its argmax, and that it equals the argmax of the logits a row asking
// for them gets.
func TestLogitsOnlyWhenAsked(t *testing.T) {
	m := smallModel(t)
	h := newHarness(t, m, 8, 4, Options{})
	mk := func(id kv.SeqID, need bool) engine.SeqBatch {
		if ok, _ := h.kv.Allocate(id, 3); !ok {
			t.Fatal("allocate")
		}
		return engine.SeqBatch{ID: id, Tokens: []int{1, 2, 3}, BlockTable: h.kv.BlockTable(id), Sample: true, NeedLogits: need}
	}
	batch := &engine.Batch{Seqs: []engine.SeqBatch{mk(1, false), mk(2, true)}, NumTokens: 6}
	rows, err := h.b.Forward(batch)
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Logits != nil || rows[1].Logits == nil {
		t.Fatalf("logits set: %v %v, want only the second", rows[0].Logits != nil, rows[1].Logits != nil)
	}
	if rows[0].Argmax != argmax(rows[1].Logits) || rows[1].Argmax != rows[0].Argmax {
		t.Errorf("argmax %d and %d, logits say %d", rows[0].Argmax, rows[1].Argmax, argmax(rows[1].Logits))
	}
}

// TestEmptyBatch: a step with nothing to run returns no rows.
func TestEmptyBatch(t *testing.T) {
	h := newHarness(t, smallModel(t), 4, 4, Options{})
	rows, err := h.b.Forward(&engine.Batch{})
	if err != nil || len(rows) != 0 {
		t.Errorf("Forward(empty) = %v, %v", rows, err)
	}
	if rows, err := h.b.Forward(&engine.Batch{Dropped: []kv.SeqID{3}}); err != nil || len(rows) != 0 {
		t.Errorf("Forward(dropped only) = %v, %v", rows, err)
	}
}

// argmax returns the index of the largest value, the lowest on ties: the
// reference for the LM head's argmax, which the head's workers compute
// unit by unit.
func argmax(x []float32) int {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range x {
		if v > best {
			best, bi = v, i
		}
	}
	return bi
}

// TestHeadArgmaxByUnits: the argmax combined from per-unit maxima equals
// the plain one on rows built to trip it: ties within a unit and across a
// unit boundary (the lowest column wins), the maximum in the last, short
// unit, rows of -Inf, and NaNs (ignored, as by argmax).
func TestHeadArgmaxByUnits(t *testing.T) {
	const width = headPanels * f32.PanelWidth
	V := 5*width + 7 // a short last unit
	units := (V + width - 1) / width
	inf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	r := rand.New(rand.NewPCG(1, 2))
	var rows [][]float32
	row := func(set func(x []float32)) {
		x := make([]float32, V)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		set(x)
		rows = append(rows, x)
	}
	row(func(x []float32) {})
	row(func(x []float32) { x[width-1], x[width] = 9, 9 })         // across a boundary
	row(func(x []float32) { x[2*width+3], x[2*width+200] = 9, 9 }) // within a unit
	row(func(x []float32) { x[3*width], x[width+5] = 9, 9 })       // the later unit's first column loses
	row(func(x []float32) { x[V-1] = 9 })                          // the short last unit
	row(func(x []float32) {
		for i := range x {
			x[i] = inf
		}
	})
	row(func(x []float32) {
		for i := range x {
			x[i] = nan
		}
	})
	row(func(x []float32) { x[0], x[width+1], x[4*width] = nan, 9, nan })
	S := len(rows)
	ht := headTask{rows: S, best: make([]unitMax, units*S)}
	for u := range units {
		j0, j1 := u*width, min((u+1)*width, V)
		for s, x := range rows {
			ht.best[u*S+s] = rangeMax(x[j0:j1], j0)
		}
	}
	for s, x := range rows {
		if got, want := ht.argmaxOf(s, units), argmax(x); got != want {
			t.Errorf("row %d: argmax by units %d, plain %d", s, got, want)
		}
	}
}
