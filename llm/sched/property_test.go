package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// request is the test's own record of what a sequence should see.
type request struct {
	id        kv.SeqID
	prompt    []int
	maxTokens int
	generated []int
	computed  int // the test's view of the tokens in the cache
	admitted  bool
	done      bool
	aborted   bool
	stopAfter int // finish early after this many tokens (0: run to max)
}

// TestPropertyRandomWorkloads drives the scheduler with random arrivals,
// prompt and output lengths, budgets and pool sizes, and checks every
// invariant after every step: the token budget and max_num_seqs hold, every
// scheduled token is the right one at the right position, blocks never leak,
// every admitted request ends with exactly the tokens it asked for, and
// first admissions are FCFS.
func TestPropertyRandomWorkloads(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	totalSteps, preemptions := 0, 0
	for trial := 0; totalSteps < 12000 || trial < 60; trial++ {
		steps, pre, err := runRandomTrial(rng)
		if err != nil {
			t.Fatalf("seed %d trial %d: %v", seed, trial, err)
		}
		totalSteps += steps
		preemptions += pre
	}
	t.Logf("%d steps checked, %d preemptions", totalSteps, preemptions)
	if preemptions == 0 {
		t.Error("no trial preempted: the generator no longer exercises preemption")
	}
}

func runRandomTrial(rng *rand.Rand) (steps, preemptions int, err error) {
	steps, err = randomTrial(rng, &preemptions)
	return steps, preemptions, err
}

func randomTrial(rng *rand.Rand, preemptions *int) (int, error) {
	blockSize := 1 + rng.IntN(16)
	numBlocks := 2 + rng.IntN(40)
	cfg := Config{MaxNumSeqs: 1 + rng.IntN(8), MaxNumBatchedTokens: 1 + rng.IntN(64)}
	m, err := kv.New(numBlocks, blockSize)
	if err != nil {
		return 0, err
	}
	s, err := New(cfg, m)
	if err != nil {
		return 0, err
	}
	reqs := map[kv.SeqID]*request{}
	var addOrder, firstOrder []kv.SeqID
	nextID := kv.SeqID(1)
	toAdd := 5 + rng.IntN(30)
	steps := 0
	for step := 0; ; step++ {
		if step > 20000 {
			return steps, fmt.Errorf("no progress after %d steps (%d waiting, %d running)", step, s.NumWaiting(), s.NumRunning())
		}
		// Random arrivals.
		for toAdd > 0 && rng.IntN(3) == 0 {
			toAdd--
			r := &request{id: nextID, maxTokens: 1 + rng.IntN(3*blockSize+4)}
			r.prompt = make([]int, 1+rng.IntN(4*blockSize+10))
			for i := range r.prompt {
				r.prompt[i] = int(nextID)*100000 + i
			}
			if rng.IntN(8) == 0 {
				r.stopAfter = 1 + rng.IntN(r.maxTokens)
			}
			nextID++
			err := s.Add(r.id, r.prompt, r.maxTokens)
			fits := m.BlocksFor(len(r.prompt)+r.maxTokens) <= numBlocks
			if fits != (err == nil) {
				return steps, fmt.Errorf("add %d (%d+%d tokens, pool %dx%d): fits=%v err=%v", r.id, len(r.prompt), r.maxTokens, numBlocks, blockSize, fits, err)
			}
			if err == nil {
				reqs[r.id] = r
				addOrder = append(addOrder, r.id)
			}
		}
		// Random aborts.
		if rng.IntN(25) == 0 && len(addOrder) > 0 {
			id := addOrder[rng.IntN(len(addOrder))]
			if r := reqs[id]; !r.done && !r.aborted {
				if err := s.Abort(id); err != nil {
					return steps, fmt.Errorf("abort %d: %v", id, err)
				}
				r.aborted = true
			} else if err := s.Abort(id); err == nil {
				return steps, fmt.Errorf("abort of finished %d succeeded", id)
			}
		}
		if err := m.Check(); err != nil {
			return steps, err
		}
		out := s.Schedule()
		if len(out.Scheduled) == 0 {
			if s.NumRunning()+s.NumWaiting() == 0 && toAdd == 0 {
				break
			}
			if s.NumRunning()+s.NumWaiting() > 0 {
				return steps, fmt.Errorf("nothing scheduled with %d waiting, %d running", s.NumWaiting(), s.NumRunning())
			}
			continue
		}
		steps++
		*preemptions += len(out.Preempted)
		if err := checkOutput(out, cfg, m, reqs, &firstOrder); err != nil {
			return steps, fmt.Errorf("step %d: %v", step, err)
		}
		var sampled []Sampled
		for _, sc := range out.Scheduled {
			r := reqs[sc.ID]
			r.computed = sc.StartPos + len(sc.Tokens)
			if sc.Sample {
				tok := int(r.id)*100000 + 50000 + len(r.generated)
				finish := r.stopAfter > 0 && len(r.generated)+1 == r.stopAfter
				sampled = append(sampled, Sampled{ID: sc.ID, Token: tok, Finished: finish})
				r.generated = append(r.generated, tok)
			}
		}
		finished, err := s.Update(sampled)
		if err != nil {
			return steps, err
		}
		for _, id := range finished {
			r := reqs[id]
			want := r.maxTokens
			if r.stopAfter > 0 {
				want = r.stopAfter
			}
			if len(r.generated) != want {
				return steps, fmt.Errorf("seq %d finished with %d tokens, want %d", id, len(r.generated), want)
			}
			r.done = true
		}
		if s.NumRunning() > cfg.MaxNumSeqs {
			return steps, fmt.Errorf("%d running > max_num_seqs %d", s.NumRunning(), cfg.MaxNumSeqs)
		}
		if err := m.Check(); err != nil {
			return steps, err
		}
	}
	for _, r := range reqs {
		if !r.done && !r.aborted {
			return steps, fmt.Errorf("seq %d never finished", r.id)
		}
	}
	if m.NumUsed() != 0 || m.NumSeqs() != 0 {
		return steps, fmt.Errorf("blocks leaked: %d used by %d seqs", m.NumUsed(), m.NumSeqs())
	}
	// FCFS: first admissions follow arrival order (aborted-before-admission
	// requests simply never appear).
	var admittedInOrder []kv.SeqID
	for _, id := range addOrder {
		if reqs[id].admitted {
			admittedInOrder = append(admittedInOrder, id)
		}
	}
	if !slices.Equal(admittedInOrder, firstOrder) {
		return steps, fmt.Errorf("admission order %v, arrival order %v", firstOrder, admittedInOrder)
	}
	return steps, nil
}

func checkOutput(out *Output, cfg Config, m *kv.Manager, reqs map[kv.SeqID]*request, firstOrder *[]kv.SeqID) error {
	if out.NumTokens > cfg.MaxNumBatchedTokens {
		return fmt.Errorf("%d tokens over budget %d", out.NumTokens, cfg.MaxNumBatchedTokens)
	}
	if len(out.Scheduled) > cfg.MaxNumSeqs {
		return fmt.Errorf("%d scheduled over max_num_seqs %d", len(out.Scheduled), cfg.MaxNumSeqs)
	}
	for _, id := range out.Preempted {
		reqs[id].computed = 0
	}
	sum := 0
	seen := map[kv.SeqID]bool{}
	for _, sc := range out.Scheduled {
		r := reqs[sc.ID]
		if r == nil || r.done || r.aborted {
			return fmt.Errorf("scheduled unknown or ended seq %d", sc.ID)
		}
		if seen[sc.ID] {
			return fmt.Errorf("seq %d scheduled twice", sc.ID)
		}
		seen[sc.ID] = true
		if sc.First {
			if r.admitted {
				return fmt.Errorf("seq %d marked first twice", sc.ID)
			}
			r.admitted = true
			*firstOrder = append(*firstOrder, sc.ID)
		}
		if sc.StartPos != r.computed {
			return fmt.Errorf("seq %d starts at %d, %d computed", sc.ID, sc.StartPos, r.computed)
		}
		all := append(slices.Clone(r.prompt), r.generated...)
		end := sc.StartPos + len(sc.Tokens)
		if len(sc.Tokens) == 0 || end > len(all) || !slices.Equal(sc.Tokens, all[sc.StartPos:end]) {
			return fmt.Errorf("seq %d tokens [%d,%d) wrong", sc.ID, sc.StartPos, end)
		}
		if sc.Sample != (end == len(all)) {
			return fmt.Errorf("seq %d sample=%v at %d of %d known tokens", sc.ID, sc.Sample, end, len(all))
		}
		if len(sc.BlockTable)*m.BlockSize() < end {
			return fmt.Errorf("seq %d block table of %d blocks for %d tokens", sc.ID, len(sc.BlockTable), end)
		}
		if !slices.Equal(sc.BlockTable, m.BlockTable(sc.ID)) {
			return fmt.Errorf("seq %d block table %v, kv has %v", sc.ID, sc.BlockTable, m.BlockTable(sc.ID))
		}
		sum += len(sc.Tokens)
	}
	if sum != out.NumTokens {
		return fmt.Errorf("NumTokens %d, sum %d", out.NumTokens, sum)
	}
	return nil
}
