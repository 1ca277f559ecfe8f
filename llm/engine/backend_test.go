package engine_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// tableBackend is a stateless model whose every step returns the same
// logits row: the simplest backend a user would write, with logits kept in
// a table rather than computed into a fresh buffer each step.
type tableBackend struct {
	row  []float32
	rows []engine.SampleRow
}

func (b *tableBackend) MaxKVBlocks(int) (int, error) { return 64, nil }
func (b *tableBackend) AllocateKV(int, int) error    { return nil }
func (b *tableBackend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	b.rows = b.rows[:0]
	for _, s := range batch.Seqs {
		if s.Sample {
			b.rows = append(b.rows, engine.SampleRow{Logits: b.row, Argmax: mock.EOSTokenID})
		}
	}
	return b.rows, nil
}

// TestMaskingLeavesBackendLogitsAlone checks that min_tokens, which keeps
// EOS from being chosen, does so without writing into the backend's logits:
// a backend that returns rows from a table must not find EOS at -Inf in it
// for every later request.
func TestMaskingLeavesBackendLogitsAlone(t *testing.T) {
	row := make([]float32, mock.NewTokenizer().VocabSize())
	row['x'] = 1
	row[mock.EOSTokenID] = 2 // the greedy choice
	be := &tableBackend{row: row}
	info := llm.ModelInfo{ID: "table", MaxModelLen: 64, VocabSize: len(row), EOSTokenID: mock.EOSTokenID}
	e, err := engine.New(be, mock.NewTokenizer(), info, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	r := run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 8, MinTokens: 3}})
	if got := string(rune(r.tokens[0])); len(r.tokens) != 4 || got != "x" || r.last.Finish != llm.FinishStop {
		t.Errorf("min_tokens 3: tokens %v, finish %q; want x x x EOS, stop", r.tokens, r.last.Finish)
	}
	if row[mock.EOSTokenID] != 2 {
		t.Fatalf("the backend's logits row was written: EOS logit %v", row[mock.EOSTokenID])
	}
	// The next request, which needs the logits row (logprobs), still ends
	// at once on EOS.
	n := 0
	r = run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 8, Logprobs: &n}})
	if len(r.tokens) != 1 || r.tokens[0] != mock.EOSTokenID {
		t.Errorf("after a min_tokens request: tokens %v, want EOS at once", r.tokens)
	}
}

func TestGenerateNilContext(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	//lint:ignore SA1012 a nil context is what is tested
	ch, err := e.Generate(nil, llm.Request{PromptTokens: []int{1}, Params: greedy(2)})
	if !errors.Is(err, llm.ErrInvalidRequest) || ch != nil {
		t.Fatalf("Generate(nil ctx): %v, %v; want ErrInvalidRequest and no channel", ch, err)
	}
	// The engine is unaffected.
	if r := run(t, e, llm.Request{PromptTokens: []int{1}, Params: greedy(2)}); len(r.tokens) != 2 {
		t.Errorf("after a nil context: %d tokens", len(r.tokens))
	}
}

// TestGenerateDoneContext: a caller whose context is already done (a client
// that hung up while its request was parsed) is refused with the context's
// error, and takes no queue place: with room for one waiting request, the
// next caller is admitted.
func TestGenerateDoneContext(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{MaxPending: 1})
	for _, mk := range []func() (context.Context, context.CancelFunc){
		func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), -1) },
	} {
		ctx, cancel := mk()
		ch, err := e.Generate(ctx, llm.Request{PromptTokens: []int{1}, Params: greedy(2)})
		cancel()
		if err == nil || !errors.Is(err, ctx.Err()) || ch != nil {
			t.Fatalf("Generate with a done context: %v, %v; want %v and no channel", ch, err, ctx.Err())
		}
	}
	if r := run(t, e, llm.Request{PromptTokens: []int{1}, Params: greedy(2)}); len(r.tokens) != 2 {
		t.Errorf("after done contexts: %d tokens", len(r.tokens))
	}
}

// TestPenaltiesSteerGreedyDecoding runs greedy requests with penalties on
// a backend that returns the same row every step, so that only the
// penalties change the choice, and checks the tokens against a plain
// re-computation of vLLM's rules. The backend's row is left alone, and the
// reported log-probabilities are the model's, not the penalized ones.
func TestPenaltiesSteerGreedyDecoding(t *testing.T) {
	vocab := mock.NewTokenizer().VocabSize()
	row := make([]float32, vocab)
	for i := range row {
		row[i] = -3
	}
	row['a'], row['b'], row['c'], row['d'], row['e'] = 3, 2.5, 2, 1, -1
	orig := append([]float32(nil), row...)
	be := &tableBackend{row: row}
	info := llm.ModelInfo{ID: "table", MaxModelLen: 64, VocabSize: vocab, EOSTokenID: -1}
	e, err := engine.New(be, mock.NewTokenizer(), info, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	reference := func(prompt []int, p llm.SamplingParams) []int {
		seen := map[int]bool{}
		for _, t := range prompt {
			seen[t] = true
		}
		counts := map[int]int{}
		var out []int
		for range p.MaxTokens {
			l := append([]float32(nil), orig...)
			for id := range l {
				if p.RepetitionPenalty != 0 && (seen[id] || counts[id] > 0) {
					if l[id] > 0 {
						l[id] /= float32(p.RepetitionPenalty)
					} else {
						l[id] *= float32(p.RepetitionPenalty)
					}
				}
				if counts[id] > 0 {
					l[id] -= float32(p.FrequencyPenalty) * float32(counts[id])
					l[id] -= float32(p.PresencePenalty)
				}
			}
			best := 0
			for id := range l {
				if l[id] > l[best] {
					best = id
				}
			}
			out = append(out, best)
			counts[best]++
		}
		return out
	}
	zero := 0
	for _, p := range []llm.SamplingParams{
		{MaxTokens: 10, FrequencyPenalty: 0.75},
		{MaxTokens: 10, PresencePenalty: 1.2},
		{MaxTokens: 10, FrequencyPenalty: 0.4, PresencePenalty: 0.3},
		{MaxTokens: 10, RepetitionPenalty: 2},
		{MaxTokens: 10, RepetitionPenalty: 1.5, FrequencyPenalty: 0.2},
		{MaxTokens: 10, PresencePenalty: -2, FrequencyPenalty: 2},
	} {
		prompt := []int{'a', 'e'}
		want := reference(prompt, p)
		p.Logprobs = &zero
		r := run(t, e, llm.Request{PromptTokens: prompt, Params: p})
		if !slices.Equal(r.tokens, want) {
			t.Errorf("%+v: tokens %c, want %c", p, r.tokens, want)
		}
		if slices.Equal(want, slices.Repeat([]int{'a'}, len(want))) {
			t.Errorf("%+v: the penalties changed nothing; pick stronger ones", p)
		}
	}
	if !slices.Equal(row, orig) {
		t.Fatal("the backend's logits row was written")
	}
	// Log-probabilities stay the model's: 'b', chosen second because of the
	// presence penalty on 'a', reports its unpenalized value.
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 2, PresencePenalty: 2, Logprobs: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	var lps []llm.TokenLogprob
	for ev := range ch {
		lps = append(lps, ev.Logprobs...)
	}
	sum := 0.0
	for _, v := range orig {
		sum += math.Exp(float64(v))
	}
	wantB := 2.5 - math.Log(sum)
	if len(lps) != 2 || lps[0].ID != 'a' || lps[1].ID != 'b' || math.Abs(float64(lps[1].Logprob)-wantB) > 1e-5 {
		t.Errorf("logprobs %+v, want a then b with the model's %.6f", lps, wantB)
	}
}

// TestLogitBias: the bias is added before the penalties, as in vLLM, and
// changes the choice, not the backend's row.
func TestLogitBias(t *testing.T) {
	e, row := newTableEngine(t, map[int]float32{'a': 3, 'b': 2.5})
	for _, tc := range []struct {
		p    llm.SamplingParams
		want byte
	}{
		{llm.SamplingParams{MaxTokens: 1}, 'a'},
		{llm.SamplingParams{MaxTokens: 1, LogitBias: map[int]float64{'b': 1}}, 'b'},
		{llm.SamplingParams{MaxTokens: 1, LogitBias: map[int]float64{'a': -100}}, 'b'},
		{llm.SamplingParams{MaxTokens: 1, LogitBias: map[int]float64{'z': 100}}, 'z'},
		// (3+1)/2 = 2 loses to 2.5; penalizing first, 3/2+1 = 2.5 would tie
		// and the lower id, 'a', would win.
		{llm.SamplingParams{MaxTokens: 1, LogitBias: map[int]float64{'a': 1}, RepetitionPenalty: 2}, 'b'},
	} {
		r := run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: tc.p})
		if len(r.tokens) != 1 || r.tokens[0] != int(tc.want) {
			t.Errorf("%+v: tokens %c, want %c", tc.p, r.tokens, tc.want)
		}
	}
	if row['a'] != 3 || row['b'] != 2.5 || row['z'] != 0 {
		t.Fatal("the backend's logits row was written")
	}
}

// TestAllowedTokenIDs: only the allowed tokens are generated, greedy or
// sampled, whatever their logits; the bias and penalties then act among
// them; and the log-probabilities stay the model's.
func TestAllowedTokenIDs(t *testing.T) {
	vocab := mock.NewTokenizer().VocabSize()
	e, row := newTableEngine(t, map[int]float32{'a': 3, 'b': 2.5, 'c': -1})
	seed := int64(3)
	for _, tc := range []struct {
		p    llm.SamplingParams
		want []byte // each generated token is one of these
	}{
		{llm.SamplingParams{MaxTokens: 4, AllowedTokenIDs: []int{'c'}}, []byte{'c'}},
		{llm.SamplingParams{MaxTokens: 4, AllowedTokenIDs: []int{'c', 'b'}}, []byte{'b'}},
		{llm.SamplingParams{MaxTokens: 4, AllowedTokenIDs: []int{'c', 'b'}, LogitBias: map[int]float64{'c': 10}}, []byte{'c'}},
		{llm.SamplingParams{MaxTokens: 4, AllowedTokenIDs: []int{'b', 'c'}, FrequencyPenalty: 2}, []byte{'b', 'c'}},
		{llm.SamplingParams{MaxTokens: 32, Temperature: 5, Seed: &seed, AllowedTokenIDs: []int{'x', 'y'}}, []byte{'x', 'y'}},
	} {
		r := run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: tc.p})
		if len(r.tokens) != tc.p.MaxTokens {
			t.Errorf("%+v: %d tokens", tc.p, len(r.tokens))
		}
		for _, tok := range r.tokens {
			if !slices.Contains(tc.want, byte(tok)) {
				t.Errorf("%+v: generated %c, allowed %q", tc.p, r.tokens, tc.want)
				break
			}
		}
	}
	zero := 0
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 1, AllowedTokenIDs: []int{'b'}, Logprobs: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	var lps []llm.TokenLogprob
	for ev := range ch {
		lps = append(lps, ev.Logprobs...)
	}
	if len(lps) != 1 || lps[0].ID != 'b' || lps[0].Rank != 2 {
		t.Errorf("logprobs %+v, want 'b' at the model's rank 2", lps)
	}
	if row['a'] != 3 || row['b'] != 2.5 || row['c'] != -1 || row['x'] != 0 {
		t.Fatal("the backend's logits row was written")
	}
	for _, bad := range [][]int{{-1}, {vocab}} {
		if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 1, AllowedTokenIDs: bad}}); !errors.Is(err, llm.ErrInvalidRequest) {
			t.Errorf("allowed_token_ids %v: %v, want ErrInvalidRequest", bad, err)
		}
	}
}

// TestBadWords: a one-token bad word is never generated; a longer one
// loses its last token only right after the rest of it, in the output
// (the prompt does not count), as vLLM's bad_words.
func TestBadWords(t *testing.T) {
	vocab := mock.NewTokenizer().VocabSize()
	e, _ := newTableEngine(t, map[int]float32{'a': 3, 'b': 2.5, 'c': 2})
	for _, tc := range []struct {
		prompt string
		bad    [][]int
		want   string
	}{
		{"a", nil, "aaaa"},
		{"a", [][]int{{'a'}}, "bbbb"},
		{"a", [][]int{{'a'}, {'b'}}, "cccc"},
		// "aa" is banned: after an 'a' comes 'b', after the 'b' 'a' again.
		{"x", [][]int{{'a', 'a'}}, "abab"},
		// The prompt's 'a' does not count: the first 'a' is allowed.
		{"a", [][]int{{'a', 'a'}}, "abab"},
		{"x", [][]int{{'a', 'a'}, {'b', 'a'}}, "abbb"},
		// Three tokens: after "ab" the 'a' is banned and 'b' comes; after
		// "abb" it is allowed again.
		{"x", [][]int{{'a', 'a'}, {'a', 'b', 'a'}}, "abba"},
	} {
		r := run(t, e, llm.Request{PromptTokens: []int{int(tc.prompt[0])}, Params: llm.SamplingParams{MaxTokens: 4, BadWords: tc.bad}})
		got := make([]byte, len(r.tokens))
		for i, tok := range r.tokens {
			got[i] = byte(tok)
		}
		if string(got) != tc.want {
			t.Errorf("prompt %q, bad words %v: generated %q, want %q", tc.prompt, tc.bad, got, tc.want)
		}
	}
	for _, bad := range [][][]int{{{}}, {{-1}}, {{'a', vocab}}} {
		if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 1, BadWords: bad}}); !errors.Is(err, llm.ErrInvalidRequest) {
			t.Errorf("bad words %v: %v, want ErrInvalidRequest", bad, err)
		}
	}
}

// TestNothingAllowed: when a request's allowed tokens are all banned
// (min_tokens masks its stop token, or a bad word), it fails with an
// invalid-request error naming allowed_token_ids, having generated no
// token outside the list; the engine goes on serving.
func TestNothingAllowed(t *testing.T) {
	e, _ := newTableEngine(t, map[int]float32{'a': 3, 'b': 2.5})
	for _, tc := range []struct {
		p    llm.SamplingParams
		want int // tokens generated before the failure
	}{
		{llm.SamplingParams{MaxTokens: 4, MinTokens: 2, AllowedTokenIDs: []int{'b'}, StopTokenIDs: []int{'b'}}, 0},
		{llm.SamplingParams{MaxTokens: 4, AllowedTokenIDs: []int{'b'}, BadWords: [][]int{{'b', 'b'}}}, 1},
		{llm.SamplingParams{MaxTokens: 4, Temperature: 1, AllowedTokenIDs: []int{'b', 'c'}, BadWords: [][]int{{'b'}, {'c'}}}, 0},
	} {
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: tc.p})
		if err != nil {
			t.Fatal(err)
		}
		var toks []int
		var last llm.Event
		for ev := range ch {
			toks = append(toks, ev.TokenIDs...)
			last = ev
		}
		var pe *llm.ParamError
		if last.Finish != llm.FinishError || !errors.As(last.Err, &pe) || pe.Param != "allowed_token_ids" || !errors.Is(last.Err, llm.ErrInvalidRequest) {
			t.Errorf("%+v: finished %q with %v, want an allowed_token_ids error", tc.p, last.Finish, last.Err)
		}
		if len(toks) != tc.want || slices.ContainsFunc(toks, func(t int) bool { return t != 'b' }) {
			t.Errorf("%+v: generated %c before failing, want %d × b", tc.p, toks, tc.want)
		}
	}
	if r := run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 2}}); len(r.tokens) != 2 || e.Health() != nil {
		t.Errorf("after the failures: tokens %v, health %v", r.tokens, e.Health())
	}
}

// TestGenerateCopiesAllowedAndBadWords: a caller reusing its AllowedTokenIDs / BadWords slices after Generate
// must not race with the engine or change the running request.
func TestGenerateCopiesAllowedAndBadWords(t *testing.T) {
	e, _ := newTableEngine(t, map[int]float32{'a': 3, 'b': 2.5, 'c': 2})
	allowed := []int{'b'}
	bad := [][]int{{'a'}}
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'x'}, Params: llm.SamplingParams{MaxTokens: 8, AllowedTokenIDs: allowed}})
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'x'}, Params: llm.SamplingParams{MaxTokens: 8, BadWords: bad}})
	if err != nil {
		t.Fatal(err)
	}
	allowed[0] = 'c' // the caller reuses its variables
	bad[0][0] = 'c'
	for ev := range ch {
		for _, tok := range ev.TokenIDs {
			if tok != 'b' {
				t.Errorf("allowed: generated %c, want b", tok)
			}
		}
	}
	for ev := range ch2 {
		for _, tok := range ev.TokenIDs {
			if tok != 'b' {
				t.Errorf("bad words: generated %c, want b", tok)
			}
		}
	}
}

// TestBadWordsLimits: more sequences or tokens than the limits are refused.
func TestBadWordsLimits(t *testing.T) {
	e, _ := newTableEngine(t, nil)
	many := make([][]int, llm.MaxBadWords+1)
	for i := range many {
		many[i] = []int{'a'}
	}
	long := [][]int{make([]int, llm.MaxBadWordTokens+1)}
	for _, bw := range [][][]int{many, long} {
		if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 1, BadWords: bw}}); !errors.Is(err, llm.ErrInvalidRequest) {
			t.Errorf("%d sequences: %v, want ErrInvalidRequest", len(bw), err)
		}
	}
}

// newTableEngine is an engine over a tableBackend whose every logits row is
// zero but for logits; it returns the row, which the backend owns, and is
// closed when the test ends.
func newTableEngine(t *testing.T, logits map[int]float32) (*engine.Engine, []float32) {
	t.Helper()
	vocab := mock.NewTokenizer().VocabSize()
	row := make([]float32, vocab)
	for id, v := range logits {
		row[id] = v
	}
	e, err := engine.New(&tableBackend{row: row}, mock.NewTokenizer(), llm.ModelInfo{ID: "table", MaxModelLen: 64, VocabSize: vocab, EOSTokenID: -1}, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, row
}
