package cuda

import (
	"context"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
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
