package sched

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// FuzzSchedule reads its input as a pool, a config and a script of adds,
// aborts (of waiting, running and preempted sequences, between steps and
// between Schedule and Update), early finishes and steps, then runs
// whatever is left to completion. On top of checkOutput's checks on every
// step (budget, max_num_seqs, the right tokens at the right positions, KV
// contents), it holds the scheduler to vLLM v1's policy
// (vllm/v1/core/sched/scheduler.py, schedule) by a model of the running
// and waiting queues kept beside it:
//
//   - previously running sequences come first, in admission order, each
//     with min(its remaining tokens, the budget left) tokens; one is left
//     out only when the budget is spent or it was preempted;
//   - victims are the most recently admitted running sequences, newest
//     first, and go back to the front of the waiting queue, oldest first;
//   - a step that preempted admits nothing; otherwise admissions are the
//     head of the waiting queue in order (preempted ones first, then FCFS);
//   - the head is left waiting with budget and a seat to spare only when
//     the pool cannot hold its chunk (checked without prefix caching,
//     where the chunk's block count is exact);
//   - every sequence ends (no starvation, no livelock), with exactly the
//     tokens it asked for, and the pool ends empty.
func FuzzSchedule(f *testing.F) {
	// Seeds: a tiny pool that forces preemption, a long prompt chunked by
	// a small budget, prefix sharing with aborts, max_num_seqs 1.
	f.Add([]byte{3, 4, 2, 8, 0, 0, 10, 5, 0, 12, 6, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{7, 1, 30, 5, 0, 0, 60, 2, 0, 2, 1, 1, 1, 2, 0, 1, 1, 1, 1})
	f.Add([]byte{15, 3, 4, 16, 1, 0, 9, 7, 0, 9, 7, 1, 1, 3, 1, 0, 9, 3, 4, 0, 1, 1, 5, 2, 1, 1, 1})
	f.Add([]byte{5, 0, 0, 3, 0, 0, 4, 4, 0, 4, 4, 0, 4, 4, 1, 1, 3, 2, 1, 1, 1, 1})
	f.Add([]byte{2, 2, 7, 7, 1, 0, 20, 3, 0, 20, 3, 1, 4, 1, 1, 5, 0, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := fuzzTrial(data); err != nil {
			t.Fatal(err)
		}
	})
}

// byteReader hands out the fuzz input a byte at a time, zeros once it runs
// out.
type byteReader struct {
	data []byte
	i    int
}

func (r *byteReader) next() int {
	if r.i >= len(r.data) {
		r.i++
		return 0
	}
	r.i++
	return int(r.data[r.i-1])
}

func (r *byteReader) done() bool { return r.i >= len(r.data) }

func fuzzTrial(data []byte) error {
	in := &byteReader{data: data}
	numBlocks := 1 + in.next()%32
	blockSize := 1 + in.next()%8
	cfg := Config{MaxNumSeqs: 1 + in.next()%6, MaxNumBatchedTokens: 1 + in.next()%48}
	caching := in.next()%2 == 1
	var opts []kv.Option
	if caching {
		opts = append(opts, kv.WithPrefixCaching())
	}
	m, err := kv.New(numBlocks, blockSize, opts...)
	if err != nil {
		return err
	}
	s, err := New(cfg, m)
	if err != nil {
		return err
	}
	slots := make([]uint64, numBlocks*blockSize)
	reqs := map[kv.SeqID]*request{}
	var addOrder, firstOrder []kv.SeqID
	var running, waiting []kv.SeqID // the model of the scheduler's queues
	nextID := kv.SeqID(1)
	reused := 0
	live := func(id kv.SeqID) bool { r := reqs[id]; return r != nil && !r.done && !r.aborted }
	abort := func(id kv.SeqID) error {
		if err := s.Abort(id); (err == nil) != live(id) {
			return fmt.Errorf("abort %d (live %v): %v", id, live(id), err)
		}
		if live(id) {
			reqs[id].aborted = true
			running = slices.DeleteFunc(running, func(x kv.SeqID) bool { return x == id })
			waiting = slices.DeleteFunc(waiting, func(x kv.SeqID) bool { return x == id })
		}
		return m.Check()
	}
	step := func(finishMask int, abortInStep int) (bool, error) {
		freeBefore := m.NumFree()
		out := s.Schedule()
		if len(out.Scheduled) == 0 {
			if len(running)+len(waiting) > 0 {
				return false, fmt.Errorf("nothing scheduled with %v running, %v waiting (%d of %d blocks free before)", running, waiting, freeBefore, numBlocks)
			}
			return false, nil
		}
		if err := checkPolicy(out, cfg, m, reqs, &running, &waiting, caching); err != nil {
			return false, err
		}
		if err := checkOutput(out, cfg, m, reqs, &firstOrder, slots, &reused); err != nil {
			return false, err
		}
		abortedInStep := map[kv.SeqID]bool{}
		if abortInStep > 0 && len(addOrder) > 0 {
			id := addOrder[(abortInStep-1)%len(addOrder)]
			if live(id) {
				abortedInStep[id] = true
			}
			if err := abort(id); err != nil {
				return false, err
			}
		}
		var sampled []Sampled
		for k, sc := range out.Scheduled {
			r := reqs[sc.ID]
			r.computed = sc.StartPos + len(sc.Tokens)
			if abortedInStep[sc.ID] || !sc.Sample {
				continue
			}
			tok := int(r.id)*100000 + 50000 + len(r.generated)
			r.generated = append(r.generated, tok)
			finish := r.maxTokens == 0 || finishMask>>(k%8)&1 == 1
			if finish {
				r.stopAfter = len(r.generated)
			}
			sampled = append(sampled, Sampled{ID: sc.ID, Token: tok, Finished: finish})
		}
		finished, err := s.Update(sampled)
		if err != nil {
			return false, err
		}
		for _, id := range finished {
			r := reqs[id]
			want := max(r.maxTokens, 1)
			if r.stopAfter > 0 {
				want = r.stopAfter
			}
			if len(r.generated) != want {
				return false, fmt.Errorf("seq %d finished with %d tokens, want %d", id, len(r.generated), want)
			}
			r.done = true
			running = slices.DeleteFunc(running, func(x kv.SeqID) bool { return x == id })
		}
		// Everyone who reached maxTokens must have finished.
		for _, id := range running {
			if r := reqs[id]; r.maxTokens > 0 && len(r.generated) >= r.maxTokens {
				return false, fmt.Errorf("seq %d has %d of %d tokens and still runs", id, len(r.generated), r.maxTokens)
			}
		}
		if s.NumRunning() != len(running) || s.NumWaiting() != len(waiting) {
			return false, fmt.Errorf("scheduler has %d running, %d waiting; model %v, %v", s.NumRunning(), s.NumWaiting(), running, waiting)
		}
		return true, m.Check()
	}

	for !in.done() {
		switch op := in.next(); op % 6 {
		case 0, 1: // add
			r := &request{id: nextID, maxTokens: in.next() % 12}
			r.prompt = make([]int, 1+in.next()%40)
			// Prompts share a stem (so the prefix cache has something to
			// find) up to a point that the op byte picks.
			diverge := (op / 6) % (len(r.prompt) + 1)
			for i := range r.prompt {
				r.prompt[i] = i
				if i >= diverge {
					r.prompt[i] = int(nextID)*100000 + i
				}
			}
			nextID++
			err := s.Add(r.id, r.prompt, r.maxTokens)
			if fits := m.BlocksFor(SlotsNeeded(len(r.prompt), r.maxTokens)) <= numBlocks; fits != (err == nil) {
				return fmt.Errorf("add %d (%d+%d tokens, pool %dx%d): fits=%v err=%v", r.id, len(r.prompt), r.maxTokens, numBlocks, blockSize, fits, err)
			}
			if err == nil {
				reqs[r.id] = r
				addOrder = append(addOrder, r.id)
				waiting = append(waiting, r.id)
			}
		case 2: // abort any sequence ever added, live or not
			if len(addOrder) > 0 {
				if err := abort(addOrder[in.next()%len(addOrder)]); err != nil {
					return err
				}
			}
		case 3, 4: // a plain step
			if _, err := step(0, 0); err != nil {
				return err
			}
		case 5: // a step with early finishes and maybe an abort inside it
			if _, err := step(in.next(), in.next()%4); err != nil {
				return err
			}
		}
		if err := m.Check(); err != nil {
			return err
		}
	}
	// Run to completion: each step makes progress, so the pool's tokens
	// times the sequences bound the steps.
	limit := 10 + len(reqs)*(numBlocks*blockSize+12)*4
	for n := 0; ; n++ {
		if n > limit {
			return fmt.Errorf("no completion after %d steps: %v running, %v waiting", n, running, waiting)
		}
		ran, err := step(0, 0)
		if err != nil {
			return err
		}
		if !ran {
			break
		}
	}
	return checkEnd(m, reqs, addOrder, firstOrder)
}

// checkPolicy checks one step's plan against the model queues and moves
// them on to what the plan does: see FuzzSchedule.
func checkPolicy(out *Output, cfg Config, m *kv.Manager, reqs map[kv.SeqID]*request, running, waiting *[]kv.SeqID, caching bool) error {
	R, W := *running, *waiting
	// Victims: the newest of R, newest first.
	if len(out.Preempted) > len(R) {
		return fmt.Errorf("%d preempted of %d running", len(out.Preempted), len(R))
	}
	for k, id := range out.Preempted {
		if want := R[len(R)-1-k]; id != want {
			return fmt.Errorf("preempted %v, running %v: victim %d should be %d", out.Preempted, R, k, want)
		}
	}
	kept := R[:len(R)-len(out.Preempted)]
	// The running part of the batch: a prefix of kept, in order.
	i := 0
	for i < len(out.Scheduled) && i < len(kept) && out.Scheduled[i].ID == kept[i] {
		i++
	}
	numRunning := i
	budget := cfg.MaxNumBatchedTokens
	for k := range numRunning {
		sc := out.Scheduled[k]
		r := reqs[sc.ID]
		remaining := len(r.prompt) + len(r.generated) - r.computed
		if want := min(remaining, budget); len(sc.Tokens) != want {
			return fmt.Errorf("running seq %d got %d tokens, want min(%d remaining, %d budget)", sc.ID, len(sc.Tokens), remaining, budget)
		}
		budget -= len(sc.Tokens)
	}
	if numRunning < len(kept) && budget > 0 {
		return fmt.Errorf("running %v (after preempting %v): only %d scheduled with %d budget left", R, out.Preempted, numRunning, budget)
	}
	// Admissions: the head of W, in order.
	admitted := out.Scheduled[numRunning:]
	if len(out.Preempted) > 0 && len(admitted) > 0 {
		return fmt.Errorf("a step that preempted %v admitted %d", out.Preempted, len(admitted))
	}
	if len(admitted) > len(W) {
		return fmt.Errorf("%d admitted from %d waiting (batch %v)", len(admitted), len(W), ids(out.Scheduled))
	}
	for k, sc := range admitted {
		if sc.ID != W[k] {
			return fmt.Errorf("admitted %v, waiting was %v", ids(admitted), W)
		}
		r := reqs[sc.ID]
		if r.computed != 0 && !slices.Contains(out.Preempted, sc.ID) {
			// A waiting sequence holds nothing: the test reset computed
			// when it was preempted.
			return fmt.Errorf("seq %d admitted with %d computed", sc.ID, r.computed)
		}
		remaining := len(r.prompt) + len(r.generated) - sc.StartPos
		if want := min(remaining, budget); len(sc.Tokens) != want {
			return fmt.Errorf("admitted seq %d got %d tokens, want min(%d remaining, %d budget)", sc.ID, len(sc.Tokens), remaining, budget)
		}
		budget -= len(sc.Tokens)
	}
	newRunning := append(slices.Clone(kept), ids(admitted)...)
	rest := W[len(admitted):]
	if len(out.Preempted) == 0 && len(rest) > 0 && budget > 0 && len(newRunning) < cfg.MaxNumSeqs && !caching {
		// The head stayed out: the pool must be too short for its chunk.
		r := reqs[rest[0]]
		chunk := min(len(r.prompt)+len(r.generated), budget)
		if m.BlocksFor(chunk) <= m.NumFree() {
			return fmt.Errorf("seq %d left waiting with %d budget, %d of %d seats and %d free blocks for a %d-token chunk",
				rest[0], budget, len(newRunning), cfg.MaxNumSeqs, m.NumFree(), chunk)
		}
	}
	newWaiting := slices.Clone(out.Preempted)
	slices.Reverse(newWaiting)
	newWaiting = append(newWaiting, rest...)
	*running, *waiting = newRunning, newWaiting
	return nil
}

func ids(scs []Scheduled) []kv.SeqID {
	var out []kv.SeqID
	for _, sc := range scs {
		out = append(out, sc.ID)
	}
	return out
}
