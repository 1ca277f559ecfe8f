package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newEngine(t *testing.T, mcfg mock.Config, cfg engine.Config) *engine.Engine {
	t.Helper()
	e, err := mock.NewEngine(mcfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// result is everything one request produced.
type result struct {
	tokens []int
	text   string
	last   llm.Event
	events int
}

func collect(t *testing.T, ch <-chan llm.Event) result {
	t.Helper()
	var r result
	for ev := range ch {
		r.events++
		r.tokens = append(r.tokens, ev.TokenIDs...)
		r.text += ev.Text
		if ev.Finish != "" {
			r.last = ev
		}
	}
	return r
}

func run(t *testing.T, e llm.Engine, req llm.Request) result {
	t.Helper()
	ch, err := e.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return collect(t, ch)
}

func prompt(i, n int) []int {
	p := make([]int, n)
	for k := range p {
		p[k] = 'a' + (i*7+k*3)%26
	}
	return p
}

func greedy(maxTokens int) llm.SamplingParams {
	return llm.SamplingParams{MaxTokens: maxTokens, IgnoreEOS: true}
}

// TestGreedyMatchesReferenceUnderAnyBatching runs many requests at once
// under configurations that force chunked prefill and preemption, and checks
// every request's tokens against the mock's cache-free reference: batch
// composition, chunking and recompute must not change a single token.
func TestGreedyMatchesReferenceUnderAnyBatching(t *testing.T) {
	configs := map[string]engine.Config{
		"default":   {},
		"chunked-7": {MaxNumBatchedTokens: 7},
		"preempt":   {NumBlocks: 12, BlockSize: 4, MaxNumBatchedTokens: 32},
		"one-seq":   {MaxNumSeqs: 1},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			// All twelve are submitted before the first step can finish
			// (each step takes 200 µs), so the tiny pool is sure to be
			// contended; submitting from goroutines let them trickle in and
			// once in about a hundred runs forced no preemption.
			e := newEngine(t, mock.Config{Latency: mock.Latency{PerStep: 200 * time.Microsecond}}, cfg)
			chans := make([]<-chan llm.Event, 12)
			for i := range chans {
				ch, err := e.Generate(context.Background(), llm.Request{ID: fmt.Sprint(i), PromptTokens: prompt(i, 3+i*2), Params: greedy(5 + i)})
				if err != nil {
					t.Fatalf("Generate %d: %v", i, err)
				}
				chans[i] = ch
			}
			var wg sync.WaitGroup
			results := make([]result, len(chans))
			for i, ch := range chans {
				wg.Go(func() { results[i] = collect(t, ch) })
			}
			wg.Wait()
			for i, r := range results {
				want := mock.Expected(mock.Config{}, prompt(i, 3+i*2), 5+i)
				if !slices.Equal(r.tokens, want) {
					t.Errorf("request %d: tokens %v, want %v", i, r.tokens, want)
				}
				if r.last.Finish != llm.FinishLength || r.last.CompletionTokens != 5+i {
					t.Errorf("request %d: finish %q after %d tokens", i, r.last.Finish, r.last.CompletionTokens)
				}
				if r.text != mock.NewTokenizer().Decode(want, true) {
					t.Errorf("request %d: text %q", i, r.text)
				}
			}
			waitIdle(t, e)
			if name == "preempt" && e.Stats().Preemptions == 0 {
				t.Error("the tiny pool forced no preemption")
			}
		})
	}
}

// waitIdle waits until the engine's loop has published that nothing runs
// and every block is free.
func waitIdle(t *testing.T, e llm.Engine) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := e.Stats()
		if s.Running == 0 && s.Waiting == 0 && s.KVBlocksUsed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine not idle: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSeedReproducesWhateverTheBatch(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	seed := int64(1234)
	p := llm.SamplingParams{MaxTokens: 40, Temperature: 1.5, TopP: 0.95, TopK: 50, Seed: &seed, IgnoreEOS: true}
	alone := run(t, e, llm.Request{PromptTokens: prompt(1, 9), Params: p})

	var wg sync.WaitGroup
	var crowded result
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 3 {
				crowded = run(t, e, llm.Request{PromptTokens: prompt(1, 9), Params: p})
				return
			}
			q := p
			q.Seed = nil
			run(t, e, llm.Request{PromptTokens: prompt(i+10, 5+i), Params: q})
		}()
	}
	wg.Wait()
	if !slices.Equal(alone.tokens, crowded.tokens) {
		t.Errorf("same seed, different batch: %v vs %v", alone.tokens, crowded.tokens)
	}
	greedyTokens := mock.Expected(mock.Config{}, prompt(1, 9), 40)
	if slices.Equal(alone.tokens, greedyTokens) {
		t.Error("temperature 1.5 sampling gave exactly the greedy tokens: sampling is not happening")
	}
}

func TestStopString(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	pr := prompt(2, 6)
	full := mock.NewTokenizer().Decode(mock.Expected(mock.Config{}, pr, 30), true)
	stop := full[10:13] // spans three one-byte tokens
	want := full[:strings.Index(full, stop)]
	p := greedy(30)
	p.Stop = []string{"never-there", stop}
	r := run(t, e, llm.Request{PromptTokens: pr, Params: p})
	if r.text != want || r.last.Finish != llm.FinishStop || r.last.StopString != stop {
		t.Errorf("text %q finish %q stop %q; want %q stopped by %q", r.text, r.last.Finish, r.last.StopString, want, stop)
	}
	if r.last.CompletionTokens != strings.Index(full, stop)+len(stop) {
		t.Errorf("%d completion tokens, want the tokens up to the end of the stop string (%d)", r.last.CompletionTokens, strings.Index(full, stop)+len(stop))
	}
}

// TestStopStringAndMinTokens checks stop strings against a reference
// when min_tokens holds them off: a match counts only once min_tokens is
// passed and only if it ends in the newest token's text (as in vLLM), so a
// match lying wholly in the text made under min_tokens never ends the
// request (and once crashed the engine by cutting text already sent).
func TestStopStringAndMinTokens(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	pr := prompt(2, 6)
	const n = 30
	full := mock.NewTokenizer().Decode(mock.Expected(mock.Config{}, pr, n), true)
	if len(full) != n {
		t.Fatalf("the reference assumes one byte per mock token; got %d bytes for %d tokens", len(full), n)
	}
	for _, include := range []bool{false, true} {
		for _, minTokens := range []int{0, 1, 2, 3, 5, 12} {
			for _, stops := range [][]string{{full[0:2]}, {full[1:4], full[9:10]}, {full[0:1], full[20:23]}, {full[4:12]}} {
				// Reference: after token k (k bytes of text), past
				// min_tokens, the earliest-starting stop string that ends
				// exactly at k; the text ends before it, or with it when
				// include_stop_str_in_output is set.
				want, wantStop, wantTokens, wantStart := full, "", n, n
				for k := minTokens + 1; k <= n && wantStop == ""; k++ {
					for _, s := range stops {
						if k >= len(s) && full[k-len(s):k] == s && (wantStop == "" || k-len(s) < wantStart) {
							want, wantStop, wantTokens, wantStart = full[:k-len(s)], s, k, k-len(s)
							if include {
								want = full[:k]
							}
						}
					}
				}
				p := greedy(n)
				p.MinTokens, p.Stop, p.IncludeStopStrInOutput = minTokens, stops, include
				r := run(t, e, llm.Request{PromptTokens: pr, Params: p})
				if r.text != want || r.last.StopString != wantStop || len(r.tokens) != wantTokens {
					t.Errorf("include %v min_tokens %d stop %q: text %q stop %q after %d tokens; want %q stop %q after %d",
						include, minTokens, stops, r.text, r.last.StopString, len(r.tokens), want, wantStop, wantTokens)
				}
			}
		}
	}
}

func TestStopTokenAndMinTokens(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	pr := prompt(3, 4)
	exp := mock.Expected(mock.Config{}, pr, 30)
	stopID := exp[5]
	first := slices.Index(exp, stopID)
	p := greedy(30)
	p.StopTokenIDs = []int{stopID}
	r := run(t, e, llm.Request{PromptTokens: pr, Params: p})
	if r.last.Finish != llm.FinishStop || r.last.StopTokenID != stopID || len(r.tokens) != first+1 {
		t.Fatalf("finish %q stop token %d after %d tokens; want stop by %d after %d", r.last.Finish, r.last.StopTokenID, len(r.tokens), stopID, first+1)
	}
	if r.text != mock.NewTokenizer().Decode(exp[:first], true) {
		t.Errorf("text %q includes the stop token", r.text)
	}
	// include_stop_str_in_output keeps the stop token's text too, as vLLM's.
	p.IncludeStopStrInOutput = true
	r = run(t, e, llm.Request{PromptTokens: pr, Params: p})
	if want := mock.NewTokenizer().Decode(exp[:first+1], true); r.text != want || r.last.StopTokenID != stopID {
		t.Errorf("include_stop_str_in_output: text %q, want %q", r.text, want)
	}
	p.IncludeStopStrInOutput = false
	// min_tokens masks the stop token until it is reached: it can't be
	// generated before, so the greedy choice becomes the next best.
	p.MinTokens = first + 2
	r = run(t, e, llm.Request{PromptTokens: pr, Params: p})
	if len(r.tokens) < first+2 || slices.Contains(r.tokens[:first+1], stopID) {
		t.Errorf("min_tokens %d: got %v", p.MinTokens, r.tokens)
	}
}

func TestEOSAndIgnoreEOS(t *testing.T) {
	mcfg := mock.Config{EOSEvery: 4}
	e := newEngine(t, mcfg, engine.Config{})
	pr := prompt(4, 5)
	exp := mock.Expected(mcfg, pr, 60)
	at := slices.Index(exp, mock.EOSTokenID)
	if at < 0 {
		t.Fatal("no EOS in the reference: pick another prompt")
	}
	r := run(t, e, llm.Request{PromptTokens: pr, Params: llm.SamplingParams{MaxTokens: 60}})
	if r.last.Finish != llm.FinishStop || len(r.tokens) != at+1 || r.last.StopTokenID != -1 {
		t.Errorf("finish %q after %d tokens (EOS at %d), stop token %d", r.last.Finish, len(r.tokens), at, r.last.StopTokenID)
	}
	if strings.Contains(r.text, mock.EndOfText) {
		t.Error("EOS text leaked into the output")
	}
	// With include_stop_str_in_output the EOS is text only when special
	// tokens are kept.
	for _, keep := range []bool{false, true} {
		r := run(t, e, llm.Request{PromptTokens: pr, Params: llm.SamplingParams{MaxTokens: 60, IncludeStopStrInOutput: true, KeepSpecialTokens: keep}})
		if want := mock.NewTokenizer().Decode(exp[:at+1], !keep); r.text != want || r.last.Finish != llm.FinishStop {
			t.Errorf("include, keep special %v: text %q finish %q, want %q", keep, r.text, r.last.Finish, want)
		}
	}
	r = run(t, e, llm.Request{PromptTokens: pr, Params: llm.SamplingParams{MaxTokens: 60, IgnoreEOS: true}})
	if r.last.Finish != llm.FinishLength || len(r.tokens) != 60 {
		t.Errorf("ignore_eos: finish %q after %d tokens", r.last.Finish, len(r.tokens))
	}
	if want := mock.NewTokenizer().Decode(exp, true); r.text != want || strings.Contains(r.text, mock.EndOfText) {
		t.Errorf("ignore_eos: text %q, want %q (special tokens skipped)", r.text, want)
	}
	// skip_special_tokens false: the EOS the request generated past is text.
	r = run(t, e, llm.Request{PromptTokens: pr, Params: llm.SamplingParams{MaxTokens: 60, IgnoreEOS: true, KeepSpecialTokens: true}})
	if want := mock.NewTokenizer().Decode(exp, false); r.text != want || !strings.Contains(r.text, mock.EndOfText) {
		t.Errorf("keep special tokens: text %q, want %q", r.text, want)
	}
}

func TestLogprobs(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	n := 5
	p := greedy(6)
	p.Logprobs = &n
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(5, 5), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for ev := range ch {
		if len(ev.Logprobs) != len(ev.TokenIDs) {
			t.Fatalf("%d logprobs for %d tokens", len(ev.Logprobs), len(ev.TokenIDs))
		}
		for k, lp := range ev.Logprobs {
			count++
			if lp.ID != ev.TokenIDs[k] || lp.Logprob > 0 || len(lp.Top) != n {
				t.Fatalf("bad logprob %+v for token %d", lp, ev.TokenIDs[k])
			}
			if lp.Top[0].ID != lp.ID || lp.Top[0].Logprob != lp.Logprob {
				t.Errorf("greedy token %d is not the top alternative %+v", lp.ID, lp.Top[0])
			}
			for i := 1; i < n; i++ {
				if lp.Top[i].Logprob > lp.Top[i-1].Logprob {
					t.Errorf("top alternatives not sorted: %+v", lp.Top)
				}
			}
		}
	}
	if count != 6 {
		t.Errorf("%d logprobs, want 6", count)
	}
}

func TestRejections(t *testing.T) {
	e := newEngine(t, mock.Config{KVBlocks: 4}, engine.Config{BlockSize: 4})
	cases := []struct {
		name string
		req  llm.Request
		want error
	}{
		{"empty prompt", llm.Request{Params: greedy(1)}, llm.ErrInvalidRequest},
		{"token out of vocab", llm.Request{PromptTokens: []int{300}, Params: greedy(1)}, llm.ErrInvalidRequest},
		{"negative max tokens", llm.Request{PromptTokens: []int{1}, Params: llm.SamplingParams{MaxTokens: -1}}, llm.ErrInvalidRequest},
		{"context length", llm.Request{PromptTokens: []int{1}, Params: greedy(5000)}, llm.ErrContextLength},
		{"never fits the pool", llm.Request{PromptTokens: prompt(0, 10), Params: greedy(8)}, llm.ErrTooLargeForCache},
	}
	for _, c := range cases {
		if _, err := e.Generate(context.Background(), c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// The engine is unaffected, and a request that fills the pool exactly
	// runs: its last token is never fed back, so 10 + 7 tokens need 16 slots.
	r := run(t, e, llm.Request{PromptTokens: prompt(0, 10), Params: greedy(7)})
	if len(r.tokens) != 7 || r.last.Finish != llm.FinishLength || r.last.Err != nil {
		t.Errorf("after rejections: %d tokens, finish %q, err %v", len(r.tokens), r.last.Finish, r.last.Err)
	}
}

// slowEngine has a latency model, so requests stay in flight long enough to
// observe queueing, cancellation and draining.
func slowEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	return newEngine(t, mock.Config{Latency: mock.Latency{PerStep: 2 * time.Millisecond}}, cfg)
}

func TestCancelFreesBlocks(t *testing.T) {
	e := slowEngine(t, engine.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(6, 40), Params: greedy(1000)})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // running now
	// The engine publishes its stats after the step that sent the event:
	// wait for them rather than race with it.
	for deadline := time.Now().Add(5 * time.Second); e.Stats().KVBlocksUsed == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a running request holds no blocks")
		}
	}
	cancel()
	for range ch {
	}
	waitIdle(t, e)
	if s := e.Stats(); s.Finished != 1 {
		t.Errorf("finished %d, want 1", s.Finished)
	}
}

func TestOverloaded(t *testing.T) {
	e := slowEngine(t, engine.Config{MaxNumSeqs: 1, MaxPending: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chans []<-chan llm.Event
	var overloaded int
	for i := range 10 {
		ch, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(i, 4), Params: greedy(50)})
		switch {
		case errors.Is(err, llm.ErrOverloaded):
			overloaded++
		case err != nil:
			t.Fatal(err)
		default:
			chans = append(chans, ch)
		}
	}
	if overloaded == 0 || len(chans) > 3 {
		t.Errorf("%d admitted, %d overloaded; want at most 3 admitted (1 running + 2 pending)", len(chans), overloaded)
	}
	cancel()
	for _, ch := range chans {
		for range ch {
		}
	}
	waitIdle(t, e)
}

func TestDrain(t *testing.T) {
	e := slowEngine(t, engine.Config{})
	var results []<-chan llm.Event
	for i := range 3 {
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(i, 4), Params: greedy(10)})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, ch)
	}
	drained := make(chan error)
	go func() { drained <- e.Drain(context.Background()) }()
	for !errors.Is(e.Health(), llm.ErrDraining) {
		time.Sleep(time.Millisecond)
	}
	if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{1}, Params: greedy(1)}); !errors.Is(err, llm.ErrDraining) {
		t.Errorf("Generate while draining: %v", err)
	}
	for _, ch := range results {
		var r result
		for ev := range ch {
			r.tokens = append(r.tokens, ev.TokenIDs...)
			r.last = ev
		}
		if len(r.tokens) != 10 || r.last.Finish != llm.FinishLength {
			t.Errorf("accepted request cut by drain: %d tokens, %q", len(r.tokens), r.last.Finish)
		}
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
}

func TestBackendFailureKillsEngineNotProcess(t *testing.T) {
	for _, mcfg := range []mock.Config{{FailAtStep: 3}, {PanicAtStep: 3}} {
		e := newEngine(t, mcfg, engine.Config{})
		r := run(t, e, llm.Request{PromptTokens: prompt(1, 4), Params: greedy(10)})
		if r.last.Finish != llm.FinishError || !errors.Is(r.last.Err, engine.ErrBackend) || !errors.Is(r.last.Err, llm.ErrEngineDead) {
			t.Errorf("%+v: last event %q %v", mcfg, r.last.Finish, r.last.Err)
		}
		if err := e.Health(); !errors.Is(err, llm.ErrEngineDead) {
			t.Errorf("Health after failure: %v", err)
		}
		if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{1}, Params: greedy(1)}); !errors.Is(err, llm.ErrEngineDead) {
			t.Errorf("Generate after failure: %v", err)
		}
	}
}

// panicTokenizer's decoders panic on the third token: a stand-in for a bug
// in the engine's own per-token code, which runs outside the backend.
type panicTokenizer struct{ llm.Tokenizer }

func (p panicTokenizer) NewDecoder(skip bool) llm.Decoder {
	return &panicDecoder{Decoder: p.Tokenizer.NewDecoder(skip)}
}

type panicDecoder struct {
	llm.Decoder
	n int
}

func (d *panicDecoder) Add(id int) string {
	if d.n++; d.n == 3 {
		panic("decoder bug")
	}
	return d.Decoder.Add(id)
}

// TestEnginePanicKillsEngineNotProcess: a panic in the engine's goroutine
// fails the requests and marks the engine dead; the process lives on.
func TestEnginePanicKillsEngineNotProcess(t *testing.T) {
	e, err := engine.New(mock.NewBackend(mock.Config{}), panicTokenizer{mock.NewTokenizer()}, mock.Info(), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := run(t, e, llm.Request{PromptTokens: prompt(1, 4), Params: greedy(10)})
	if r.last.Finish != llm.FinishError || !errors.Is(r.last.Err, llm.ErrEngineDead) || !strings.Contains(r.last.Err.Error(), "decoder bug") {
		t.Errorf("last event %q %v", r.last.Finish, r.last.Err)
	}
	if err := e.Health(); !errors.Is(err, llm.ErrEngineDead) {
		t.Errorf("Health after the panic: %v", err)
	}
}

// TestPanicStackLoggedNotReturned: after a panic in the backend or in the
// engine's own code, the errors that reach callers (the last event,
// Health, Generate), and from them HTTP clients (a 503's message, /health's
// reason, open even behind API keys), name the panic but carry no stack
// trace with the server's source paths; the stack is in the engine's log.
func TestPanicStackLoggedNotReturned(t *testing.T) {
	for name, newBroken := range map[string]func(engine.Config) (*engine.Engine, error){
		"backend": func(cfg engine.Config) (*engine.Engine, error) {
			return mock.NewEngine(mock.Config{PanicAtStep: 2}, cfg)
		},
		"engine": func(cfg engine.Config) (*engine.Engine, error) {
			return engine.New(mock.NewBackend(mock.Config{}), panicTokenizer{mock.NewTokenizer()}, mock.Info(), cfg)
		},
	} {
		var logs syncbuf.Buffer
		e, err := newBroken(engine.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, e, llm.Request{PromptTokens: prompt(1, 4), Params: greedy(10)})
		_, genErr := e.Generate(context.Background(), llm.Request{PromptTokens: []int{1}, Params: greedy(1)})
		for what, err := range map[string]error{"last event": r.last.Err, "Health": e.Health(), "Generate": genErr} {
			if err == nil || !strings.Contains(err.Error(), "panic") || strings.Contains(err.Error(), "goroutine") {
				t.Errorf("%s panic: %s error %q, want the panic named without a stack", name, what, err)
			}
		}
		e.Close()
		if !strings.Contains(logs.String(), "goroutine") {
			t.Errorf("%s panic: no stack in the log:\n%s", name, logs.String())
		}
	}
}

// TestHugeMaxTokens: a max_tokens near the largest int is a context-length
// error, not an overflow into a sequence that seems to fit (which crashed
// the engine when the scheduler sized its token slice).
func TestHugeMaxTokens(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	for _, maxTokens := range []int{math.MaxInt, math.MaxInt - 3} {
		_, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(1, 4), Params: greedy(maxTokens)})
		if !errors.Is(err, llm.ErrContextLength) {
			t.Errorf("max_tokens %d: %v, want a context-length error", maxTokens, err)
		}
	}
	if r := run(t, e, llm.Request{PromptTokens: prompt(1, 4), Params: greedy(3)}); len(r.tokens) != 3 {
		t.Errorf("after the rejections: %d tokens, want 3", len(r.tokens))
	}
}

func TestCloseAbortsRunning(t *testing.T) {
	e, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}}, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(1, 4), Params: greedy(1000)})
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	r := collect(t, ch)
	if r.last.Finish != llm.FinishAbort || !errors.Is(r.last.Err, llm.ErrClosed) {
		t.Errorf("after Close: %q %v", r.last.Finish, r.last.Err)
	}
	if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{1}, Params: greedy(1)}); !errors.Is(err, llm.ErrClosed) {
		t.Errorf("Generate after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestTimestampsAndCounts(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	r := run(t, e, llm.Request{PromptTokens: prompt(1, 7), Params: greedy(4)})
	ts := r.last.Times
	if ts.Arrival.IsZero() || ts.FirstScheduled.Before(ts.Arrival) || ts.FirstToken.Before(ts.FirstScheduled) || ts.Finish.Before(ts.FirstToken) {
		t.Errorf("timestamps out of order: %+v", ts)
	}
	if r.last.PromptTokens != 7 || r.last.CompletionTokens != 4 {
		t.Errorf("counts %d/%d", r.last.PromptTokens, r.last.CompletionTokens)
	}
	waitIdle(t, e)
	if s := e.Stats(); s.PromptTokens != 7 || s.GenerationTokens != 4 || s.Finished != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestHugeConfigValues: a block size past the context is refused at start
// (a huge one overflowed a backend's bytes-per-block product into a
// division by zero), and a huge token budget works (the scheduler sized a
// slice by it and panicked).
func TestHugeConfigValues(t *testing.T) {
	for _, bs := range []int{-1, mock.Info().MaxModelLen + 1, 1 << 54} {
		if _, err := mock.NewEngine(mock.Config{}, engine.Config{BlockSize: bs}); err == nil || !strings.Contains(err.Error(), "block size") {
			t.Errorf("block size %d: %v, want an error naming the block size", bs, err)
		}
	}
	e := newEngine(t, mock.Config{}, engine.Config{MaxNumBatchedTokens: math.MaxInt})
	if r := run(t, e, llm.Request{PromptTokens: prompt(1, 9), Params: greedy(4)}); len(r.tokens) != 4 || r.last.Finish != llm.FinishLength {
		t.Errorf("with a budget of MaxInt: %d tokens, finish %q", len(r.tokens), r.last.Finish)
	}
}

// TestKVPoolCappedAtUsefulSize: a backend that could hold far more blocks
// than max_num_seqs full-length sequences use gets a pool of that size.
func TestKVPoolCappedAtUsefulSize(t *testing.T) {
	info := mock.Info()
	e := newEngine(t, mock.Config{KVBlocks: 1 << 20}, engine.Config{MaxNumSeqs: 3, BlockSize: 16})
	if got, want := e.Stats().KVBlocksTotal, 3*((info.MaxModelLen+15)/16); got != want {
		t.Errorf("%d KV blocks, want %d (3 sequences of %d tokens)", got, want, info.MaxModelLen)
	}
	small := newEngine(t, mock.Config{KVBlocks: 5}, engine.Config{MaxNumSeqs: 3, BlockSize: 16})
	if got := small.Stats().KVBlocksTotal; got != 5 {
		t.Errorf("%d KV blocks, want the backend's 5", got)
	}
}

// TestHugeMaxNumSeqs: a max_num_seqs past what the pool could ever hold
// (math.MaxInt as "no limit") starts an engine with the backend's whole
// pool; the product of it and the blocks of one full-length sequence
// overflowed, and New said the backend could hold no KV block at all.
func TestHugeMaxNumSeqs(t *testing.T) {
	e := newEngine(t, mock.Config{KVBlocks: 100}, engine.Config{MaxNumSeqs: math.MaxInt})
	if got := e.NumKVBlocks(); got != 100 {
		t.Errorf("%d KV blocks, want the backend's 100", got)
	}
	if r := run(t, e, llm.Request{PromptTokens: prompt(1, 9), Params: greedy(4)}); len(r.tokens) != 4 {
		t.Errorf("%d tokens, want 4", len(r.tokens))
	}
}

// TestNegativeNumBlocksRefused: a negative pool size is a mistake New
// names, as it does a negative MaxNumSeqs or MaxPending, instead of
// reading it as 0 (the backend's whole budget).
func TestNegativeNumBlocksRefused(t *testing.T) {
	_, err := mock.NewEngine(mock.Config{}, engine.Config{NumBlocks: -1})
	if err == nil || !strings.Contains(err.Error(), "NumBlocks") {
		t.Errorf("NumBlocks -1: %v, want an error naming NumBlocks", err)
	}
}

// gatedFailBackend fails its second Forward, after telling the test it has
// begun and waiting for the test's go-ahead: a request submitted meanwhile
// sits in the engine's inbox while the engine dies.
type gatedFailBackend struct {
	*mock.Backend
	calls         int
	began, failed chan struct{}
}

func (g *gatedFailBackend) Forward(b *engine.Batch) ([]engine.SampleRow, error) {
	if g.calls++; g.calls == 2 {
		close(g.began)
		<-g.failed
		return nil, errors.New("injected")
	}
	return g.Backend.Forward(b)
}

// TestRequestQueuedAtDeathGetsEngineDead: a request that reaches the
// engine while its last step is failing ends with ErrEngineDead, like the
// requests that step ran, not with the abort of a closed engine.
func TestRequestQueuedAtDeathGetsEngineDead(t *testing.T) {
	g := &gatedFailBackend{Backend: mock.NewBackend(mock.Config{}), began: make(chan struct{}), failed: make(chan struct{})}
	e, err := engine.New(g, mock.NewTokenizer(), mock.Info(), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(1, 4), Params: greedy(10)})
	if err != nil {
		t.Fatal(err)
	}
	<-g.began
	b, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(2, 4), Params: greedy(10)})
	if err != nil {
		t.Fatalf("Generate while the step runs: %v", err)
	}
	close(g.failed)
	for _, ch := range []<-chan llm.Event{a, b} {
		if r := collect(t, ch); r.last.Finish != llm.FinishError || !errors.Is(r.last.Err, llm.ErrEngineDead) {
			t.Errorf("request ended %q with %v, want an error matching ErrEngineDead", r.last.Finish, r.last.Err)
		}
	}
}

// TestNewRejectsUnsetOrOutOfRangeEOS: a ModelInfo whose EOSTokenID was never
// set would end every request at token 0; New says so instead of serving it.
// An explicit -1 (no EOS) and the tokenizer's own id are accepted.
func TestNewRejectsUnsetOrOutOfRangeEOS(t *testing.T) {
	for _, tc := range []struct {
		eos     int
		wantErr string
	}{
		{0, "EOSTokenID is 0 but the tokenizer's EOS is 256"},
		{-2, "outside the vocabulary"},
		{mock.Info().VocabSize, "outside the vocabulary"},
		{-1, ""},
		{mock.EOSTokenID, ""},
	} {
		info := mock.Info()
		info.EOSTokenID = tc.eos
		e, err := engine.New(mock.NewBackend(mock.Config{}), mock.NewTokenizer(), info, engine.Config{})
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("EOS %d: %v", tc.eos, err)
				continue
			}
			e.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("EOS %d: error %v, want one containing %q", tc.eos, err, tc.wantErr)
		}
		if e != nil {
			e.Close()
		}
	}
}

// TestStepTokensHistogram: every step is counted once, as vLLM's
// vllm:iteration_tokens_total counts it: the step that completes a prefill
// counts the whole prompt and its sampled token, even when the prompt came
// in chunks or from the prefix cache; the other steps their sampled tokens.
func TestStepTokensHistogram(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	run(t, e, llm.Request{PromptTokens: prompt(1, 9), Params: greedy(3)})
	waitIdle(t, e)
	s := e.Stats()
	var want llm.StepTokenCounts
	want.Counts[0] = 2 // two decode steps of 1 token
	want.Counts[2] = 1 // the prefill's 9 and its token: 10, in (8, 16]
	want.Sum = 9 + 3
	if s.StepTokens != want || s.Steps != 3 {
		t.Errorf("step tokens %+v after %d steps; want %+v after 3", s.StepTokens, s.Steps, want)
	}

	// Chunked (budget 32) and, the second time, mostly cached: 40 prompt
	// tokens count once each time, on the step that completes the prefill.
	e = newEngine(t, mock.Config{}, engine.Config{PrefixCaching: true, MaxNumBatchedTokens: 32})
	for range 2 {
		run(t, e, llm.Request{PromptTokens: prompt(2, 40), Params: greedy(2)})
	}
	waitIdle(t, e)
	s = e.Stats()
	if want := s.PromptTokens + s.GenerationTokens; s.StepTokens.Sum != want {
		t.Errorf("step tokens sum %d, want prompt + generation tokens %d (%+v)", s.StepTokens.Sum, want, s)
	}
	if s.PrefixCacheHits == 0 {
		t.Error("the second run found nothing cached: the test no longer covers the cache")
	}
}

// TestQueuePlaceFreedBeforeFirstStepRuns: a request leaves the waiting
// queue when it is first scheduled, before its step runs and so before any
// of its events: a caller told ErrOverloaded that retries when it sees a
// request start or end is never refused for a place already freed (before,
// the place was freed after the step's events were sent, so such a retry
// could fail with nothing left to wake it).
func TestQueuePlaceFreedBeforeFirstStepRuns(t *testing.T) {
	pb := &pausableBackend{Backend: mock.NewBackend(mock.Config{})}
	began, resume := pb.pause()
	e, err := engine.New(pb, mock.NewTokenizer(), mock.Info(), engine.Config{MaxNumSeqs: 1, MaxPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(1, 4), Params: greedy(1)})
	if err != nil {
		t.Fatal(err)
	}
	<-began // a is scheduled; its step is running
	b, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(2, 4), Params: greedy(1)})
	resume()
	if err != nil {
		t.Fatalf("Generate while the first request's first step runs: %v", err)
	}
	for _, ch := range []<-chan llm.Event{a, b} {
		if r := collect(t, ch); r.last.Err != nil {
			t.Errorf("request ended with %v", r.last.Err)
		}
	}
}

// TestStartLogNamesSeed: the start-up line names the seed in force, given
// or drawn from the clock, so that a run can be repeated with --seed.
func TestStartLogNamesSeed(t *testing.T) {
	for _, seed := range []*uint64{new(uint64(42)), nil} {
		var logs syncbuf.Buffer
		e, err := mock.NewEngine(mock.Config{}, engine.Config{Seed: seed, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		line := logs.String()
		switch {
		case seed != nil && !strings.Contains(line, "seed=42"):
			t.Errorf("seed 42 not logged: %s", line)
		case seed == nil && (!strings.Contains(line, "seed=") || strings.Contains(line, "seed=0 ")):
			t.Errorf("the clock's seed not logged: %s", line)
		}
	}
}

// TestEngineSeedSkipsSeededRequests: Config.Seed gives seeds to the
// requests without one of their own, and only to them, so a seeded request
// sent between two unseeded ones leaves the second's sample as it was.
func TestEngineSeedSkipsSeededRequests(t *testing.T) {
	unseeded := llm.SamplingParams{MaxTokens: 24, Temperature: 1.5, IgnoreEOS: true}
	seeded := unseeded
	seeded.Seed = new(int64(99))
	second := func(between bool) []int {
		e := newEngine(t, mock.Config{}, engine.Config{Seed: new(uint64(5))})
		run(t, e, llm.Request{PromptTokens: prompt(1, 6), Params: unseeded})
		if between {
			run(t, e, llm.Request{PromptTokens: prompt(2, 6), Params: seeded})
		}
		return run(t, e, llm.Request{PromptTokens: prompt(3, 6), Params: unseeded}).tokens
	}
	if alone, after := second(false), second(true); !slices.Equal(alone, after) {
		t.Errorf("the second unseeded request sampled %v, and %v after a seeded one", alone, after)
	}
}

// slowClosingBackend is the mock backend with a Close that says when it is
// entered and returns only when released.
type slowClosingBackend struct {
	*mock.Backend
	entered, release chan struct{}
	closed           atomic.Bool
}

func (b *slowClosingBackend) Close() error {
	close(b.entered)
	<-b.release
	b.closed.Store(true)
	return nil
}

// TestConcurrentCloseWaitsForBackend: a Close made while another is closing
// the backend returns only once the backend is closed, so that a caller
// freeing what the backend used after its own Close is safe. (Were the
// second Close to return early, it would see the backend still open; a
// machine too slow to let it return before the release makes the test pass
// without showing that, never fail wrongly.)
func TestConcurrentCloseWaitsForBackend(t *testing.T) {
	be := &slowClosingBackend{Backend: mock.NewBackend(mock.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	e, err := engine.New(be, mock.NewTokenizer(), mock.Info(), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- e.Close() }()
	<-be.entered
	second := make(chan bool, 1)
	go func() {
		_ = e.Close()
		second <- be.closed.Load()
	}()
	time.Sleep(20 * time.Millisecond) // room for an early return to show
	close(be.release)
	if !<-second {
		t.Error("the second Close returned while the first was still closing the backend")
	}
	if err := <-first; err != nil {
		t.Error(err)
	}
}

// TestNumBlocksCapLogged: a NumBlocks larger than the backend can hold is
// capped, and the start-up log says so with the asked and effective values
// (before, 1e9 blocks became 4,096 without a word).
func TestNumBlocksCapLogged(t *testing.T) {
	for _, tc := range []struct {
		asked  int
		capped bool
	}{{1_000_000_000, true}, {32, false}} {
		var logs syncbuf.Buffer
		e, err := mock.NewEngine(mock.Config{KVBlocks: 64}, engine.Config{NumBlocks: tc.asked, PrefixCaching: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		line := logs.String()
		logged := strings.Contains(line, "num_blocks capped") && strings.Contains(line, "asked=1000000000") && strings.Contains(line, "blocks=64")
		if logged != tc.capped {
			t.Errorf("NumBlocks %d on a 64-block backend: cap logged %v, want %v:\n%s", tc.asked, logged, tc.capped, line)
		}
	}
}
