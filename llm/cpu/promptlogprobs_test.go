package cpu

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
)

// TestPromptLogprobsGolden asks the engine on the CPU backend for the
// prompt log-probabilities of two golden prompts at once, the longer one in
// chunks (a 48-token step budget): every position's most likely token must
// be the golden per-position argmax (a row off by one position fails this),
// each entry must score its own prompt token, the golden's greedy
// continuation appended to the prompt must be scored as each position's
// most likely token, and a few positions must agree with a request that
// ends there and samples, the path the golden's last-position logits check.
func TestPromptLogprobsGolden(t *testing.T) {
	m, g := loadGolden(t, "gpt2-tiny-hot")
	cpu, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	e, err := engine.New(cpu, idTokenizer{}, cpu.Info(), engine.Config{MaxNumBatchedTokens: 48, Seed: new(uint64(1))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 5
	generate := func(prompt []int, params llm.SamplingParams) llm.Event {
		t.Helper()
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		var first llm.Event
		for ev := range ch {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			if first.Time.IsZero() {
				first = ev
			}
		}
		return first
	}
	lp := n
	for _, c := range g.Cases {
		if c.Name != "len33" && c.Name != "len128" {
			continue
		}
		p := c.InputIDs
		got := generate(p, llm.SamplingParams{MaxTokens: 2, IgnoreEOS: true, PromptLogprobs: &lp}).PromptLogprobs
		if len(got) != len(p)-1 {
			t.Fatalf("%s: %d prompt logprobs for %d tokens", c.Name, len(got), len(p))
		}
		for k, e := range got {
			if e.ID != p[k+1] || len(e.Top) != n {
				t.Fatalf("%s position %d: id %d with %d alternatives, want %d with %d", c.Name, k, e.ID, len(e.Top), p[k+1], n)
			}
			if e.Top[0].ID != c.PositionStats.Argmax[k] {
				t.Errorf("%s position %d: most likely %d, golden argmax %d", c.Name, k, e.Top[0].ID, c.PositionStats.Argmax[k])
			}
			if e.Logprob > e.Top[0].Logprob || e.Top[0].Logprob > 0 {
				t.Errorf("%s position %d: logprob %v, most likely %v", c.Name, k, e.Logprob, e.Top[0].Logprob)
			}
		}
		// Teacher forcing: the prompt followed by the golden's greedy
		// continuation scores each continuation token as its position's
		// most likely one (the last is predicted, not fed back).
		forced := append(slices.Clone(p), c.Greedy.Tokens[:len(c.Greedy.Tokens)-1]...)
		tf := generate(forced, llm.SamplingParams{MaxTokens: 1, IgnoreEOS: true, PromptLogprobs: &lp}).PromptLogprobs
		for j, want := range c.Greedy.Tokens[:len(c.Greedy.Tokens)-1] {
			if e := tf[len(p)-1+j]; e.ID != want || e.Top[0].ID != want || e.Logprob != e.Top[0].Logprob || e.Rank != 1 {
				t.Errorf("%s greedy token %d (%d): scored %+v", c.Name, j, want, e)
			}
		}
		for _, k := range []int{0, len(p) / 2, len(p) - 2} {
			ref := generate(p[:k+1], llm.SamplingParams{MaxTokens: 1, IgnoreEOS: true, Logprobs: &lp}).Logprobs[0]
			for j, w := range ref.Top {
				gt := got[k].Top[j]
				if gt.ID != w.ID || math.Abs(float64(gt.Logprob-w.Logprob)) > 1e-5 {
					t.Errorf("%s position %d alternative %d: %+v, the sampled row's %+v", c.Name, k, j, gt, w)
				}
			}
		}
	}
	if raceEnabled {
		return // the race detector makes the 1024-token case slow
	}
	// The whole context: the 1009-token prompt and its 15 fed-back greedy
	// tokens fill GPT-2's 1024 positions, which only a scoring request
	// (MaxTokens 0) may do.
	for _, c := range g.Cases {
		if len(c.InputIDs)+len(c.Greedy.Tokens)-1 != m.Config.MaxPositions {
			continue
		}
		forced := append(slices.Clone(c.InputIDs), c.Greedy.Tokens[:len(c.Greedy.Tokens)-1]...)
		ev := generate(forced, llm.SamplingParams{PromptLogprobs: &lp})
		if ev.Finish != llm.FinishLength || len(ev.PromptLogprobs) != len(forced)-1 {
			t.Fatalf("%s, full context: finish %q, %d prompt logprobs", c.Name, ev.Finish, len(ev.PromptLogprobs))
		}
		for j, want := range c.Greedy.Tokens[:len(c.Greedy.Tokens)-1] {
			if e := ev.PromptLogprobs[len(c.InputIDs)-1+j]; e.Top[0].ID != want {
				t.Errorf("%s, full context, greedy token %d: most likely %d, want %d", c.Name, j, e.Top[0].ID, want)
			}
		}
		for k := range len(c.InputIDs) - 1 {
			if got := ev.PromptLogprobs[k].Top[0].ID; got != c.PositionStats.Argmax[k] {
				t.Errorf("%s, full context, position %d: most likely %d, golden argmax %d", c.Name, k, got, c.PositionStats.Argmax[k])
			}
		}
		return
	}
	t.Fatal("no golden case fills the context")
}
