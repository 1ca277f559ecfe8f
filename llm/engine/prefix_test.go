package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// sharedPrompt is one of a few long stems followed by a request's own tail,
// so that requests share whole blocks of prefix.
func sharedPrompt(i int) []int {
	stem := prompt(i%3, 37)
	return append(stem, prompt(100+i, 1+i%5)...)
}

// TestPrefixCachingMatchesReference runs waves of requests sharing prefixes
// through engines with prefix caching, under configurations that chunk and
// preempt: every token must equal the mock's cache-free reference (the
// mock's KV is a hash chain through the block table, so a wrong block
// reused changes the tokens), and later waves must reuse the cache.
func TestPrefixCachingMatchesReference(t *testing.T) {
	configs := map[string]engine.Config{
		"default":   {},
		"chunked-7": {MaxNumBatchedTokens: 7},
		"preempt":   {NumBlocks: 16, BlockSize: 4, MaxNumBatchedTokens: 32},
		"one-seq":   {MaxNumSeqs: 1, BlockSize: 8},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			cfg.PrefixCaching = true
			e := newEngine(t, mock.Config{Latency: mock.Latency{PerStep: 100 * time.Microsecond}}, cfg)
			cached := 0
			for wave := range 3 {
				chans := make([]<-chan llm.Event, 8)
				for i := range chans {
					ch, err := e.Generate(context.Background(), llm.Request{ID: fmt.Sprint(wave, i), PromptTokens: sharedPrompt(i), Params: greedy(4 + i)})
					if err != nil {
						t.Fatalf("Generate %d: %v", i, err)
					}
					chans[i] = ch
				}
				results := make([]result, len(chans))
				var wg sync.WaitGroup
				for i, ch := range chans {
					wg.Go(func() { results[i] = collect(t, ch) })
				}
				wg.Wait()
				for i, r := range results {
					if want := mock.Expected(mock.Config{}, sharedPrompt(i), 4+i); !slices.Equal(r.tokens, want) {
						t.Errorf("wave %d request %d: tokens %v, want %v", wave, i, r.tokens, want)
					}
					c := r.last.CachedPromptTokens
					bs := cfg.BlockSize
					if bs == 0 {
						bs = 16
					}
					if c < 0 || c%bs != 0 || c >= len(sharedPrompt(i)) {
						t.Errorf("wave %d request %d: %d cached prompt tokens of %d, blocks of %d", wave, i, c, len(sharedPrompt(i)), bs)
					}
					cached += c
				}
			}
			waitIdle(t, e)
			st := e.Stats()
			// Re-admissions after preemption count as queries too.
			if cached == 0 || st.PrefixCacheHits < uint64(cached) || (st.Preemptions == 0 && st.PrefixCacheHits != uint64(cached)) {
				t.Errorf("%d cached prompt tokens reported, stats say %d hits (%d preemptions)", cached, st.PrefixCacheHits, st.Preemptions)
			}
			if st.PrefixCacheQueries < st.PrefixCacheHits || st.PrefixCacheQueries < st.PromptTokens {
				t.Errorf("queries %d, hits %d, prompt tokens %d", st.PrefixCacheQueries, st.PrefixCacheHits, st.PromptTokens)
			}
		})
	}
}

// TestPrefixCachingScoresWholePrompt: a request for prompt log-probabilities
// after the same prompt ran computes every position anyway, and scores them
// as an engine without the cache does.
func TestPrefixCachingScoresWholePrompt(t *testing.T) {
	pr := sharedPrompt(1)
	zero := 0
	score := llm.Request{ID: "score", PromptTokens: pr, Params: llm.SamplingParams{MaxTokens: 1, IgnoreEOS: true, PromptLogprobs: &zero}}

	e := newEngine(t, mock.Config{}, engine.Config{PrefixCaching: true})
	first := run(t, e, llm.Request{ID: "warm", PromptTokens: pr, Params: greedy(3)})
	again := run(t, e, llm.Request{ID: "again", PromptTokens: pr, Params: greedy(3)})
	if first.last.CachedPromptTokens != 0 || again.last.CachedPromptTokens != 32 {
		t.Fatalf("cached prompt tokens %d then %d, want 0 then 32", first.last.CachedPromptTokens, again.last.CachedPromptTokens)
	}
	ch, err := e.Generate(context.Background(), score)
	if err != nil {
		t.Fatal(err)
	}
	var got []llm.TokenLogprob
	var last llm.Event
	for ev := range ch {
		got = append(got, ev.PromptLogprobs...)
		if ev.Finish != "" {
			last = ev
		}
	}
	if last.CachedPromptTokens != 0 || len(got) != len(pr)-1 {
		t.Fatalf("scored %d positions of %d with %d cached", len(got), len(pr), last.CachedPromptTokens)
	}
	ch, err = newEngine(t, mock.Config{}, engine.Config{}).Generate(context.Background(), score)
	if err != nil {
		t.Fatal(err)
	}
	var want []llm.TokenLogprob
	for ev := range ch {
		want = append(want, ev.PromptLogprobs...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("prompt log-probabilities differ from an engine without the cache:\n%+v\n%+v", got, want)
	}
}

// TestPrefixCachingSharesWithinAStep: identical prompts admitted in one
// step compute the prompt once; the others start after the first's whole
// blocks, which the same forward pass writes before reading them.
func TestPrefixCachingSharesWithinAStep(t *testing.T) {
	// A first request holds the loop inside its first step until the four
	// below are queued, so they are all waiting when the next step is
	// planned, however slow the machine.
	inStep, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate := func(time.Duration) {
		once.Do(func() {
			close(inStep)
			<-release
		})
	}
	e := newEngine(t, mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}, Sleep: gate}, engine.Config{PrefixCaching: true})
	busy, err := e.Generate(context.Background(), llm.Request{ID: "busy", PromptTokens: prompt(9, 3), Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	<-inStep
	pr := sharedPrompt(2) // 37 + 3 tokens: two whole blocks of 16 to share
	chans := make([]<-chan llm.Event, 4)
	for i := range chans {
		if chans[i], err = e.Generate(context.Background(), llm.Request{ID: fmt.Sprint(i), PromptTokens: pr, Params: greedy(3)}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	collect(t, busy)
	want := mock.Expected(mock.Config{}, pr, 3)
	var cached []int
	var firstScheduled []time.Time
	for i, ch := range chans {
		r := collect(t, ch)
		if !slices.Equal(r.tokens, want) {
			t.Errorf("request %d: %v, want %v", i, r.tokens, want)
		}
		cached = append(cached, r.last.CachedPromptTokens)
		firstScheduled = append(firstScheduled, r.last.Times.FirstScheduled)
	}
	for _, ts := range firstScheduled[1:] {
		if !ts.Equal(firstScheduled[0]) {
			t.Fatalf("the four were not admitted in one step (first scheduled at %v): the test did not test sharing within a step", firstScheduled)
		}
	}
	if !slices.Equal(cached, []int{0, 32, 32, 32}) {
		t.Errorf("cached prompt tokens %v, want [0 32 32 32]", cached)
	}
}
