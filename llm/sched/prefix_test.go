package sched

import (
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// TestPrefixCacheSkipsComputedBlocks: a second request with the first's
// prompt starts after the cached whole blocks, never at its last token; an
// uncached one computes everything; the counters say so.
func TestPrefixCacheSkipsComputedBlocks(t *testing.T) {
	m, err := kv.New(16, 4, kv.WithPrefixCaching())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{MaxNumBatchedTokens: 64}, m)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	run := func(id kv.SeqID, add func(kv.SeqID, []int, int) error, prompt []int, wantStart int) {
		t.Helper()
		if err := add(id, prompt, 1); err != nil {
			t.Fatal(err)
		}
		out := s.Schedule()
		if len(out.Scheduled) != 1 || out.Scheduled[0].StartPos != wantStart || len(out.Scheduled[0].Tokens) != len(prompt)-wantStart || !out.Scheduled[0].First {
			t.Fatalf("seq %d: scheduled %+v, want one first chunk from %d", id, out.Scheduled, wantStart)
		}
		if _, err := s.Update([]Sampled{{ID: id, Token: 99}}); err != nil {
			t.Fatal(err)
		}
	}
	run(1, s.Add, prompt, 0)
	run(2, s.Add, prompt, 8)         // two whole blocks of 4 cached
	run(3, s.Add, prompt[:8], 4)     // all 8 cached, but the last must run
	run(4, s.AddUncached, prompt, 0) // prompt logprobs need every position
	run(5, s.Add, []int{9, 2, 3, 4, 5}, 0)
	st := s.Stats()
	if st.PrefixQueries != 10+10+8+5 || st.PrefixHits != 8+4 {
		t.Errorf("queries %d hits %d; want 33, 12 (the uncached admission is not a query)", st.PrefixQueries, st.PrefixHits)
	}
	if m.NumUsed() != 0 || m.NumCachedBlocks() != 3 {
		t.Errorf("after all finished: %d used, %d cached; want 0, 3", m.NumUsed(), m.NumCachedBlocks())
	}
}

// TestPrefixCacheCountsFirstAdmissionsOnly: a sequence preempted and
// re-admitted finds its own blocks in the cache, but only first admissions
// count as queries and hits, as in vLLM.
func TestPrefixCacheCountsFirstAdmissionsOnly(t *testing.T) {
	m, err := kv.New(4, 4, kv.WithPrefixCaching())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{MaxNumBatchedTokens: 64}, m)
	if err != nil {
		t.Fatal(err)
	}
	// 8 + 4 and 7 + 4 tokens need three blocks each; the pool has four.
	if err := s.Add(1, []int{1, 2, 3, 4, 5, 6, 7, 8}, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(2, []int{9, 10, 11, 12, 13, 14, 15}, 4); err != nil {
		t.Fatal(err)
	}
	generated := map[kv.SeqID]int{}
	preempted, readmittedAfter := false, 0
	for step := 0; s.NumWaiting()+s.NumRunning() > 0; step++ {
		if step > 100 {
			t.Fatal("no progress")
		}
		out := s.Schedule()
		preempted = preempted || len(out.Preempted) > 0
		var sampled []Sampled
		for _, sc := range out.Scheduled {
			if preempted && !sc.First && sc.StartPos > 0 && sc.NumGenerated > 0 && len(sc.Tokens) > 1 {
				readmittedAfter = sc.StartPos // a re-admission starts after its cached blocks
			}
			if sc.Sample {
				generated[sc.ID]++
				sampled = append(sampled, Sampled{ID: sc.ID, Token: 100 + generated[sc.ID]})
			}
		}
		if _, err := s.Update(sampled); err != nil {
			t.Fatal(err)
		}
	}
	if !preempted || readmittedAfter == 0 {
		t.Fatalf("preempted %v, re-admitted after %d cached tokens: the test no longer re-admits from the cache", preempted, readmittedAfter)
	}
	if st := s.Stats(); st.PrefixQueries != 8+7 || st.PrefixHits != 0 {
		t.Errorf("queries %d hits %d; want 15, 0 (re-admissions do not count)", st.PrefixQueries, st.PrefixHits)
	}
}
