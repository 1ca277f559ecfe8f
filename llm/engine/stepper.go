package engine

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/sched"
)

var negInf = math.Inf(-1)

// stepper is the engine without its goroutine: scheduler, KV manager,
// backend and sampling, driven one step at a time. The package's benchmarks
// use it directly; Engine wraps it in one loop goroutine. Not safe for
// concurrent use.
type stepper struct {
	backend Backend
	tok     llm.Tokenizer
	info    llm.ModelInfo
	kv      *kv.Manager
	sched   *sched.Scheduler
	now     func() time.Time

	reqs     map[kv.SeqID]*request
	sampler  sampler
	maskBuf  []float32 // a copy of a logits row for masking
	lpBuf    []float32 // logprobsOf's scratch
	batch    Batch
	sampled  []sched.Sampled
	counters counters

	// promptLogits is whether the backend returns a row per position
	// (PromptLogitsBackend), which prompt log-probabilities need.
	promptLogits bool
	// started, when set, is called in each step that schedules requests for
	// the first time, with their number, before the backend runs and so
	// before any of their events: the engine frees their waiting-queue
	// places then, so that a caller who saw ErrOverloaded and retries when
	// another request starts or ends is not refused for a place already
	// free.
	started func(n int)

	// Per step, in batch order of the sampled sequences.
	sampleReqs []*request
	needLogits []bool
	sampleAt   []int // the index of each sampled sequence's row
	// Per step, in batch order: the sequences whose prompt positions
	// return rows, and the number of rows the backend must return.
	promptSpans []promptSpan
	scoreTasks  []scoreTask
	scoreBufs   [][]float32 // logprobsOf's scratch, one per scoring goroutine
	numRows     int
}

type counters struct {
	promptTokens, generationTokens, finished uint64
	stepTokens                               llm.StepTokenCounts
}

// ErrBackend wraps every error (or recovered panic) of Backend.Forward.
var ErrBackend = errors.New("backend failed")

// newStepper sizes the KV pool with the backend and builds the scheduler.
func newStepper(b Backend, tok llm.Tokenizer, info llm.ModelInfo, cfg *Config) (*stepper, error) {
	blockSize := cfg.BlockSize
	if blockSize == 0 {
		blockSize = kv.DefaultBlockSize
	}
	// A block longer than the context could never fill; and a bound here
	// keeps backends' bytes-per-block products far from overflow.
	if maxBlock := max(info.MaxModelLen, kv.DefaultBlockSize); blockSize < 1 || blockSize > maxBlock {
		return nil, fmt.Errorf("engine: block size must be in [1, %d] (the model's context length), got %d", maxBlock, blockSize)
	}
	if cfg.NumBlocks < 0 {
		return nil, fmt.Errorf("engine: NumBlocks must not be negative (0 for what the backend can hold), got %d", cfg.NumBlocks)
	}
	capacity, err := b.MaxKVBlocks(blockSize)
	if err != nil {
		return nil, fmt.Errorf("engine: sizing the KV cache: %w", err)
	}
	numBlocks := capacity
	if cfg.NumBlocks > 0 {
		numBlocks = min(cfg.NumBlocks, capacity)
		// Say so: an operator who asked for more blocks than fit would
		// otherwise believe the pool holds them.
		if cfg.NumBlocks > capacity && cfg.Logger != nil {
			cfg.Logger.Warn("num_blocks capped at what the backend can hold",
				"asked", cfg.NumBlocks, "blocks", capacity, "why", "the backend's KV memory budget (--kv-cache-bytes, or its default) holds no more")
		}
	}
	// Blocks past what max_num_seqs sequences of the full context hold
	// could never be in use at once (waiting and preempted sequences hold
	// none), so a budget larger than that (a huge --kv-cache-bytes, most
	// of a large GPU's memory) is not spent on them.
	maxSeqs := cfg.MaxNumSeqs
	if maxSeqs <= 0 {
		maxSeqs = sched.DefaultMaxNumSeqs // sched.New rejects a negative one below
	}
	// With prefix caching they are not wasted: they keep cached prefixes
	// (vLLM sizes its pool by memory alone).
	// maxSeqs is compared before it is multiplied: a huge one (MaxInt for
	// "no limit") would overflow the product into a negative pool.
	perSeq := (info.MaxModelLen + blockSize - 1) / blockSize
	if useful := maxSeqs * perSeq; maxSeqs > 0 && maxSeqs <= numBlocks/perSeq && numBlocks > useful && !cfg.PrefixCaching {
		if cfg.Logger != nil {
			cfg.Logger.Info("KV cache capped at what max_num_seqs full-length sequences can use",
				"blocks", useful, "the budget allows", numBlocks)
		}
		numBlocks = useful
	}
	if numBlocks < 1 {
		return nil, fmt.Errorf("engine: the backend can hold no KV block of %d tokens", blockSize)
	}
	var kvOpts []kv.Option
	if cfg.PrefixCaching {
		kvOpts = append(kvOpts, kv.WithPrefixCaching())
	}
	m, err := kv.New(numBlocks, blockSize, kvOpts...)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	s, err := sched.New(sched.Config{MaxNumSeqs: cfg.MaxNumSeqs, MaxNumBatchedTokens: cfg.MaxNumBatchedTokens}, m)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := b.AllocateKV(numBlocks, blockSize); err != nil {
		return nil, fmt.Errorf("engine: allocating the KV cache (%d blocks of %d tokens): %w", numBlocks, blockSize, err)
	}
	st := &stepper{backend: b, tok: tok, info: info, kv: m, sched: s, now: cfg.Now, reqs: map[kv.SeqID]*request{}}
	if pb, ok := b.(PromptLogitsBackend); ok {
		st.promptLogits = pb.ReturnsPromptLogits()
	}
	return st, nil
}

// add admits q to the scheduler.
func (st *stepper) add(q *request) error {
	// A request that runs its prompt only (MaxTokens 0) ends at its
	// sampling point, where the scheduler ends a sequence of maxTokens 0
	// too. Telling it one token instead would refuse a prompt as long as
	// the whole pool (max_num_seqs 1 and a full context), which Generate
	// accepted.
	add := st.sched.Add
	if q.params.PromptLogprobs != nil {
		add = st.sched.AddUncached // every position must run to be scored
	}
	if err := add(q.id, q.req.PromptTokens, q.params.MaxTokens); err != nil {
		if errors.Is(err, sched.ErrTooLarge) {
			return fmt.Errorf("%w: %v", llm.ErrTooLargeForCache, err)
		}
		return err
	}
	st.reqs[q.id] = q
	return nil
}

// retire marks q finished at now and forgets it; its final event is the
// caller's to send.
func (st *stepper) retire(q *request, now time.Time) {
	q.times.Finish = now
	q.done = true
	delete(st.reqs, q.id)
	st.counters.finished++
}

// failRequest ends q, whose token was to be sampled this step, with an
// error of its own making; the rest of the step goes on.
func (st *stepper) failRequest(q *request, err error, now time.Time) {
	st.retire(q, now)
	st.sampled = append(st.sampled, sched.Sampled{ID: q.id, Finished: true})
	q.sink(llm.Event{Finish: llm.FinishError, Err: err, StopTokenID: -1, PromptTokens: len(q.req.PromptTokens),
		CachedPromptTokens: q.cachedTokens, CompletionTokens: q.generated, Time: now, Times: q.times})
}

// finish ends q with a final event.
func (st *stepper) finish(q *request, reason llm.FinishReason, err error) {
	now := st.now()
	st.retire(q, now)
	q.sink(llm.Event{Finish: reason, Err: err, StopTokenID: -1, PromptTokens: len(q.req.PromptTokens), CachedPromptTokens: q.cachedTokens, CompletionTokens: q.generated, Time: now, Times: q.times})
}

// abort removes a request wherever it is and sends its final abort event.
func (st *stepper) abort(id kv.SeqID, err error) {
	q, ok := st.reqs[id]
	if !ok {
		return // already finished: the abort raced with the last token
	}
	_ = st.sched.Abort(id) // cannot fail: every live request is known to sched
	st.finish(q, llm.FinishAbort, err)
}

// failAll ends every request with an error event.
func (st *stepper) failAll(err error) {
	for id, q := range st.reqs {
		_ = st.sched.Abort(id)
		st.finish(q, llm.FinishError, err)
	}
}

// idle reports whether there is nothing to run.
func (st *stepper) idle() bool { return len(st.reqs) == 0 }

// step runs one engine step: schedule, forward, sample, update, emit. It
// returns any backend error; on a backend error the requests of the step
// are not updated and the caller must fail them.
func (st *stepper) step() error {
	out := st.sched.Schedule()
	if len(out.Scheduled) == 0 {
		return nil
	}
	firstScheduled := 0
	now := st.now()
	b := &st.batch
	b.Seqs = b.Seqs[:0]
	b.Dropped = append(b.Dropped[:0], out.Dropped...)
	b.NumTokens = out.NumTokens
	st.sampleReqs = st.sampleReqs[:0]
	st.needLogits = st.needLogits[:0]
	st.sampleAt = st.sampleAt[:0]
	st.promptSpans = st.promptSpans[:0]
	st.numRows = 0
	for _, sc := range out.Scheduled {
		q := st.reqs[sc.ID]
		need := sc.Sample && q.needLogits()
		prompt := st.promptLogits && q.wantsPromptLogits(sc.StartPos)
		rows := 0
		if prompt {
			st.promptSpans = append(st.promptSpans, promptSpan{q: q, row: st.numRows, start: sc.StartPos, n: len(sc.Tokens)})
			rows = len(sc.Tokens)
		} else if sc.Sample {
			rows = 1
		}
		if sc.Sample {
			st.sampleReqs = append(st.sampleReqs, q)
			st.needLogits = append(st.needLogits, need)
			st.sampleAt = append(st.sampleAt, st.numRows+rows-1)
		}
		st.numRows += rows
		if sc.First {
			firstScheduled++
			q.times.FirstScheduled = now
			q.scheduled = true
			q.cachedTokens = sc.StartPos // a first chunk starts after the cached prefix
			st.counters.promptTokens += uint64(len(q.req.PromptTokens))
		}
		b.Seqs = append(b.Seqs, SeqBatch{
			ID: sc.ID, Tokens: sc.Tokens, StartPos: sc.StartPos, BlockTable: sc.BlockTable,
			Sample: sc.Sample, NeedLogits: need, PromptLogits: prompt,
		})
	}
	if firstScheduled > 0 && st.started != nil {
		st.started(firstScheduled)
	}
	rows, err := st.forward(b)
	if err != nil {
		return err
	}
	if len(rows) != st.numRows {
		return fmt.Errorf("%w: %d rows returned, %d expected", ErrBackend, len(rows), st.numRows)
	}
	if err := st.promptLogprobs(rows); err != nil {
		return err
	}
	now = st.now()
	st.sampled = st.sampled[:0]
	// The step's tokens as vLLM's vllm:iteration_tokens_total counts them:
	// the whole prompt of each request whose prefill completed, plus the
	// tokens sampled.
	iterTokens := 0
	for r, q := range st.sampleReqs {
		if q.params.MaxTokens == 0 {
			iterTokens += len(q.req.PromptTokens)
			st.finishPromptOnly(q, now)
			continue
		}
		tok, lp, err := st.choose(q, st.needLogits[r], rows[st.sampleAt[r]])
		if errors.Is(err, llm.ErrInvalidRequest) {
			// The request's own constraints leave nothing to sample: it
			// fails, the engine and the batch go on.
			if q.generated == 0 {
				iterTokens += len(q.req.PromptTokens) // its prefill completed
			}
			st.failRequest(q, err, now)
			continue
		}
		if err != nil {
			return err
		}
		ev := q.accept(tok, lp, now)
		if q.generated == 1 {
			ev.PromptLogprobs = q.takePromptLP()
			iterTokens += len(q.req.PromptTokens)
		}
		iterTokens++
		st.counters.generationTokens++
		st.sampled = append(st.sampled, sched.Sampled{ID: q.id, Token: tok, Finished: ev.Finish != ""})
		// Events only go into the request's queue, so sending before the
		// scheduler's Update is safe: nobody can act on them within the step.
		if ev.Finish != "" {
			st.retire(q, now)
		}
		if q.generated == 1 || ev.Finish != "" { // the only events whose times are new
			ev.Times = q.times
		}
		q.sink(ev)
	}
	st.counters.stepTokens.Observe(iterTokens)
	if _, err := st.sched.Update(st.sampled); err != nil {
		return fmt.Errorf("engine: scheduler update: %w", err)
	}
	return nil
}

// choose picks the token of one sampled row.
func (st *stepper) choose(q *request, needLogits bool, row SampleRow) (int, *llm.TokenLogprob, error) {
	if !needLogits && row.Logits == nil {
		if row.Argmax < 0 || row.Argmax >= st.info.VocabSize {
			return 0, nil, fmt.Errorf("%w: argmax %d outside the vocabulary", ErrBackend, row.Argmax)
		}
		return row.Argmax, nil, nil
	}
	if len(row.Logits) != st.info.VocabSize {
		return 0, nil, fmt.Errorf("%w: logits row of %d, vocabulary of %d", ErrBackend, len(row.Logits), st.info.VocabSize)
	}
	// Bias, penalties and masking work on a copy: the row belongs to the
	// backend, which may return it again (a table of logits), and
	// log-probabilities are of the model's own distribution.
	raw, logits := row.Logits, row.Logits
	if q.adjusted() {
		st.maskBuf = append(st.maskBuf[:0], row.Logits...)
		logits = st.maskBuf
		q.adjust(logits)
		if !q.anyAllowed(logits) {
			param := "allowed_token_ids"
			if len(q.params.AllowedTokenIDs) == 0 {
				param = "stop_token_ids" // with min_tokens and bad_words, on a tiny vocabulary
			}
			return 0, nil, &llm.ParamError{Param: param, Msg: fmt.Sprintf(
				"no token may follow the %d generated: allowed_token_ids, bad_words, min_tokens and stop_token_ids together ban every one", q.generated)}
		}
	}
	tok := st.sampler.sample(logits, q.params, q.rng)
	if q.params.Logprobs == nil {
		return tok, nil, nil
	}
	lp := logprobsOf(raw, tok, *q.params.Logprobs, &st.lpBuf)
	return tok, &lp, nil
}

// forward calls the backend, turning a panic into an error so that a bad
// step fails its requests instead of the process.
func (st *stepper) forward(b *Batch) (rows []SampleRow, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %w", ErrBackend, &panicError{what: "panic", value: p, stack: debug.Stack()})
		}
	}()
	rows, err = st.backend.Forward(b)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrBackend, err)
	}
	return rows, err
}
