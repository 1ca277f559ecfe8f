// Package engine is tinyserve's inference engine: one goroutine owns the
// scheduler (llm/sched), the KV block manager (llm/kv) and a Backend, and
// runs steps: Schedule, Backend.Forward, sample, Update — the shape of
// vLLM's EngineCore.step (vllm/v1/engine/core.py). Everything else talks to
// that goroutine: Generate submits a request and streams its events,
// cancelling the request's context aborts it at the next step boundary,
// Drain stops admission and waits, Close stops the loop.
//
// Sampling (greedy, temperature, top-k, top-p, per-request seeds), stop
// strings and stop token ids, min/max tokens, ignore_eos and logprobs are
// done here, the same for every backend.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/sched"
)

// DefaultMaxPending is the waiting-queue bound when Config.MaxPending is 0.
const DefaultMaxPending = 1024

// Config tunes an engine. The zero value takes vLLM's defaults.
type Config struct {
	// MaxNumSeqs caps the running sequences; 0 means 256.
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step; 0 means 2048.
	MaxNumBatchedTokens int
	// BlockSize is the number of tokens per KV block; 0 means 16.
	BlockSize int
	// NumBlocks is the size of the KV block pool; 0 means as many as the
	// backend can hold, and a negative one is refused. A larger value is
	// capped at what the backend can hold.
	NumBlocks int
	// PrefixCaching reuses the KV of whole blocks of tokens that an earlier
	// request computed, when a new one starts with the same tokens (vLLM's
	// --enable-prefix-caching). Requests that ask for prompt
	// log-probabilities always compute their whole prompt.
	PrefixCaching bool
	// MaxPending bounds the requests admitted but not yet running; Generate
	// returns ErrOverloaded beyond it. 0 means DefaultMaxPending.
	MaxPending int
	// Seed seeds the choice of per-request seeds for requests that set
	// none, as vLLM's --seed: the same seed and the same order of arrivals
	// give every such request the same seed, and with it the same sample.
	// Nil means a seed taken from the clock.
	Seed *uint64
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock for event timestamps; nil means time.Now.
	Now func() time.Time
	// ChatTemplate is the model's chat template and ChatVars the variables
	// it is rendered with (the special tokens), which the engine offers
	// its server (ChatTemplate); nil when the model has none.
	ChatTemplate llm.ChatTemplate
	ChatVars     map[string]any
}

// Engine runs a Backend and implements llm.Engine.
type Engine struct {
	info      llm.ModelInfo
	tok       llm.Tokenizer
	cfg       Config
	st        *stepper // owned by the loop goroutine
	numBlocks int
	log       *slog.Logger
	wake      chan struct{}
	closed    chan struct{} // closed by Close
	done      chan struct{} // closed when the loop exits
	shut      chan struct{} // closed when Close has closed the backend too

	mu        sync.Mutex
	inbox     []*request
	aborts    []kv.SeqID
	nextID    kv.SeqID
	pending   int // admitted, not yet scheduled once: bounded by MaxPending
	inflight  int // admitted, not finished
	draining  bool
	closing   bool
	dead      error
	idleWait  []chan struct{} // Drain callers waiting for inflight == 0
	stats     llm.Stats
	seedState uint64
}

// New builds an engine over backend and starts its loop. info must give the
// vocabulary size and context length, and says which token ends a request:
// the engine stops at info.EOSTokenID, not tok.EOSTokenID(), so set it
// (-1 for none). Because a forgotten field reads as token 0, New refuses an
// info.EOSTokenID of 0 that the tokenizer does not share.
// tok is the model's tokenizer. Example_customBackend shows a Backend
// written from scratch.
func New(backend Backend, tok llm.Tokenizer, info llm.ModelInfo, cfg Config) (*Engine, error) {
	if backend == nil || tok == nil {
		return nil, errors.New("engine: backend and tokenizer are required")
	}
	if info.VocabSize < 1 || info.MaxModelLen < 1 {
		return nil, fmt.Errorf("engine: model info needs VocabSize and MaxModelLen, got %d and %d", info.VocabSize, info.MaxModelLen)
	}
	if err := checkEOS(info, tok); err != nil {
		return nil, err
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPending < 0 {
		return nil, fmt.Errorf("engine: MaxPending must be positive, got %d", cfg.MaxPending)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seed := uint64(cfg.Now().UnixNano())
	if cfg.Seed != nil {
		seed = *cfg.Seed
	}
	st, err := newStepper(backend, tok, info, &cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		info: info, tok: tok, cfg: cfg, st: st, log: cfg.Logger,
		wake: make(chan struct{}, 1), closed: make(chan struct{}), done: make(chan struct{}), shut: make(chan struct{}),
		seedState: seed,
	}
	st.started = e.started
	e.numBlocks = st.kv.NumBlocks()
	e.stats.KVBlocksTotal = e.numBlocks
	e.log.Info("engine started", "model", info.ID, "backend", info.Backend, "random_weights", info.RandomWeights,
		"kv_blocks", st.kv.NumBlocks(), "block_size", st.kv.BlockSize(),
		"max_num_seqs", st.sched.Config().MaxNumSeqs, "max_num_batched_tokens", st.sched.Config().MaxNumBatchedTokens,
		"prefix_caching", st.kv.PrefixCaching(),
		// The seed in force, drawn from the clock or given: with it (--seed)
		// a run's unseeded requests, sent again one at a time, sample again
		// what they sampled.
		"seed", seed)
	go e.loop()
	return e, nil
}

// checkEOS rejects an EOS id outside the vocabulary, and the zero value
// where the tokenizer's EOS is another token: that is almost always a
// ModelInfo whose EOSTokenID was never set, and it would end every request
// at token 0 (GPT-2's "!") instead of at the real end of text.
func checkEOS(info llm.ModelInfo, tok llm.Tokenizer) error {
	if info.EOSTokenID < -1 || info.EOSTokenID >= info.VocabSize {
		return fmt.Errorf("engine: model info's EOSTokenID %d is outside the vocabulary [0, %d) (-1 for none)", info.EOSTokenID, info.VocabSize)
	}
	for _, id := range info.StopTokenIDs {
		if id < 0 || id >= info.VocabSize {
			return fmt.Errorf("engine: model info's stop token id %d is outside the vocabulary [0, %d)", id, info.VocabSize)
		}
	}
	if info.EOSTokenID == 0 && tok.EOSTokenID() != 0 {
		return fmt.Errorf("engine: model info's EOSTokenID is 0 but the tokenizer's EOS is %d: set EOSTokenID (to tok.EOSTokenID(), or -1 for none)", tok.EOSTokenID())
	}
	return nil
}

// Info implements llm.Engine.
func (e *Engine) Info() llm.ModelInfo { return e.info }

// MaxPending is the waiting-queue bound (Config.MaxPending after defaults):
// Generate returns llm.ErrOverloaded while that many requests wait. The
// OpenAI handler reads it (openai.QueueBounder) to answer 400, not a 429
// no retry could clear, to a request with more choices than that.
func (e *Engine) MaxPending() int { return e.cfg.MaxPending }

// Tokenizer implements llm.Engine.
func (e *Engine) Tokenizer() llm.Tokenizer { return e.tok }

var _ llm.ChatTemplater = (*Engine)(nil)

// ChatTemplate implements llm.ChatTemplater with Config.ChatTemplate and
// Config.ChatVars.
func (e *Engine) ChatTemplate() (llm.ChatTemplate, map[string]any) {
	return e.cfg.ChatTemplate, e.cfg.ChatVars
}

// NumKVBlocks is the size of the KV block pool the engine settled on.
func (e *Engine) NumKVBlocks() int { return e.numBlocks }

// Stats implements llm.Engine.
func (e *Engine) Stats() llm.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Waiting += len(e.inbox)
	return s
}

// Health implements llm.Engine.
func (e *Engine) Health() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closing:
		return llm.ErrClosed
	case e.dead != nil:
		return fmt.Errorf("%w: %w", llm.ErrEngineDead, e.dead)
	case e.draining:
		return llm.ErrDraining
	}
	return nil
}

// Generate implements llm.Engine. A nil ctx is an error matching
// llm.ErrInvalidRequest; a ctx already done fails with its error. The
// engine keeps copies of r's slices, maps and pointers, so the caller may
// reuse or change them once Generate returns. The channel is buffered
// (streamBuffer events): what the engine produced while the caller was busy
// is waiting in it, len(ch) events that the caller can take without
// blocking.
func (e *Engine) Generate(ctx context.Context, r llm.Request) (<-chan llm.Event, error) {
	if ctx == nil {
		// The stream's goroutine would dereference it later and take the
		// whole process down, far from the caller's mistake.
		return nil, fmt.Errorf("%w: nil context", llm.ErrInvalidRequest)
	}
	if err := r.Validate(e.info.VocabSize); err != nil {
		return nil, err
	}
	if r.Params.PromptLogprobs != nil && !e.st.promptLogits {
		return nil, &llm.ParamError{Param: "prompt_logprobs", Msg: fmt.Sprintf("the %s backend does not compute prompt log-probabilities", e.info.Backend)}
	}
	if err := llm.CheckContextLength(e.info.MaxModelLen, len(r.PromptTokens), r.Params.MaxTokens); err != nil {
		return nil, err
	}
	if !e.st.sched.Fits(len(r.PromptTokens), r.Params.MaxTokens) { // the pool size never changes
		return nil, fmt.Errorf("%w: %d prompt + %d max tokens need %d blocks, the pool has %d",
			llm.ErrTooLargeForCache, len(r.PromptTokens), r.Params.MaxTokens,
			e.st.kv.BlocksFor(sched.SlotsNeeded(len(r.PromptTokens), r.Params.MaxTokens)), e.st.kv.NumBlocks())
	}
	r.PromptTokens = append([]int(nil), r.PromptTokens...) // the caller keeps its slice
	r.Params.Stop = append([]string(nil), r.Params.Stop...)
	r.Params.StopTokenIDs = append([]int(nil), r.Params.StopTokenIDs...)
	if !r.Params.IgnoreEOS {
		// The model's other end-of-sequence ids (generation_config.json's
		// list) stop it as vLLM's update_from_generation_config makes
		// them: as stop token ids, reported as the stop reason.
		for _, id := range e.info.StopTokenIDs {
			if !slices.Contains(r.Params.StopTokenIDs, id) {
				r.Params.StopTokenIDs = append(r.Params.StopTokenIDs, id)
			}
		}
	}
	r.Params.LogitBias = maps.Clone(r.Params.LogitBias)
	r.Params.AllowedTokenIDs = slices.Clone(r.Params.AllowedTokenIDs)
	r.Params.BadWords = cloneSeqs(r.Params.BadWords)
	// The engine's goroutine reads these during the request's steps: a
	// caller reusing its variable for the next request would race with it.
	r.Params.Logprobs = clonePtr(r.Params.Logprobs)
	r.Params.PromptLogprobs = clonePtr(r.Params.PromptLogprobs)
	if err := ctx.Err(); err != nil {
		// The caller has given up already (a client that hung up while its
		// request was parsed): taking a queue place until the loop's next
		// step boundary would only turn a live request away.
		return nil, err
	}
	s := newStream(ctx)
	now := e.cfg.Now()

	e.mu.Lock()
	switch {
	case e.closing:
		e.mu.Unlock()
		return nil, llm.ErrClosed
	case e.dead != nil:
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", llm.ErrEngineDead, e.dead)
	case e.draining:
		e.mu.Unlock()
		return nil, llm.ErrDraining
	case e.pending >= e.cfg.MaxPending:
		e.mu.Unlock()
		return nil, llm.ErrOverloaded
	}
	e.nextID++
	id := e.nextID
	e.pending++
	e.inflight++
	if r.Params.Seed == nil {
		// Only a request without a seed of its own takes the next one, so
		// that seeded requests sent in between (a probe, a scoring client)
		// leave the unseeded ones' seeds as they were.
		e.seedState = splitmix(e.seedState)
	}
	q := newRequest(id, r, e.tok, e.info.EOSTokenID, e.seedState, s.push, now)
	e.inbox = append(e.inbox, q)
	e.mu.Unlock()
	e.signal()

	go s.forward(func() { e.requestAbort(id) })
	return s.out, nil
}

// cloneSeqs copies a list of token sequences, each sequence too.
func cloneSeqs(seqs [][]int) [][]int {
	if seqs == nil {
		return nil
	}
	out := make([][]int, len(seqs))
	for i, s := range seqs {
		out[i] = slices.Clone(s)
	}
	return out
}

// clonePtr returns a pointer to a copy of *p, or nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// splitmix advances a SplitMix64 state, to derive per-request seeds.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	z := x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// requestAbort queues an abort for the loop to apply at a step boundary.
func (e *Engine) requestAbort(id kv.SeqID) {
	e.mu.Lock()
	e.aborts = append(e.aborts, id)
	e.mu.Unlock()
	e.signal()
}

// Drain implements llm.Engine.
func (e *Engine) Drain(ctx context.Context) error {
	e.mu.Lock()
	if !e.draining {
		e.draining = true
		e.log.Info("engine draining", "in_flight", e.inflight)
	}
	if e.inflight == 0 {
		e.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	e.idleWait = append(e.idleWait, ch)
	e.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		// Take the channel back: a caller polling Drain with short
		// deadlines would otherwise leave one per call until the engine
		// is idle, however long that takes.
		e.mu.Lock()
		if i := slices.Index(e.idleWait, ch); i >= 0 {
			e.idleWait = slices.Delete(e.idleWait, i, i+1)
		}
		e.mu.Unlock()
		return ctx.Err()
	}
}

// Close implements llm.Engine. Running requests end with an abort event
// carrying ErrClosed. The backend is closed if it implements io.Closer.
// Closing again, and Drain after Close, return nil; every Close, the
// first and any at the same time, returns once the backend is closed, so
// that what the caller frees after it is no longer in use.
func (e *Engine) Close() error {
	e.mu.Lock()
	already := e.closing
	e.closing = true
	e.mu.Unlock()
	if already {
		<-e.shut
		return nil
	}
	defer close(e.shut)
	close(e.closed)
	<-e.done
	if c, ok := e.st.backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// started frees the waiting-queue places of n requests the loop has just
// scheduled for the first time (the stepper calls it before their step
// runs, so before any of their events).
func (e *Engine) started(n int) {
	e.mu.Lock()
	e.pending -= n
	e.mu.Unlock()
}

// loop is the engine's one goroutine: it alone touches the stepper.
func (e *Engine) loop() {
	defer close(e.done)
	st := e.st
	for {
		e.mu.Lock()
		inbox, aborts := e.inbox, e.aborts
		e.inbox, e.aborts = nil, nil
		closing, dead := e.closing, e.dead
		e.mu.Unlock()

		for _, q := range inbox {
			if err := catch(func() error { return st.add(q) }); err != nil {
				// Generate checked what could fail; this is a last guard.
				e.log.Error("admitting a request failed", "err", err, stackAttr(err))
				e.mu.Lock()
				e.pending--
				e.mu.Unlock()
				q.sink(llm.Event{Finish: llm.FinishError, Err: err, StopTokenID: -1, Time: e.cfg.Now()})
				e.finished(1)
			}
		}
		n := len(st.reqs)
		for _, id := range aborts {
			if q, ok := st.reqs[id]; ok && !q.scheduled {
				e.mu.Lock()
				e.pending--
				e.mu.Unlock()
			}
			st.abort(id, context.Canceled)
		}
		switch {
		case dead != nil:
			// Requests that reached the inbox before the engine died get
			// the same error as those it was running.
			st.failAll(fmt.Errorf("%w: %w", llm.ErrEngineDead, dead))
		case closing:
			for id := range st.reqs {
				st.abort(id, llm.ErrClosed)
			}
		}
		e.finished(n - len(st.reqs))
		e.publish()
		if closing {
			return
		}

		if st.idle() || dead != nil {
			select {
			case <-e.wake:
			case <-e.closed:
			}
			continue
		}

		before := len(st.reqs)
		err := catch(st.step)
		if err != nil {
			e.log.Error("backend failed; engine is dead", "err", err, stackAttr(err))
			e.mu.Lock()
			e.dead = err
			e.pending = 0
			e.mu.Unlock()
			st.failAll(fmt.Errorf("%w: %w", llm.ErrEngineDead, err))
		}
		e.finished(before - len(st.reqs))
		e.publish()
	}
}

// catch runs f, turning a panic into an error: a bug that one request hits
// in the engine's own code (scheduling, sampling, stop checks) then fails
// requests, and the loop marks the engine dead as after a backend failure,
// instead of taking the whole process, and every other client, down.
func catch(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{what: "engine panic", value: p, stack: debug.Stack()}
		}
	}()
	return f()
}

// panicError is a recovered panic. Its message names the panic; the stack,
// where it happened, is only logged (see stackAttr): the message reaches
// callers and, through the OpenAI handler, every client (a 503's message,
// /health's reason), which have no use for the server's source paths.
type panicError struct {
	what  string // "engine panic", or "panic" inside ErrBackend's wrapping
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("%s: %v", p.what, p.value) }

// stackAttr is the log attribute of the stack of the panic err holds, or,
// for another error, the empty Attr, which handlers leave out.
func stackAttr(err error) slog.Attr {
	if pe, ok := errors.AsType[*panicError](err); ok {
		return slog.String("stack", string(pe.stack))
	}
	return slog.Attr{}
}

// finished records that n requests ended, waking Drain callers at zero.
func (e *Engine) finished(n int) {
	if n == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight -= n
	if e.inflight == 0 {
		for _, ch := range e.idleWait {
			close(ch)
		}
		e.idleWait = nil
	}
}

// publish copies the loop's figures into the snapshot Stats returns.
func (e *Engine) publish() {
	st := e.st
	ss := st.sched.Stats()
	s := llm.Stats{
		Running:          st.sched.NumRunning(),
		Waiting:          st.sched.NumWaiting(),
		KVBlocksTotal:    st.kv.NumBlocks(),
		KVBlocksUsed:     st.kv.NumUsed(),
		KVUsage:          st.kv.Usage(),
		Preemptions:      uint64(ss.Preemptions),
		PromptTokens:     st.counters.promptTokens,
		GenerationTokens: st.counters.generationTokens,
		Steps:            uint64(ss.Steps),
		Finished:         st.counters.finished,
		StepTokens:       st.counters.stepTokens,

		PrefixCacheQueries: uint64(ss.PrefixQueries),
		PrefixCacheHits:    uint64(ss.PrefixHits),
	}
	e.mu.Lock()
	e.stats = s
	e.mu.Unlock()
}
