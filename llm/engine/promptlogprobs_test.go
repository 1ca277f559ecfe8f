package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// scoredPrompt is a prompt whose tail is the mock's own greedy continuation
// of its head, so that the prompt tokens of the tail are each position's
// most likely token and those of the head, most often, are not.
func scoredPrompt(i, head, tail int) []int {
	p := prompt(i, head)
	return append(p, mock.Expected(mock.Config{}, p, tail)...)
}

// firstEvent returns the first event of a request and drains the rest.
func firstEvent(t *testing.T, ch <-chan llm.Event) (first llm.Event, all result) {
	t.Helper()
	got := false
	for ev := range ch {
		if !got {
			first, got = ev, true
		}
		all.events++
		all.tokens = append(all.tokens, ev.TokenIDs...)
		if ev.Finish != "" {
			all.last = ev
		}
	}
	return first, all
}

// TestPromptLogprobsMatchTheLastRowPath checks each prompt token's
// log-probability, computed from the rows of a (chunked, batched, perhaps
// preempted) prefill, against a request that ends at that token's
// predecessor and samples there: the same position, computed by the
// sampled-row path. The alternatives must be the same list, and the prompt
// token's own value the one the reference gives it.
func TestPromptLogprobsMatchTheLastRowPath(t *testing.T) {
	const n = 3
	configs := map[string]engine.Config{
		"default":   {},
		"chunked-7": {MaxNumBatchedTokens: 7},
		"preempt":   {NumBlocks: 12, BlockSize: 4, MaxNumBatchedTokens: 32},
	}
	prompts := make([][]int, 8)
	for i := range prompts {
		prompts[i] = scoredPrompt(i, 2+i, 4+i)
	}
	// The reference: one single-token request per prefix, on its own engine.
	ref := newEngine(t, mock.Config{}, engine.Config{})
	want := make([][]llm.TokenLogprob, len(prompts))
	for i, p := range prompts {
		for end := 1; end < len(p); end++ {
			lp := n
			ch, err := ref.Generate(context.Background(), llm.Request{PromptTokens: p[:end], Params: llm.SamplingParams{MaxTokens: 1, IgnoreEOS: true, Logprobs: &lp}})
			if err != nil {
				t.Fatal(err)
			}
			ev, _ := firstEvent(t, ch)
			want[i] = append(want[i], ev.Logprobs[0])
		}
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, mock.Config{Latency: mock.Latency{PerStep: 200 * time.Microsecond}}, cfg)
			chans := make([]<-chan llm.Event, 2*len(prompts))
			for i := range chans {
				p := prompts[i/2]
				params := greedy(3 + i%4)
				if i%2 == 0 { // every other request asks, so batches mix both kinds
					lp := n
					params.PromptLogprobs = &lp
				}
				ch, err := e.Generate(context.Background(), llm.Request{ID: fmt.Sprint(i), PromptTokens: p, Params: params})
				if err != nil {
					t.Fatalf("Generate %d: %v", i, err)
				}
				chans[i] = ch
			}
			firsts := make([]llm.Event, len(chans))
			results := make([]result, len(chans))
			var wg sync.WaitGroup
			for i, ch := range chans {
				wg.Go(func() { firsts[i], results[i] = firstEvent(t, ch) })
			}
			wg.Wait()
			for i, first := range firsts {
				p := prompts[i/2]
				if tok := mock.Expected(mock.Config{}, p, 3+i%4); !slices.Equal(results[i].tokens, tok) {
					t.Errorf("request %d: tokens %v, want %v", i, results[i].tokens, tok)
				}
				if i%2 == 1 {
					if first.PromptLogprobs != nil {
						t.Errorf("request %d did not ask, got %d prompt logprobs", i, len(first.PromptLogprobs))
					}
					continue
				}
				checkPromptLogprobs(t, fmt.Sprintf("request %d", i), p, first.PromptLogprobs, want[i/2], n)
			}
			waitIdle(t, e)
			if name == "preempt" && e.Stats().Preemptions == 0 {
				t.Error("the tiny pool forced no preemption")
			}
		})
	}
}

// checkPromptLogprobs compares got, the prompt log-probabilities of p, with
// want, the sampled-row log-probabilities after each prefix of p.
func checkPromptLogprobs(t *testing.T, what string, p []int, got, want []llm.TokenLogprob, n int) {
	t.Helper()
	if len(got) != len(p)-1 {
		t.Fatalf("%s: %d prompt logprobs for a prompt of %d", what, len(got), len(p))
	}
	for k, g := range got {
		w := want[k]
		if g.ID != p[k+1] {
			t.Errorf("%s position %d: id %d, want the prompt's %d", what, k, g.ID, p[k+1])
		}
		if !slices.Equal(g.Top, w.Top) || len(g.Top) != n {
			t.Errorf("%s position %d: top %v, want %v", what, k, g.Top, w.Top)
		}
		// The reference sampled its argmax; the prompt token is either that
		// one (same value) or scores no more than the reference's last
		// alternative unless it is among them (then the same value).
		switch i := slices.IndexFunc(w.Top, func(x llm.TopLogprob) bool { return x.ID == g.ID }); {
		case i >= 0 && g.Logprob != w.Top[i].Logprob:
			t.Errorf("%s position %d: logprob %v, want %v", what, k, g.Logprob, w.Top[i].Logprob)
		case i < 0 && g.Logprob > w.Top[n-1].Logprob:
			t.Errorf("%s position %d: logprob %v above the %d-th alternative's %v", what, k, g.Logprob, n, w.Top[n-1].Logprob)
		}
	}
}

// TestPromptLogprobsEdgeCases: a one-token prompt has nothing to score; a
// backend that cannot return prompt logits refuses the request, naming the
// parameter; the bound on the alternatives is checked.
func TestPromptLogprobsEdgeCases(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	zero := 0
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 2, PromptLogprobs: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := firstEvent(t, ch); len(first.PromptLogprobs) != 0 {
		t.Errorf("one-token prompt: %d prompt logprobs", len(first.PromptLogprobs))
	}
	p := scoredPrompt(1, 3, 5)
	ch, err = e.Generate(context.Background(), llm.Request{PromptTokens: p, Params: llm.SamplingParams{MaxTokens: 1, PromptLogprobs: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := firstEvent(t, ch)
	if len(first.PromptLogprobs) != len(p)-1 {
		t.Fatalf("%d prompt logprobs for %d tokens", len(first.PromptLogprobs), len(p))
	}
	for k, lp := range first.PromptLogprobs {
		if lp.Top != nil || lp.ID != p[k+1] || lp.Logprob > 0 {
			t.Errorf("position %d with 0 alternatives: %+v", k, lp)
		}
	}

	tooMany := llm.MaxLogprobs + 1
	if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: p, Params: llm.SamplingParams{MaxTokens: 1, PromptLogprobs: &tooMany}}); !isParamErr(err, "prompt_logprobs") {
		t.Errorf("prompt_logprobs %d: %v", tooMany, err)
	}

	plain, err := engine.New(struct{ engine.Backend }{mock.NewBackend(mock.Config{})}, mock.NewTokenizer(), mock.Info(), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Generate(context.Background(), llm.Request{PromptTokens: p, Params: llm.SamplingParams{MaxTokens: 1, PromptLogprobs: &zero}}); !isParamErr(err, "prompt_logprobs") {
		t.Errorf("a backend without prompt logits: %v", err)
	}
}

func isParamErr(err error, param string) bool {
	pe, ok := err.(*llm.ParamError)
	return ok && pe.Param == param
}

// TestGenerateCopiesLogprobCounts: the counts of alternatives are read by
// the engine's goroutine while the request runs, so Generate must keep its
// own copies: a caller that reuses its variable for the next request must
// neither race with the engine (go test -race) nor change this one.
func TestGenerateCopiesLogprobCounts(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	n := 2
	params := greedy(3)
	params.PromptLogprobs, params.Logprobs = &n, &n
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(1, 20), Params: params})
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	first, all := firstEvent(t, ch)
	if len(first.PromptLogprobs) != 19 || len(first.PromptLogprobs[0].Top) != 2 {
		t.Fatalf("%d prompt logprobs, the first with %d alternatives; want 19 with 2", len(first.PromptLogprobs), len(first.PromptLogprobs[0].Top))
	}
	if lp := all.last.Logprobs; len(lp) != 1 || len(lp[0].Top) != 2 {
		t.Errorf("last token's logprobs %+v, want 2 alternatives", lp)
	}
}

// TestScoreOnly: MaxTokens 0 with PromptLogprobs scores the prompt and ends
// with one event and no token, even for a prompt that fills the context.
func TestScoreOnly(t *testing.T) {
	info := mock.Info()
	info.MaxModelLen = 16
	e, err := engine.New(mock.NewBackend(mock.Config{}), mock.NewTokenizer(), info, engine.Config{BlockSize: 4, MaxNumBatchedTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := scoredPrompt(3, 6, 10) // 16 tokens: the whole context
	zero := 0
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: p, Params: llm.SamplingParams{PromptLogprobs: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []llm.Event
	for ev := range ch {
		evs = append(evs, ev)
	}
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Finish != llm.FinishLength || len(ev.TokenIDs) != 0 || ev.CompletionTokens != 0 || ev.Text != "" || ev.PromptTokens != len(p) {
		t.Errorf("event %+v", ev)
	}
	if len(ev.PromptLogprobs) != len(p)-1 {
		t.Fatalf("%d prompt logprobs for %d tokens", len(ev.PromptLogprobs), len(p))
	}
	for k, lp := range ev.PromptLogprobs[5:] { // the tail is the mock's greedy continuation
		if lp.ID != p[k+6] {
			t.Errorf("position %d scores %d, want %d", k+5, lp.ID, p[k+6])
		}
	}
	if ev.Times.Finish.IsZero() || !ev.Times.FirstToken.IsZero() {
		t.Errorf("times %+v: want a finish and no first token", ev.Times)
	}
	waitIdle(t, e)
	if s := e.Stats(); s.GenerationTokens != 0 || s.Finished != 1 {
		t.Errorf("stats %+v: want no generated token and one finished request", s)
	}
	// Without PromptLogprobs it runs the prompt all the same, and says
	// nothing of it; a one-token prompt that asks gets an empty list.
	for _, tc := range []struct {
		prompt []int
		plp    *int
		want   []llm.TokenLogprob
	}{{p, nil, nil}, {p[:1], &zero, []llm.TokenLogprob{}}} {
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: tc.prompt, Params: llm.SamplingParams{PromptLogprobs: tc.plp}})
		if err != nil {
			t.Fatal(err)
		}
		var evs []llm.Event
		for ev := range ch {
			evs = append(evs, ev)
		}
		if len(evs) != 1 || evs[0].Finish != llm.FinishLength || len(evs[0].TokenIDs) != 0 ||
			(evs[0].PromptLogprobs == nil) != (tc.want == nil) || len(evs[0].PromptLogprobs) != 0 {
			t.Errorf("prompt of %d, prompt logprobs %v: events %+v", len(tc.prompt), tc.plp, evs)
		}
	}
}

// TestScoreOnlyFillsThePool: a scoring request whose prompt is as long as
// the whole KV pool (max_num_seqs 1 caps the pool at one full context)
// runs; it needs no slot for the token it never generates. It was accepted
// by Generate and then failed in the engine's loop, told to the scheduler
// as one token too many.
func TestScoreOnlyFillsThePool(t *testing.T) {
	info := mock.Info()
	info.MaxModelLen = 16
	e, err := engine.New(mock.NewBackend(mock.Config{}), mock.NewTokenizer(), info, engine.Config{BlockSize: 4, MaxNumSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.NumKVBlocks(); got != 4 {
		t.Fatalf("%d KV blocks, want 4 (one full context)", got)
	}
	p := scoredPrompt(5, 6, 10)
	zero := 0
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: p, Params: llm.SamplingParams{PromptLogprobs: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	ev, all := firstEvent(t, ch)
	if all.events != 1 || ev.Finish != llm.FinishLength || ev.Err != nil || len(ev.PromptLogprobs) != len(p)-1 {
		t.Fatalf("event %+v (%d events): want one length finish with %d prompt logprobs", ev, all.events, len(p)-1)
	}
	waitIdle(t, e)
	if s := e.Stats(); s.Finished != 1 || s.GenerationTokens != 0 {
		t.Errorf("stats %+v", s)
	}
}
