package tinyserve

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine/enginetest"
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
	cases := make([]enginetest.GoldenCase, len(golden.Cases))
	for i, c := range golden.Cases {
		cases[i] = enginetest.GoldenCase{Name: c.Name, Prompt: c.Input, Greedy: c.Greedy.Tokens}
	}
	reused := enginetest.CheckPrefixCachingGolden(t, e, cases, 4)
	if st := e.Stats(); reused == 0 || st.PrefixCacheHits != uint64(reused) {
		t.Errorf("%d tokens reused, stats say %d", reused, st.PrefixCacheHits)
	}
}
