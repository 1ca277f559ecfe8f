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
	uncached  bool
}

// TestPropertyRandomWorkloads drives the scheduler with random arrivals,
// prompt and output lengths, budgets and pool sizes, and checks every
// invariant after every step: the token budget and max_num_seqs hold, every
// scheduled token is the right one at the right position, blocks never leak,
// every admitted request ends with exactly the tokens it asked for, and
// first admissions are FCFS. Some requests are aborted, a few of them
// between Schedule and Update.
func TestPropertyRandomWorkloads(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	for _, caching := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefix-caching=%v", caching), func(t *testing.T) {
			var c trialCounts
			for trial := 0; c.steps < 12000 || trial < 60; trial++ {
				if err := randomTrial(rng, caching, trialGen{}, &c); err != nil {
					t.Fatalf("seed %d trial %d: %v", seed, trial, err)
				}
			}
			t.Logf("%d steps checked, %d preemptions, %d prompt tokens reused", c.steps, c.preemptions, c.reused)
			if c.preemptions == 0 {
				t.Error("no trial preempted: the generator no longer exercises preemption")
			}
			if caching != (c.reused > 0) {
				t.Errorf("%d tokens reused with prefix caching %v", c.reused, caching)
			}
		})
	}
}

// TestPropertyDenseSharing is the random workload with many requests whose
// prompts copy others' (so that sequences admitted in one step share blocks
// an earlier one computes in that step), in tiny pools with small budgets.
func TestPropertyDenseSharing(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 43))
	var c trialCounts
	for trial := 0; c.steps < 20000 || trial < 100; trial++ {
		if err := randomTrial(rng, true, trialGen{dense: true}, &c); err != nil {
			t.Fatalf("seed %d trial %d: %v", seed, trial, err)
		}
	}
	t.Logf("%d steps checked, %d preemptions, %d prompt tokens reused", c.steps, c.preemptions, c.reused)
}

// trialCounts adds up what random trials exercised.
type trialCounts struct {
	steps, preemptions, reused int
}

// trialGen shapes a random trial's workload; the zero value is the
// original mix.
type trialGen struct {
	// dense: small blocks, tiny pools and budgets, arrivals in bursts of
	// copies (exact, extended, or of another request's prompt and generated
	// tokens), prompt-only requests (maxTokens 0), many aborts between
	// Schedule and Update.
	dense bool
}

func randomTrial(rng *rand.Rand, caching bool, g trialGen, c *trialCounts) error {
	blockSize := 1 + rng.IntN(16)
	numBlocks := 2 + rng.IntN(40)
	cfg := Config{MaxNumSeqs: 1 + rng.IntN(8), MaxNumBatchedTokens: 1 + rng.IntN(64)}
	if g.dense {
		blockSize = 1 + rng.IntN(8)
		numBlocks = 2 + rng.IntN(16)
		cfg = Config{MaxNumSeqs: 1 + rng.IntN(8), MaxNumBatchedTokens: 1 + rng.IntN(24)}
	}
	var opts []kv.Option
	if caching {
		opts = append(opts, kv.WithPrefixCaching())
	}
	m, err := kv.New(numBlocks, blockSize, opts...)
	if err != nil {
		return err
	}
	// What each KV slot was computed from (the tokens from position 0
	// through its own), to check that whatever a sequence skips is in the
	// cache and that nothing overwrites KV another sequence holds.
	slots := make([]uint64, numBlocks*blockSize)
	s, err := New(cfg, m)
	if err != nil {
		return err
	}
	reqs := map[kv.SeqID]*request{}
	var addOrder, firstOrder []kv.SeqID
	nextID := kv.SeqID(1)
	toAdd := 5 + rng.IntN(30)
	for step := 0; ; step++ {
		if step > 20000 {
			return fmt.Errorf("no progress after %d steps (%d waiting, %d running)", step, s.NumWaiting(), s.NumRunning())
		}
		// Random arrivals.
		for toAdd > 0 && (rng.IntN(3) == 0 || g.dense && rng.IntN(2) == 0) {
			toAdd--
			r := &request{id: nextID, maxTokens: 1 + rng.IntN(3*blockSize+4)}
			r.prompt = make([]int, 1+rng.IntN(4*blockSize+10))
			// Prompts from three stems share prefixes, some diverging.
			stem, diverge := rng.IntN(3), rng.IntN(len(r.prompt)+1)
			for i := range r.prompt {
				r.prompt[i] = stem*100000 + i
				if i >= diverge {
					r.prompt[i] = int(nextID)*100000 + i
				}
			}
			if g.dense {
				r.maxTokens = rng.IntN(blockSize + 4)
				if len(addOrder) > 0 && rng.IntN(2) == 0 {
					// A copy of an earlier request's known tokens, cut or
					// extended.
					o := reqs[addOrder[rng.IntN(len(addOrder))]]
					all := append(slices.Clone(o.prompt), o.generated...)
					r.prompt = all[:1+rng.IntN(len(all))]
					if rng.IntN(3) == 0 {
						for range 1 + rng.IntN(2*blockSize) {
							r.prompt = append(r.prompt, int(nextID)*100000+len(r.prompt))
						}
					}
				}
			}
			if rng.IntN(8) == 0 && r.maxTokens > 0 {
				r.stopAfter = 1 + rng.IntN(r.maxTokens)
			}
			nextID++
			add := s.Add
			if rng.IntN(5) == 0 {
				add = s.AddUncached
				r.uncached = true
			}
			err := add(r.id, r.prompt, r.maxTokens)
			fits := m.BlocksFor(SlotsNeeded(len(r.prompt), r.maxTokens)) <= numBlocks
			if fits != (err == nil) {
				return fmt.Errorf("add %d (%d+%d tokens, pool %dx%d): fits=%v err=%v", r.id, len(r.prompt), r.maxTokens, numBlocks, blockSize, fits, err)
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
					return fmt.Errorf("abort %d: %v", id, err)
				}
				r.aborted = true
			} else if err := s.Abort(id); err == nil {
				return fmt.Errorf("abort of finished %d succeeded", id)
			}
		}
		if err := m.Check(); err != nil {
			return err
		}
		out := s.Schedule()
		if len(out.Scheduled) == 0 {
			if s.NumRunning()+s.NumWaiting() == 0 && toAdd == 0 {
				break
			}
			if s.NumRunning()+s.NumWaiting() > 0 {
				return fmt.Errorf("nothing scheduled with %d waiting, %d running", s.NumWaiting(), s.NumRunning())
			}
			continue
		}
		c.steps++
		c.preemptions += len(out.Preempted)
		if err := checkOutput(out, cfg, m, reqs, &firstOrder, slots, &c.reused); err != nil {
			return fmt.Errorf("step %d: %v", step, err)
		}
		// Random aborts between Schedule and Update, of scheduled sequences
		// or any other: the forward pass still ran (checkOutput recorded its
		// writes), and the aborted sequences' results are left out.
		abortedInStep := map[kv.SeqID]bool{}
		for rng.IntN(8) == 0 || g.dense && rng.IntN(4) == 0 {
			id := out.Scheduled[rng.IntN(len(out.Scheduled))].ID
			if rng.IntN(2) == 0 {
				id = addOrder[rng.IntN(len(addOrder))]
			}
			if r := reqs[id]; r.done || r.aborted {
				continue
			}
			if err := s.Abort(id); err != nil {
				return fmt.Errorf("abort %d between Schedule and Update: %v", id, err)
			}
			reqs[id].aborted = true
			abortedInStep[id] = true
			if err := m.Check(); err != nil {
				return err
			}
		}
		var sampled []Sampled
		for _, sc := range out.Scheduled {
			r := reqs[sc.ID]
			r.computed = sc.StartPos + len(sc.Tokens)
			if abortedInStep[sc.ID] {
				continue
			}
			if sc.Sample {
				tok := int(r.id)*100000 + 50000 + len(r.generated)
				finish := r.stopAfter > 0 && len(r.generated)+1 == r.stopAfter || r.maxTokens == 0
				sampled = append(sampled, Sampled{ID: sc.ID, Token: tok, Finished: finish})
				r.generated = append(r.generated, tok)
			}
		}
		finished, err := s.Update(sampled)
		if err != nil {
			return err
		}
		for _, id := range finished {
			r := reqs[id]
			want := max(r.maxTokens, 1) // maxTokens 0 ends at the token it never computes
			if r.stopAfter > 0 {
				want = r.stopAfter
			}
			if len(r.generated) != want {
				return fmt.Errorf("seq %d finished with %d tokens, want %d", id, len(r.generated), want)
			}
			r.done = true
		}
		if s.NumRunning() > cfg.MaxNumSeqs {
			return fmt.Errorf("%d running > max_num_seqs %d", s.NumRunning(), cfg.MaxNumSeqs)
		}
		if err := m.Check(); err != nil {
			return err
		}
	}
	return checkEnd(m, reqs, addOrder, firstOrder)
}

// checkEnd checks a workload run to its end: every request finished or was
// aborted, no block or sequence is left, and first admissions followed
// arrival order (FCFS; requests aborted before admission never appear).
func checkEnd(m *kv.Manager, reqs map[kv.SeqID]*request, addOrder, firstOrder []kv.SeqID) error {
	for _, r := range reqs {
		if !r.done && !r.aborted {
			return fmt.Errorf("seq %d never finished", r.id)
		}
	}
	if m.NumUsed() != 0 || m.NumSeqs() != 0 {
		return fmt.Errorf("blocks leaked: %d used by %d seqs", m.NumUsed(), m.NumSeqs())
	}
	var admitted []kv.SeqID
	for _, id := range addOrder {
		if reqs[id].admitted {
			admitted = append(admitted, id)
		}
	}
	if !slices.Equal(admitted, firstOrder) {
		return fmt.Errorf("first admissions %v, arrival order %v", firstOrder, admitted)
	}
	return nil
}

func checkOutput(out *Output, cfg Config, m *kv.Manager, reqs map[kv.SeqID]*request, firstOrder *[]kv.SeqID, slots []uint64, reused *int) error {
	if out.NumTokens > cfg.MaxNumBatchedTokens {
		return fmt.Errorf("%d tokens over budget %d", out.NumTokens, cfg.MaxNumBatchedTokens)
	}
	if len(out.Scheduled) > cfg.MaxNumSeqs {
		return fmt.Errorf("%d scheduled over max_num_seqs %d", len(out.Scheduled), cfg.MaxNumSeqs)
	}
	for _, id := range out.Preempted {
		reqs[id].computed = 0
	}
	// Who holds each block, and where each scheduled sequence is in the
	// batch: a block a sequence writes may be shared only with sequences
	// later in the batch that read it whole (prefix caching publishes what
	// a step computes as it plans the step).
	holders := map[int32][]kv.SeqID{}
	for id, r := range reqs {
		if !r.done && !r.aborted && m.Has(id) {
			for _, blk := range m.BlockTable(id) {
				holders[blk] = append(holders[blk], id)
			}
		}
	}
	index := map[kv.SeqID]int{}
	for j, sc := range out.Scheduled {
		index[sc.ID] = j
	}
	sum := 0
	seen := map[kv.SeqID]bool{}
	for i, sc := range out.Scheduled {
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
		all := append(slices.Clone(r.prompt), r.generated...)
		end := sc.StartPos + len(sc.Tokens)
		if sc.StartPos != r.computed {
			// Only a sequence just admitted may skip tokens: those of its
			// prompt's cached prefix, in whole blocks, never the last.
			if r.computed != 0 || !m.PrefixCaching() || r.uncached || sc.StartPos%m.BlockSize() != 0 || sc.StartPos >= len(all) {
				return fmt.Errorf("seq %d starts at %d, %d computed", sc.ID, sc.StartPos, r.computed)
			}
			*reused += sc.StartPos
		}
		prefix := uint64(0xcbf29ce484222325) // FNV-1a of all[:p+1], standing for it
		for p := range end {
			prefix = (prefix ^ uint64(all[p])) * 0x100000001b3
			slot := int(sc.BlockTable[p/m.BlockSize()])*m.BlockSize() + p%m.BlockSize()
			if p < sc.StartPos {
				if slots[slot] != prefix {
					return fmt.Errorf("seq %d position %d: the KV there was computed from other tokens", sc.ID, p)
				}
				continue
			}
			blk := sc.BlockTable[p/m.BlockSize()]
			for _, y := range holders[blk] {
				j, ok := index[y]
				if y == sc.ID {
					continue
				}
				if !ok || j < i || (slices.Index(out.Scheduled[j].BlockTable, blk)+1)*m.BlockSize() > out.Scheduled[j].StartPos {
					return fmt.Errorf("seq %d writes position %d into block %d, which seq %d holds and does not skip later in the batch", sc.ID, p, blk, y)
				}
			}
			slots[slot] = prefix
		}
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
