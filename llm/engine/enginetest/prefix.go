// Package enginetest holds checks that the tests of several packages run
// against an llm.Engine, whatever its backend.
package enginetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
)

// GoldenCase is a prompt and the greedy tokens a reference implementation
// (PyTorch) continued it with.
type GoldenCase struct {
	Name   string
	Prompt []int
	Greedy []int
}

// CheckPrefixCachingGolden runs each case on e, an engine with prefix
// caching and blocks of blockSize tokens, then the prompt extended by half
// of its greedy tokens, whose first whole blocks (decode blocks included)
// must come from the cache: both runs must continue with the reference's
// tokens. It returns the prompt tokens that came from the cache and fails t
// if there were none.
func CheckPrefixCachingGolden(t testing.TB, e llm.Engine, cases []GoldenCase, blockSize int) int {
	t.Helper()
	reused := 0
	for _, c := range cases {
		want := c.Greedy[:min(len(c.Greedy), e.Info().MaxModelLen-len(c.Prompt))] // prompt + max_tokens fit the context
		if got, _ := greedy(t, e, c.Prompt, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", c.Name, got, want)
		}
		k := len(want) / 2
		got, cached := greedy(t, e, append(slices.Clone(c.Prompt), want[:k]...), len(want)-k)
		if !slices.Equal(got, want[k:]) {
			t.Errorf("%s extended by %d tokens (%d of them cached): %v, want %v", c.Name, k, cached, got, want[k:])
		}
		if wantCached := (len(c.Prompt) + k - 1) / blockSize * blockSize; cached != wantCached {
			t.Errorf("%s extended: %d prompt tokens cached, want %d", c.Name, cached, wantCached)
		}
		reused += cached
	}
	if reused == 0 {
		t.Error("no prompt reused the cache")
	}
	return reused
}

// greedy runs prompt for n tokens, ignoring EOS, and returns them with the
// prompt tokens the cache supplied.
func greedy(t testing.TB, e llm.Engine, prompt []int, n int) ([]int, int) {
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

// SharedPrefixBatch plans in mgr, a KV manager with prefix caching, the
// step a scheduler would: sequence a computes prompt and publishes its
// blocks, then sequence b, admitted in the same step, shares a's whole
// blocks (all but the last token's) and computes the rest. It returns that
// step's batch, a first, both sampled with logits, and where b starts.
func SharedPrefixBatch(t testing.TB, mgr *kv.Manager, a, b kv.SeqID, prompt []int) (*engine.Batch, int) {
	t.Helper()
	n := len(prompt)
	if ok, err := mgr.Allocate(a, n); !ok || err != nil {
		t.Fatalf("allocate seq %d: %v %v", a, ok, err)
	}
	if err := mgr.CacheBlocks(a, prompt, n); err != nil {
		t.Fatal(err)
	}
	prefix := mgr.CachedPrefix(nil, prompt[:n-1])
	start := len(prefix) * mgr.BlockSize()
	if ok, err := mgr.AllocateWithPrefix(b, prefix, n); !ok || err != nil {
		t.Fatalf("allocate seq %d: %v %v", b, ok, err)
	}
	return &engine.Batch{NumTokens: 2*n - start, Seqs: []engine.SeqBatch{
		{ID: a, Tokens: prompt, BlockTable: mgr.BlockTable(a), Sample: true, NeedLogits: true},
		{ID: b, Tokens: prompt[start:], StartPos: start, BlockTable: mgr.BlockTable(b), Sample: true, NeedLogits: true},
	}}, start
}
