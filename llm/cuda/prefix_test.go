package cuda

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// TestGPUEnginePrefixCaching: the engine with prefix caching on the GPU
// (float32) continues each golden prompt with the golden's greedy tokens,
// and then the prompt extended by half of them, whose first whole blocks
// (decode blocks included) come from the cache, with the other half.
func TestGPUEnginePrefixCaching(t *testing.T) { checkEnginePrefixCaching(t, newGPUOpts) }

// TestEmuEnginePrefixCaching is TestGPUEnginePrefixCaching on the emulated
// kernels.
func TestEmuEnginePrefixCaching(t *testing.T) { checkEnginePrefixCaching(t, newEmuBackend) }

func checkEnginePrefixCaching(t *testing.T, newDev newDevice) {
	m, cases := loadGoldenCases(t, "gpt2-tiny-hot")
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	b := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
	e, err := engine.New(b, tok, m.Info(), engine.Config{NumBlocks: goldenBlocks, PrefixCaching: true, MaxNumBatchedTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	generate := func(prompt []int, n int) ([]int, int) {
		t.Helper()
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt, Params: llm.SamplingParams{MaxTokens: n, IgnoreEOS: true}})
		if err != nil {
			t.Fatal(err)
		}
		var toks []int
		cached := 0
		for ev := range ch {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			toks = append(toks, ev.TokenIDs...)
			cached = max(cached, ev.CachedPromptTokens)
		}
		return toks, cached
	}
	reused := 0
	for _, c := range cases {
		want := c.Greedy.Tokens[:min(len(c.Greedy.Tokens), m.Config.NPositions-len(c.InputIDs))]
		if got, _ := generate(c.InputIDs, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, golden %v", c.Name, got, want)
		}
		k := len(want) / 2
		got, cached := generate(append(slices.Clone(c.InputIDs), want[:k]...), len(want)-k)
		if !slices.Equal(got, want[k:]) {
			t.Errorf("%s extended by %d tokens (%d cached): %v, golden %v", c.Name, k, cached, got, want[k:])
		}
		if wantCached := (len(c.InputIDs) + k - 1) / 16 * 16; cached != wantCached {
			t.Errorf("%s extended: %d prompt tokens cached, want %d", c.Name, cached, wantCached)
		}
		reused += cached
	}
	t.Logf("%d prompt tokens came from the prefix cache", reused)
	if reused == 0 {
		t.Error("no prompt reused the cache")
	}
}

// TestGPUSharedBlocksWithinOneStep: one step holds a sequence computing a
// golden prompt and, after it in the batch, one that shares the prompt's
// whole blocks and starts after them, reading K and V the same step writes
// (the qkv kernel writes every row's before attention runs). Both last rows
// must give the golden's top-10 logits (float32).
func TestGPUSharedBlocksWithinOneStep(t *testing.T) { checkSharedBlocksWithinOneStep(t, newGPUOpts) }

// TestEmuSharedBlocksWithinOneStep is TestGPUSharedBlocksWithinOneStep on
// the emulated kernels.
func TestEmuSharedBlocksWithinOneStep(t *testing.T) {
	checkSharedBlocksWithinOneStep(t, newEmuBackend)
}

func checkSharedBlocksWithinOneStep(t *testing.T, newDev newDevice) {
	const name, tol, blockSize = "gpt2-tiny-hot", 5e-5, 16
	m, cases := loadGoldenCases(t, name)
	b := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
	if err := b.AllocateKV(goldenBlocks, blockSize); err != nil {
		t.Fatal(err)
	}
	mgr, err := kv.New(goldenBlocks, blockSize, kv.WithPrefixCaching())
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for i, c := range cases {
		x, y := kv.SeqID(2*i+1), kv.SeqID(2*i+2)
		n := len(c.InputIDs)
		if ok, err := mgr.Allocate(x, n); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := mgr.CacheBlocks(x, c.InputIDs, n); err != nil {
			t.Fatal(err)
		}
		prefix := mgr.CachedPrefix(nil, c.InputIDs[:n-1])
		start := len(prefix) * blockSize
		if ok, err := mgr.AllocateWithPrefix(y, prefix, n); !ok || err != nil {
			t.Fatal(ok, err)
		}
		shared += start
		rows, err := b.Forward(&engine.Batch{NumTokens: 2*n - start, Seqs: []engine.SeqBatch{
			{ID: x, Tokens: c.InputIDs, BlockTable: mgr.BlockTable(x), Sample: true, NeedLogits: true},
			{ID: y, Tokens: c.InputIDs[start:], StartPos: start, BlockTable: mgr.BlockTable(y), Sample: true, NeedLogits: true},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for r, row := range rows {
			for j, tok := range c.Top10.IDs {
				if d := math.Abs(float64(row.Logits[tok]) - c.Top10.Values[j]); d > tol {
					t.Errorf("%s row %d: logit[%d] = %.9g, golden %.9g", c.Name, r, tok, row.Logits[tok], c.Top10.Values[j])
				}
			}
		}
		for _, id := range []kv.SeqID{x, y} {
			if err := mgr.Free(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if shared == 0 {
		t.Fatal("no prompt shared a block: the test exercises nothing")
	}
}
