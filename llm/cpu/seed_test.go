package cpu

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// TestSeededSamplingWhateverTheBatch checks vLLM's promise for a seeded
// request on the CPU backend: the same seed gives the same tokens whether
// the request runs alone, among other requests (seeded or not, sampled or
// greedy) admitted in the same steps, or with its prompt cut into chunks.
// (When this test was written the CPU backend's logits for the request came
// out bit for bit the same in every batching; where a backend's differ in
// their last bits, a draw can move only when it lands within that
// difference of a boundary between two tokens.)
func TestSeededSamplingWhateverTheBatch(t *testing.T) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(2024)
	target := llm.Request{
		PromptTokens: []int{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 198, 1212},
		Params:       llm.SamplingParams{MaxTokens: 24, Temperature: 1, TopP: 0.95, TopK: 100, Seed: &seed, IgnoreEOS: true},
	}
	others := func() []llm.Request {
		var rs []llm.Request
		for i := range 7 {
			p := make([]int, 5+9*i)
			for k := range p {
				p[k] = (i*977 + k*131) % 50000
			}
			params := llm.SamplingParams{MaxTokens: 10 + 3*i, Temperature: 0.7 + 0.1*float64(i), IgnoreEOS: true}
			if i%3 == 0 {
				params.Temperature = 0 // greedy rows in the same steps
			}
			if i%3 == 1 {
				s := int64(i)
				params.Seed = &s
			}
			rs = append(rs, llm.Request{PromptTokens: p, Params: params})
		}
		return rs
	}
	runAll := func(cfg engine.Config, reqs []llm.Request) [][]int {
		t.Helper()
		cpu, err := New(m, Options{KVCacheBytes: 16 << 20}) // a small pool is quick to allocate
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		e, err := engine.New(cpu, idTokenizer{}, cpu.Info(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		chans := make([]<-chan llm.Event, len(reqs))
		for i, r := range reqs {
			if chans[i], err = e.Generate(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		out := make([][]int, len(reqs))
		var wg sync.WaitGroup
		for i, ch := range chans {
			wg.Go(func() {
				for ev := range ch {
					if ev.Err != nil {
						t.Error(ev.Err)
					}
					out[i] = append(out[i], ev.TokenIDs...)
				}
			})
		}
		wg.Wait()
		return out
	}
	alone := runAll(engine.Config{Seed: new(uint64(1))}, []llm.Request{target})[0]
	if len(alone) != target.Params.MaxTokens {
		t.Fatalf("alone: %d tokens, want %d", len(alone), target.Params.MaxTokens)
	}
	for name, cfg := range map[string]engine.Config{
		"crowd":          {Seed: new(uint64(2))},
		"crowd, chunked": {Seed: new(uint64(3)), MaxNumBatchedTokens: 16},
	} {
		reqs := others()
		at := len(reqs) / 2
		reqs = slices.Insert(reqs, at, target)
		got := runAll(cfg, reqs)[at]
		if !slices.Equal(got, alone) {
			t.Errorf("%s: tokens %v, alone %v", name, got, alone)
		}
	}
}
