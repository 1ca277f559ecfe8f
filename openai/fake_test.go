package openai

import (
	"context"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// byteTok is a byte-level tokenizer like the mock backend's: ids 0..255 are
// bytes, 256 is end-of-text.
type byteTok struct{}

const fakeEOS = 256

func (byteTok) Encode(text string, _ bool) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

func (byteTok) tokenBytes(skipSpecial bool) func(int) []byte {
	return func(id int) []byte {
		if id == fakeEOS {
			if skipSpecial {
				return nil
			}
			return []byte("<|endoftext|>")
		}
		return []byte{byte(id)}
	}
}

func (t byteTok) Decode(ids []int, skipSpecial bool) string {
	d := tokenizer.NewByteDecoder(t.tokenBytes(skipSpecial))
	var s string
	for _, id := range ids {
		s += d.Add(id)
	}
	return s + d.Flush()
}

func (t byteTok) NewDecoder(skipSpecial bool) llm.Decoder {
	return tokenizer.NewByteDecoder(t.tokenBytes(skipSpecial))
}
func (byteTok) VocabSize() int        { return 257 }
func (byteTok) EOSTokenID() int       { return fakeEOS }
func (byteTok) IsSpecial(id int) bool { return id == fakeEOS }

// fakeEngine is a scripted llm.Engine: it injects admission errors, health
// states and event sequences the real engine produces only under failure.
type fakeEngine struct {
	info   llm.ModelInfo
	genErr error                             // Generate's rejection, when set
	script func(req llm.Request) []llm.Event // events of one request; default: fakeScript
	hold   chan struct{}                     // when set, events wait for it to close
	// queued puts all of a request's events in its (buffered) channel
	// before Generate returns: a stream that fell behind by the whole
	// request, whose events wait to be merged.
	queued bool
	// delivered, when set, is called with i once the reader has received
	// event i: it is back at its channel, so it has done what event i-1
	// asked of it.
	delivered func(i int)
	health    error
	stats     llm.Stats
	tok       llm.Tokenizer // nil means byteTok
	panics    bool          // Generate panics
	// admit, when positive, is how many Generate calls succeed before the
	// rest fail with genErr: an engine whose queue fills part-way through
	// one request's choices.
	admit int

	mu   sync.Mutex
	reqs []llm.Request
	wg   sync.WaitGroup
}

func newFake() *fakeEngine {
	return &fakeEngine{info: llm.ModelInfo{ID: "fake", MaxModelLen: 64, VocabSize: 257, EOSTokenID: fakeEOS, Backend: "fake"}}
}

// fakeT0 is the fixed arrival time of every fake request, so histograms are
// deterministic.
func fakeT0() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// fakeScript generates MaxTokens tokens cycling "abc...", one per event, 10
// ms apart, after 5 ms in the queue; a stop token id or stop string is not
// simulated.
func fakeScript(req llm.Request) []llm.Event {
	var evs []llm.Event
	t0 := fakeT0()
	times := llm.Timestamps{Arrival: t0, FirstScheduled: t0.Add(5 * time.Millisecond)}
	if req.Params.MaxTokens == 0 { // scoring only: one final event, no token
		times.Finish = t0.Add(20 * time.Millisecond)
		return []llm.Event{{Finish: llm.FinishLength, StopTokenID: -1, PromptTokens: len(req.PromptTokens),
			PromptLogprobs: fakePromptLogprobs(req), Time: times.Finish, Times: times}}
	}
	for i := range req.Params.MaxTokens {
		id := 'a' + i%26
		now := t0.Add(time.Duration(20+10*i) * time.Millisecond)
		if i == 0 {
			times.FirstToken = now
		}
		ev := llm.Event{TokenIDs: []int{id}, Text: string(rune(id)), StopTokenID: -1,
			PromptTokens: len(req.PromptTokens), CompletionTokens: i + 1, Time: now, Times: times}
		if req.Params.Logprobs != nil {
			lp := llm.TokenLogprob{ID: id, Logprob: -0.5}
			for k := range *req.Params.Logprobs {
				lp.Top = append(lp.Top, llm.TopLogprob{ID: 'A' + k, Logprob: -1 - float32(k)})
			}
			ev.Logprobs = []llm.TokenLogprob{lp}
		}
		if i == 0 {
			ev.PromptLogprobs = fakePromptLogprobs(req)
		}
		if i == req.Params.MaxTokens-1 {
			ev.Finish = llm.FinishLength
			ev.Times.Finish = now
		}
		evs = append(evs, ev)
	}
	return evs
}

// fakePromptLogprobs scores prompt token k+1 -0.25, with alternatives 'A',
// 'B', ..., when the request asks.
func fakePromptLogprobs(req llm.Request) []llm.TokenLogprob {
	if req.Params.PromptLogprobs == nil {
		return nil
	}
	var out []llm.TokenLogprob
	for _, id := range req.PromptTokens[1:] {
		lp := llm.TokenLogprob{ID: id, Logprob: -0.25, Rank: 1}
		for k := range *req.Params.PromptLogprobs {
			lp.Top = append(lp.Top, llm.TopLogprob{ID: 'A' + k, Logprob: -1 - float32(k)})
		}
		out = append(out, lp)
	}
	return out
}

func (f *fakeEngine) Generate(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	f.wg.Add(1) // before the request is visible, so a test's wg.Wait covers it
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	refuse := f.genErr != nil && (f.admit <= 0 || len(f.reqs) > f.admit)
	f.mu.Unlock()
	if refuse || f.panics {
		f.wg.Done()
		if f.panics {
			panic("fake engine: injected panic")
		}
		return nil, f.genErr
	}
	script := f.script
	if script == nil {
		script = fakeScript
	}
	evs := script(req)
	if f.queued {
		ch := make(chan llm.Event, len(evs))
		for _, ev := range evs {
			ch <- ev
		}
		close(ch)
		f.wg.Done()
		return ch, nil
	}
	ch := make(chan llm.Event)
	go func() {
		defer f.wg.Done()
		defer close(ch)
		if f.hold != nil {
			select {
			case <-f.hold:
			case <-ctx.Done():
				return
			}
		}
		for i, ev := range evs {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
			if f.delivered != nil {
				f.delivered(i)
			}
		}
	}()
	return ch, nil
}

func (f *fakeEngine) requests() []llm.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]llm.Request(nil), f.reqs...)
}

func (f *fakeEngine) Info() llm.ModelInfo { return f.info }
func (f *fakeEngine) Tokenizer() llm.Tokenizer {
	if f.tok != nil {
		return f.tok
	}
	return byteTok{}
}
func (f *fakeEngine) Health() error                   { return f.health }
func (f *fakeEngine) Stats() llm.Stats                { return f.stats }
func (f *fakeEngine) Drain(ctx context.Context) error { return nil }
func (f *fakeEngine) Close() error                    { f.wg.Wait(); return nil }

// panickyTok panics when asked to decode the token 'c' alone, as the
// handler does for logprobs: a panic after the stream's headers went out.
type panickyTok struct{ byteTok }

func (t panickyTok) Decode(ids []int, skipSpecial bool) string {
	if len(ids) == 1 && ids[0] == 'c' {
		panic("tokenizer: injected panic")
	}
	return t.byteTok.Decode(ids, skipSpecial)
}
