// Package sched is tinyserve's scheduler: a pure, deterministic state
// machine in the style of vLLM v1's (vllm/v1/core/sched/scheduler.py). There
// are no prefill or decode phases: each sequence has tokens it knows
// (prompt plus generated) and tokens already computed into the KV cache, and
// one token budget per step closes the gap. Running sequences go first (a
// decode is one token), then waiting ones are admitted FCFS with their
// prefill cut to the remaining budget (chunked prefill). When KV blocks run
// out, the most recently admitted running sequence not yet scheduled in this
// step is preempted by recompute: its blocks are freed, it returns to the
// front of the waiting queue and later re-prefills its prompt plus the tokens
// it had generated.
//
// When the KV manager caches prefixes (kv.WithPrefixCaching), a sequence
// being admitted skips the whole blocks at the start of its tokens whose KV
// is already cached (never its last token, which must run to be sampled
// after), and the blocks a step will complete are published as it is
// planned, so that even sequences admitted later in the same step share
// them (vLLM does the same).
//
// Inputs are method calls (Add, Abort, Schedule, Update), outputs are return
// values, and time is the caller's step count: the package uses no
// goroutines, clocks or I/O, and is not safe for concurrent use.
package sched

import (
	"errors"
	"fmt"
	"math"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// Defaults for zero Config fields, as in vLLM.
const (
	DefaultMaxNumSeqs          = 256
	DefaultMaxNumBatchedTokens = 2048
)

// Errors returned by Add and Abort. They leave the scheduler unchanged.
var (
	// ErrTooLarge: prompt plus max_tokens need more blocks than the whole
	// pool has, so the request could never finish.
	ErrTooLarge = errors.New("sched: request can never fit in the KV block pool")
	// ErrDuplicate: a sequence with this id is already known.
	ErrDuplicate = errors.New("sched: duplicate sequence id")
	// ErrUnknown: no sequence with this id is waiting or running.
	ErrUnknown = errors.New("sched: unknown sequence")
	// ErrInvalid: an argument is out of range.
	ErrInvalid = errors.New("sched: invalid argument")
)

// Config bounds each step. Zero fields take the defaults above.
type Config struct {
	// MaxNumSeqs caps the running sequences (vLLM's --max-num-seqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step
	// (vLLM's --max-num-batched-tokens).
	MaxNumBatchedTokens int
}

type state uint8

const (
	stateWaiting state = iota
	stateRunning
)

type seq struct {
	id          kv.SeqID
	tokens      []int // prompt followed by generated tokens
	numPrompt   int
	maxTokens   int
	numComputed int // tokens whose KV is in the cache
	state       state
	everRan     bool // scheduled at least once, so a backend may hold state
	removed     bool // finished or aborted
	uncached    bool // never reuses cached KV (AddUncached)
}

func (s *seq) numGenerated() int { return len(s.tokens) - s.numPrompt }

// Scheduler decides which tokens run in each step.
type Scheduler struct {
	cfg     Config
	kv      *kv.Manager
	seqs    map[kv.SeqID]*seq
	waiting []*seq // front is index 0
	running []*seq // in admission order; may hold removed ones until compactRunning

	numRemovedRunning int

	scheduled []*seq // the last Output's sequences, until Update
	pending   bool   // an Output awaits its Update
	dropped   []kv.SeqID
	out       Output
	stats     Stats
	prefix    []int32 // cached blocks found for an admission, reused
}

// Stats are cumulative counters.
type Stats struct {
	Preemptions int // sequences preempted since start
	Steps       int // Schedule calls that scheduled at least one token
	// PrefixQueries are the prompt tokens of sequences admitted for the
	// first time after a prefix cache lookup (re-admissions after
	// preemption do not count, nor do AddUncached sequences, which never
	// look) and PrefixHits those of them found in the cache, as vLLM's
	// vllm:prefix_cache_queries and vllm:prefix_cache_hits count them.
	// Zero without prefix caching.
	PrefixQueries int
	PrefixHits    int
}

// New returns a scheduler that allocates from m. The scheduler must be the
// only user of m.
func New(cfg Config, m *kv.Manager) (*Scheduler, error) {
	if cfg.MaxNumSeqs == 0 {
		cfg.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if cfg.MaxNumBatchedTokens == 0 {
		cfg.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if cfg.MaxNumSeqs < 1 {
		return nil, fmt.Errorf("%w: MaxNumSeqs must be at least 1, got %d", ErrInvalid, cfg.MaxNumSeqs)
	}
	if cfg.MaxNumBatchedTokens < 1 {
		return nil, fmt.Errorf("%w: MaxNumBatchedTokens must be at least 1, got %d", ErrInvalid, cfg.MaxNumBatchedTokens)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil KV manager", ErrInvalid)
	}
	return &Scheduler{cfg: cfg, kv: m, seqs: make(map[kv.SeqID]*seq)}, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Scheduler) Config() Config { return s.cfg }

// NumWaiting is the number of waiting sequences, preempted ones included.
func (s *Scheduler) NumWaiting() int { return len(s.waiting) }

// NumRunning is the number of running sequences.
func (s *Scheduler) NumRunning() int { return len(s.running) - s.numRemovedRunning }

// Stats returns the cumulative counters.
func (s *Scheduler) Stats() Stats { return s.stats }

// Fits reports whether a sequence of promptTokens plus maxTokens could ever
// fit in the pool; Add rejects those that cannot. The last token sampled
// ends the sequence and is never fed back, so it needs no slot: the
// sequence holds at most promptTokens + maxTokens - 1 tokens' KV
// (SlotsNeeded). It compares without adding, so that a huge maxTokens from
// a client cannot overflow into a sequence that seems to fit.
func (s *Scheduler) Fits(promptTokens, maxTokens int) bool {
	capacity := s.kv.NumBlocks() * s.kv.BlockSize()
	return promptTokens <= capacity && max(maxTokens-1, 0) <= capacity-promptTokens
}

// SlotsNeeded is the most KV slots a sequence of promptTokens and
// maxTokens ever holds: every prompt token and every sampled token but the
// last, which ends it. It saturates rather than overflow.
func SlotsNeeded(promptTokens, maxTokens int) int {
	fed := max(maxTokens-1, 0)
	if fed > math.MaxInt-promptTokens {
		return math.MaxInt
	}
	return promptTokens + fed
}

// Add queues a new sequence at the back of the waiting queue. prompt is
// copied. A sequence whose prompt plus maxTokens can never fit in the pool is
// rejected with ErrTooLarge, and nothing else is affected. maxTokens 0 is a
// sequence that ends at its first sampling point (a prompt that is only
// scored): the token reported there ends it and is never computed, so it
// needs no slot, and a prompt as long as the whole pool fits.
func (s *Scheduler) Add(id kv.SeqID, prompt []int, maxTokens int) error {
	return s.add(id, prompt, maxTokens, false)
}

// AddUncached is Add for a sequence that must compute every prompt token
// even where the prefix cache holds their KV, because its caller needs
// something from each position (prompt log-probabilities). The blocks it
// computes are still published for others.
func (s *Scheduler) AddUncached(id kv.SeqID, prompt []int, maxTokens int) error {
	return s.add(id, prompt, maxTokens, true)
}

func (s *Scheduler) add(id kv.SeqID, prompt []int, maxTokens int, uncached bool) error {
	if len(prompt) == 0 {
		return fmt.Errorf("%w: empty prompt", ErrInvalid)
	}
	if maxTokens < 0 {
		return fmt.Errorf("%w: maxTokens must be non-negative, got %d", ErrInvalid, maxTokens)
	}
	if _, ok := s.seqs[id]; ok {
		return fmt.Errorf("%w: %d", ErrDuplicate, id)
	}
	if !s.Fits(len(prompt), maxTokens) {
		return fmt.Errorf("%w: %d prompt + %d max tokens need %d slots, the pool holds %d tokens (%d blocks of %d)",
			ErrTooLarge, len(prompt), maxTokens, SlotsNeeded(len(prompt), maxTokens), s.kv.NumBlocks()*s.kv.BlockSize(), s.kv.NumBlocks(), s.kv.BlockSize())
	}
	tokens := make([]int, len(prompt), len(prompt)+maxTokens)
	copy(tokens, prompt)
	q := &seq{id: id, tokens: tokens, numPrompt: len(prompt), maxTokens: maxTokens, uncached: uncached}
	s.seqs[id] = q
	s.waiting = append(s.waiting, q)
	return nil
}

// Abort removes a waiting or running sequence and frees its blocks. It may
// be called between Schedule and Update; the aborted sequence's results in
// that Update are then ignored. With prefix caching the step's forward pass
// must still run the aborted sequence as planned: Schedule published the
// blocks it completes, sequences later in the batch may share them, and
// they stay cached for later steps.
func (s *Scheduler) Abort(id kv.SeqID) error {
	q, ok := s.seqs[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknown, id)
	}
	s.remove(q)
	s.compactRunning()
	return nil
}

// remove forgets q wherever it is. A running sequence stays in the running
// list, marked removed, until compactRunning: several finish in one Update,
// and compacting once is linear where deleting each is quadratic.
func (s *Scheduler) remove(q *seq) {
	switch q.state {
	case stateWaiting:
		s.waiting = deleteSeq(s.waiting, q)
	case stateRunning:
		s.numRemovedRunning++
	}
	if s.kv.Has(q.id) {
		// Cannot fail: the scheduler is the only user and checked Has.
		_ = s.kv.Free(q.id)
	}
	if q.everRan {
		s.dropped = append(s.dropped, q.id)
	}
	q.removed = true
	delete(s.seqs, q.id)
}

// compactRunning drops removed sequences from the running list, keeping
// admission order.
func (s *Scheduler) compactRunning() {
	if s.numRemovedRunning == 0 {
		return
	}
	kept := s.running[:0]
	for _, q := range s.running {
		if !q.removed {
			kept = append(kept, q)
		}
	}
	clear(s.running[len(kept):])
	s.running = kept
	s.numRemovedRunning = 0
}

func deleteSeq(list []*seq, q *seq) []*seq {
	for i, x := range list {
		if x == q {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// Sampled is the engine's result for one sequence of the last Output.
type Sampled struct {
	ID kv.SeqID
	// Token is the token sampled after the sequence's last scheduled token.
	Token int
	// Finished ends the sequence after Token (a stop condition fired).
	Finished bool
}

// Update records that the last Output ran: every scheduled sequence's
// tokens are now computed, and each entry of sampled appends its token.
// Sequences that finish (sampled with Finished, or reaching their
// maxTokens) are removed and their blocks freed; their ids are returned in
// the order of sampled. sampled must hold exactly the scheduled sequences
// with Sample set, in batch order, except sequences aborted since Schedule.
func (s *Scheduler) Update(sampled []Sampled) ([]kv.SeqID, error) {
	if !s.pending {
		if len(sampled) > 0 {
			return nil, fmt.Errorf("%w: Update without a pending Schedule", ErrInvalid)
		}
		return nil, nil
	}
	s.pending = false
	for i, q := range s.scheduled { // index-aligned with s.out.Scheduled
		if !q.removed { // not aborted after Schedule
			q.numComputed += len(s.out.Scheduled[i].Tokens)
		}
	}
	var finished []kv.SeqID
	var err error
	next := 0 // sampled is in batch order: walk s.scheduled alongside it
	for _, r := range sampled {
		for next < len(s.scheduled) && s.scheduled[next].id != r.ID {
			next++
		}
		if next == len(s.scheduled) {
			return finished, fmt.Errorf("%w: sampled seq %d is not in the last step, or out of batch order", ErrInvalid, r.ID)
		}
		q := s.scheduled[next]
		next++
		if q.removed {
			continue // aborted after Schedule
		}
		if q.numComputed != len(q.tokens) {
			err = fmt.Errorf("%w: seq %d was not due for sampling", ErrInvalid, r.ID)
			continue
		}
		q.tokens = append(q.tokens, r.Token)
		if r.Finished || q.numGenerated() >= q.maxTokens {
			finished = append(finished, q.id)
			s.remove(q)
		}
	}
	s.compactRunning()
	return finished, err
}
