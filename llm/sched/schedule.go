package sched

import "github.com/tinyserve/tinyserve/llm/kv"

// Output is one step's plan, the scheduler's equivalent of vLLM's
// SchedulerOutput (vllm/v1/core/sched/output.py) and raft's Ready. Its
// slices are in batch order and belong to the scheduler: they are valid
// until the next call to Schedule.
//
// The engine acts on it in this order: backends forget Dropped sequences,
// the forward pass runs Scheduled, the engine samples the rows with Sample
// set, and Update reports the results. The scheduler assumes nothing ran
// until Update says so.
type Output struct {
	// Scheduled are the sequences to run: previously running ones first, in
	// admission order, then newly admitted ones, FCFS.
	Scheduled []Scheduled
	// NumTokens is the sum of len(Scheduled[i].Tokens); never more than the
	// token budget.
	NumTokens int
	// Preempted are the sequences preempted in this step, now waiting.
	Preempted []kv.SeqID
	// Dropped are sequences whose backend state must be forgotten: finished
	// or aborted since the previous Schedule, and preempted in this one.
	Dropped []kv.SeqID

	tokenArena []int
	blockArena []int32
	moved      bool // an arena grew during this step: views need fixing
}

// Scheduled is one sequence's part of a step.
type Scheduled struct {
	ID kv.SeqID
	// Tokens to compute, at positions StartPos, StartPos+1, ...
	Tokens []int
	// StartPos is the number of the sequence's tokens already in the cache.
	StartPos int
	// BlockTable covers at least StartPos+len(Tokens) positions.
	BlockTable []int32
	// Sample is true when this step reaches the end of the sequence's known
	// tokens, so the engine samples the next token after it.
	Sample bool
	// First is true the first time the sequence is ever scheduled.
	First bool
	// NumGenerated is the number of tokens generated so far (recomputed ones
	// after a preemption included).
	NumGenerated int
}

// Schedule plans the next step. Calling it again before Update is an
// error-free no-op that returns the same plan.
func (s *Scheduler) Schedule() *Output {
	if s.pending {
		return &s.out
	}
	s.compactRunning()
	out := &s.out
	out.Scheduled = out.Scheduled[:0]
	out.Preempted = out.Preempted[:0]
	out.Dropped = append(out.Dropped[:0], s.dropped...)
	s.dropped = s.dropped[:0]
	out.NumTokens = 0
	// Arenas big enough for most steps, so views rarely go stale as they
	// fill: a step runs at most the budget in tokens, each of them in a KV
	// slot of its own (so at most the pool's tokens however large the
	// budget), and tables hold at most the pool unless sequences share
	// cached blocks (then the block arena grows and plan notes it).
	if n := min(s.cfg.MaxNumBatchedTokens, s.kv.NumBlocks()*s.kv.BlockSize()); cap(out.tokenArena) < n {
		out.tokenArena = make([]int, 0, n)
	}
	if cap(out.blockArena) < s.kv.NumBlocks() {
		out.blockArena = make([]int32, 0, s.kv.NumBlocks())
	}
	out.tokenArena = out.tokenArena[:0]
	out.blockArena = out.blockArena[:0]
	out.moved = false
	s.scheduled = s.scheduled[:0]

	budget := s.cfg.MaxNumBatchedTokens
	preempted := false

	// Running sequences first, in admission order.
	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		n := min(len(q.tokens)-q.numComputed, budget)
		if n <= 0 {
			continue
		}
		selfPreempted := false
		for !s.tryAllocate(q, n) {
			// Preempt the most recently admitted running sequence; all of
			// running[:i] are scheduled this step and are never chosen.
			victim := s.running[len(s.running)-1]
			s.preempt(victim, out)
			preempted = true
			if victim == q {
				selfPreempted = true
				break
			}
		}
		if selfPreempted {
			break
		}
		s.plan(q, n, out)
		budget -= n
	}

	// Then waiting ones, FCFS, unless this step had to preempt (the pool is
	// short, so admitting more would only thrash).
	for !preempted && budget > 0 && len(s.waiting) > 0 && len(s.running) < s.cfg.MaxNumSeqs {
		q := s.waiting[0]
		n, ok := s.allocateAdmission(q, budget)
		if !ok {
			break // head-of-line: later requests wait their turn
		}
		s.waiting = s.waiting[1:]
		q.state = stateRunning
		s.running = append(s.running, q)
		s.plan(q, n, out)
		budget -= n
	}

	if out.moved {
		fixArenaViews(out)
	}
	if len(out.Scheduled) == 0 {
		// No forward pass will carry the drops to the backend: keep them
		// for the next step that runs.
		s.dropped = append(s.dropped, out.Dropped...)
		out.Dropped = out.Dropped[:0]
		return out
	}
	s.stats.Steps++
	s.pending = true
	return out
}

// allocateAdmission gives a waiting q (which holds no blocks) the cached
// blocks of its longest cached prefix and new ones for up to budget more
// tokens, and returns how many tokens it runs this step; false (changing
// nothing) when the pool is short.
func (s *Scheduler) allocateAdmission(q *seq, budget int) (int, bool) {
	s.prefix = s.prefix[:0]
	lookup := s.kv.PrefixCaching() && !q.uncached
	if lookup {
		// Never the last known token: the step must compute it to sample
		// after it.
		s.prefix = s.kv.CachedPrefix(s.prefix, q.tokens[:len(q.tokens)-1])
	}
	cached := len(s.prefix) * s.kv.BlockSize()
	n := min(len(q.tokens)-cached, budget)
	// The only possible errors are misuse (q holding blocks, a stale
	// prefix), which the scheduler's own bookkeeping rules out.
	if ok, _ := s.kv.AllocateWithPrefix(q.id, s.prefix, cached+n); !ok {
		return 0, false
	}
	q.numComputed = cached
	if lookup && !q.everRan {
		// Only first admissions count, as in vLLM: a preempted sequence
		// mostly finds its own blocks again, which says nothing about
		// prompts sharing prefixes.
		s.stats.PrefixQueries += len(q.tokens)
		s.stats.PrefixHits += cached
	}
	return n, true
}

// tryAllocate gives q blocks for n more tokens; false (changing nothing)
// when the pool is short.
func (s *Scheduler) tryAllocate(q *seq, n int) bool {
	// The only possible error is a negative count, which cannot happen here.
	ok, _ := s.kv.Allocate(q.id, q.numComputed+n)
	return ok
}

// plan adds q's next n tokens to the step: their row in out, and the
// blocks they complete published for reuse.
func (s *Scheduler) plan(q *seq, n int, out *Output) {
	t0, tc := len(out.tokenArena), cap(out.tokenArena)
	out.tokenArena = append(out.tokenArena, q.tokens[q.numComputed:q.numComputed+n]...)
	b0, bc := len(out.blockArena), cap(out.blockArena)
	out.blockArena = s.kv.AppendBlockTable(out.blockArena, q.id)
	out.moved = out.moved || cap(out.tokenArena) != tc || cap(out.blockArena) != bc
	out.Scheduled = append(out.Scheduled, Scheduled{
		ID:           q.id,
		StartPos:     q.numComputed,
		Sample:       q.numComputed+n == len(q.tokens),
		First:        !q.everRan,
		NumGenerated: q.numGenerated(),
		// Tokens and BlockTable are set below, once the arenas stop growing.
	})
	out.NumTokens += n
	s.scheduled = append(s.scheduled, q)
	q.everRan = true
	// Publish the blocks this step completes now rather than at Update, so
	// that sequences admitted later in this step share them (n choices of
	// one prompt, a burst with one system prompt): the forward pass writes
	// each layer's K and V for the whole batch before attention reads any,
	// and they come later in the batch. Cannot fail: q holds the blocks.
	_ = s.kv.CacheBlocks(q.id, q.tokens, q.numComputed+n)
	// If an arena grew, earlier views went stale; only their lengths matter
	// until fixArenaViews re-slices them at the end of Schedule.
	last := &out.Scheduled[len(out.Scheduled)-1]
	last.Tokens = out.tokenArena[t0 : t0+n : t0+n]
	last.BlockTable = out.blockArena[b0:len(out.blockArena):len(out.blockArena)]
}

// fixArenaViews re-slices every Scheduled view into the arenas' final arrays.
func fixArenaViews(out *Output) {
	t, b := 0, 0
	for i := range out.Scheduled {
		sc := &out.Scheduled[i]
		nt, nb := len(sc.Tokens), len(sc.BlockTable)
		sc.Tokens = out.tokenArena[t : t+nt : t+nt]
		sc.BlockTable = out.blockArena[b : b+nb : b+nb]
		t += nt
		b += nb
	}
}

func (s *Scheduler) preempt(q *seq, out *Output) {
	s.running = deleteSeq(s.running, q)
	_ = s.kv.Free(q.id) // a running sequence always holds blocks
	q.numComputed = 0
	q.state = stateWaiting
	// Prepend: victims are taken newest first, so the oldest ends in front.
	s.waiting = append(s.waiting, nil)
	copy(s.waiting[1:], s.waiting)
	s.waiting[0] = q
	out.Preempted = append(out.Preempted, q.id)
	out.Dropped = append(out.Dropped, q.id)
	s.stats.Preemptions++
}
