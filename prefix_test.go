package tinyserve

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// TestPrefixCachingCPUMatchesGolden runs PyTorch's golden greedy
// continuations on the CPU backend with prefix caching and small blocks:
// each golden prompt, then the prompt extended by part of its continuation
// (which reuses the blocks the first run computed, decode blocks included),
// must continue with exactly PyTorch's tokens.
func TestPrefixCachingCPUMatchesGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/gpt2-tiny-hot/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Name   string `json:"name"`
			Input  []int  `json:"input_ids"`
			Greedy struct {
				Tokens []int `json:"tokens"`
			} `json:"greedy"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Config{Model: "testdata/gpt2-tiny-hot", BlockSize: 4, EnablePrefixCaching: true})
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
			toks = append(toks, ev.TokenIDs...)
			if ev.Finish != "" {
				cached = ev.CachedPromptTokens
			}
		}
		return toks, cached
	}
	reused := 0
	for _, c := range golden.Cases {
		want := c.Greedy.Tokens
		want = want[:min(len(want), 1024-len(c.Input))] // prompt + max_tokens fit the context
		if got, _ := generate(c.Input, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", c.Name, got, want)
		}
		k := len(want) / 2
		got, cached := generate(append(slices.Clone(c.Input), want[:k]...), len(want)-k)
		if !slices.Equal(got, want[k:]) {
			t.Errorf("%s extended by %d tokens (%d of them cached): %v, want %v", c.Name, k, cached, got, want[k:])
		}
		if wantCached := (len(c.Input) + k - 1) / 4 * 4; cached != wantCached {
			t.Errorf("%s extended: %d prompt tokens cached, want %d", c.Name, cached, wantCached)
		}
		reused += cached
	}
	if st := e.Stats(); reused == 0 || st.PrefixCacheHits != uint64(reused) {
		t.Errorf("%d tokens reused, stats say %d", reused, st.PrefixCacheHits)
	}
}
