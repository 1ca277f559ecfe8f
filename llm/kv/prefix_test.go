package kv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func mustCaching(t *testing.T, blocks, size int) *Manager {
	t.Helper()
	m, err := New(blocks, size, WithPrefixCaching())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func seqTokens(n, salt int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i*7 + salt) % 50
	}
	return out
}

func mustCheck(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixSharedAndKeptAfterFree(t *testing.T) {
	m := mustCaching(t, 8, 4)
	a := seqTokens(10, 0) // blocks of 4: two full, one partial
	if ok, err := m.Allocate(1, 10); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got := m.CachedPrefix(nil, a); len(got) != 0 {
		t.Fatalf("before any KV is computed: cached prefix %v", got)
	}
	if err := m.CacheBlocks(1, a, 7); err != nil { // one block complete
		t.Fatal(err)
	}
	if m.NumCachedBlocks() != 1 {
		t.Fatalf("%d cached blocks after 7 of 10 tokens, want 1", m.NumCachedBlocks())
	}
	if err := m.CacheBlocks(1, a, 10); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, m)
	tableA := m.BlockTable(1)
	// A prompt sharing the first 9 tokens reuses the two full blocks.
	b := append(slices.Clone(a[:9]), 49, 48, 47)
	prefix := m.CachedPrefix(nil, b)
	if !slices.Equal(prefix, tableA[:2]) {
		t.Fatalf("cached prefix %v, want %v", prefix, tableA[:2])
	}
	if ok, err := m.AllocateWithPrefix(2, prefix, 12); !ok || err != nil {
		t.Fatal(ok, err)
	}
	mustCheck(t, m)
	tableB := m.BlockTable(2)
	if !slices.Equal(tableB[:2], tableA[:2]) || tableB[2] == tableA[2] {
		t.Fatalf("B's table %v should share A's first two blocks of %v and nothing else", tableB, tableA)
	}
	if m.RefCount(int(tableA[0])) != 2 || m.NumUsed() != 4 {
		t.Fatalf("refcount %d, used %d; want 2, 4", m.RefCount(int(tableA[0])), m.NumUsed())
	}
	// The same first block at another place in a sequence is not a hit:
	// its KV depends on what comes before it.
	c := append(seqTokens(4, 3), a[:8]...)
	if got := m.CachedPrefix(nil, c); len(got) != 0 {
		t.Fatalf("shifted tokens hit %v", got)
	}
	// Freed, the blocks stay cached and count as free.
	if err := m.Free(1); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(2); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, m)
	if m.NumFree() != 8 || m.NumCachedBlocks() != 2 {
		t.Fatalf("free %d cached %d; want 8, 2", m.NumFree(), m.NumCachedBlocks())
	}
	prefix = m.CachedPrefix(nil, a)
	if !slices.Equal(prefix, tableA[:2]) {
		t.Fatalf("after free: cached prefix %v, want %v", prefix, tableA[:2])
	}
	if ok, err := m.AllocateWithPrefix(3, prefix, 10); !ok || err != nil {
		t.Fatal(ok, err)
	}
	mustCheck(t, m)
	if m.NumFree() != 5 {
		t.Fatalf("reusing two free cached blocks and one new: %d free, want 5", m.NumFree())
	}
}

func TestPrefixEvictionOrder(t *testing.T) {
	m := mustCaching(t, 4, 2)
	a := seqTokens(6, 0) // three full blocks
	if ok, _ := m.Allocate(1, 6); !ok {
		t.Fatal("allocate")
	}
	if err := m.CacheBlocks(1, a, 6); err != nil {
		t.Fatal(err)
	}
	tableA := m.BlockTable(1)
	if err := m.Free(1); err != nil {
		t.Fatal(err)
	}
	// The one block that never held cached contents is reused first.
	if ok, _ := m.Allocate(2, 2); !ok {
		t.Fatal("allocate")
	}
	if got := m.BlockTable(2)[0]; slices.Contains(tableA, got) {
		t.Fatalf("took cached block %d before the empty one", got)
	}
	if m.NumCachedBlocks() != 3 {
		t.Fatalf("%d cached, want 3", m.NumCachedBlocks())
	}
	// Then cached blocks, a sequence's last block first: the prefix shortens
	// from its end.
	if ok, _ := m.Allocate(2, 4); !ok {
		t.Fatal("allocate")
	}
	mustCheck(t, m)
	if got := m.CachedPrefix(nil, a); !slices.Equal(got, tableA[:2]) {
		t.Fatalf("after one eviction: prefix %v, want %v", got, tableA[:2])
	}
	if ok, _ := m.Allocate(2, 8); !ok {
		t.Fatal("allocate")
	}
	mustCheck(t, m)
	if got := m.CachedPrefix(nil, a); len(got) != 0 || m.NumCachedBlocks() != 0 {
		t.Fatalf("pool full of other contents: prefix %v, %d cached", got, m.NumCachedBlocks())
	}
}

func TestPrefixDuplicateStaysPrivate(t *testing.T) {
	m := mustCaching(t, 8, 4)
	a := seqTokens(8, 0)
	// Two sequences with one prompt, admitted before either computed it.
	for id := SeqID(1); id <= 2; id++ {
		if ok, _ := m.Allocate(id, 8); !ok {
			t.Fatal("allocate")
		}
	}
	for id := SeqID(1); id <= 2; id++ {
		if err := m.CacheBlocks(id, a, 8); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, m)
	if m.NumCachedBlocks() != 2 {
		t.Fatalf("%d cached blocks, want 2 (the first sequence's)", m.NumCachedBlocks())
	}
	if got, want := m.CachedPrefix(nil, a), m.BlockTable(1); !slices.Equal(got, want) {
		t.Fatalf("prefix %v, want the first sequence's %v", got, want)
	}
}

func TestPrefixMisuse(t *testing.T) {
	m := mustCaching(t, 4, 2)
	if ok, _ := m.Allocate(1, 4); !ok {
		t.Fatal("allocate")
	}
	if _, err := m.AllocateWithPrefix(1, nil, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("AllocateWithPrefix for a sequence with blocks: %v", err)
	}
	if _, err := m.AllocateWithPrefix(2, []int32{0}, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("AllocateWithPrefix with an uncached block: %v", err)
	}
	if err := m.CacheBlocks(9, nil, 0); !errors.Is(err, ErrUnknownSeq) {
		t.Errorf("CacheBlocks of an unknown sequence: %v", err)
	}
	if err := m.CacheBlocks(1, []int{1, 2}, 3); !errors.Is(err, ErrInvalid) {
		t.Errorf("CacheBlocks beyond the tokens: %v", err)
	}
	mustCheck(t, m)
	plain := mustNew(t, 4, 2)
	if got := plain.CachedPrefix(nil, []int{1, 2, 3}); len(got) != 0 || plain.PrefixCaching() {
		t.Errorf("without prefix caching: prefix %v", got)
	}
}

// TestPrefixRandomKVContents runs random sequences over a small pool as a
// scheduler would (admit with the cached prefix, compute a few tokens at a
// time, publish, free) and keeps a model of what each KV slot holds: the
// tokens from position 0 through that slot's position. Every reused block
// must hold exactly the prefix it is reused for, and no step may write a
// block that another sequence holds.
func TestPrefixRandomKVContents(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	const blocks, size = 24, 4
	m := mustCaching(t, blocks, size)
	slots := make([]string, blocks*size) // what each slot's KV was computed from
	type live struct {
		tokens   []int
		computed int
	}
	seqs := map[SeqID]*live{}
	// Prompts come from a few stems so that prefixes repeat.
	stems := [][]int{seqTokens(30, 0), seqTokens(30, 1), seqTokens(30, 2)}
	hits := 0
	for op := 0; op < 20000; op++ {
		id := SeqID(rng.IntN(10))
		q, ok := seqs[id]
		switch {
		case !ok: // admit
			stem := stems[rng.IntN(len(stems))]
			tokens := slices.Clone(stem[:1+rng.IntN(len(stem))])
			if rng.IntN(3) == 0 {
				tokens[rng.IntN(len(tokens))] = 49 // diverge somewhere
			}
			prefix := m.CachedPrefix(nil, tokens[:len(tokens)-1])
			for j, blk := range prefix {
				for k := range size {
					if want := fmt.Sprint(tokens[:j*size+k+1]); slots[int(blk)*size+k] != want {
						t.Fatalf("seed %d op %d: reused block %d slot %d holds %s, want %s", seed, op, blk, k, slots[int(blk)*size+k], want)
					}
				}
			}
			cached := len(prefix) * size
			hits += cached
			n := cached + 1 + rng.IntN(len(tokens)-cached)
			ok, err := m.AllocateWithPrefix(id, prefix, n)
			if err != nil {
				t.Fatalf("seed %d op %d: %v", seed, op, err)
			}
			if ok {
				q = &live{tokens: tokens, computed: cached}
				seqs[id] = q
				compute(t, m, id, q.tokens, q.computed, n, slots)
				q.computed = n
			}
		case rng.IntN(4) == 0 || q.computed == len(q.tokens): // finish
			if err := m.Free(id); err != nil {
				t.Fatal(err)
			}
			delete(seqs, id)
		default: // compute more
			n := min(len(q.tokens), q.computed+1+rng.IntN(6))
			if ok, err := m.Allocate(id, n); err != nil {
				t.Fatal(err)
			} else if ok {
				compute(t, m, id, q.tokens, q.computed, n, slots)
				q.computed = n
			}
		}
		if err := m.Check(); err != nil {
			t.Fatalf("seed %d op %d: %v", seed, op, err)
		}
	}
	if hits == 0 {
		t.Fatal("no prefix was ever reused: the test exercises nothing")
	}
}

// compute writes the slots of positions [from, to) of seq, as a forward
// pass would, and publishes what is complete.
func compute(t *testing.T, m *Manager, id SeqID, tokens []int, from, to int, slots []string) {
	t.Helper()
	table := m.BlockTable(id)
	size := m.BlockSize()
	for p := from; p < to; p++ {
		blk := table[p/size]
		if m.RefCount(int(blk)) != 1 {
			t.Fatalf("seq %d writes position %d into block %d, which %d sequences hold", id, p, blk, m.RefCount(int(blk)))
		}
		slots[int(blk)*size+p%size] = fmt.Sprint(tokens[:p+1])
	}
	if err := m.CacheBlocks(id, tokens, to); err != nil {
		t.Fatal(err)
	}
}

// TestPrefixDuplicateOutlivesEvictedOriginal: a sequence that computes
// contents a free cached block already holds (a prompt log-probability
// request never reuses the cache) and then needs that free block for its
// own later tokens must not leave its contents unreachable. Before the fix
// its copy stayed private, the original was evicted, and the whole prefix
// was lost although a block still held it.
func TestPrefixDuplicateOutlivesEvictedOriginal(t *testing.T) {
	m := mustCaching(t, 3, 2)
	a := seqTokens(6, 0) // three full blocks
	if ok, _ := m.Allocate(1, 2); !ok {
		t.Fatal("allocate")
	}
	if err := m.CacheBlocks(1, a, 2); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(1); err != nil { // a[:2] cached in a free block
		t.Fatal(err)
	}
	// Seq 2 computes a from scratch, a block at a time, as chunked prefill
	// does; its third block can only be the free cached one.
	for n := 2; n <= 6; n += 2 {
		if ok, _ := m.Allocate(2, n); !ok {
			t.Fatalf("allocate %d", n)
		}
		if err := m.CacheBlocks(2, a, n); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, m)
	}
	table := m.BlockTable(2)
	if err := m.Free(2); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, m)
	if got := m.CachedPrefix(nil, a); !slices.Equal(got, table) {
		t.Fatalf("prefix %v after seq 2 computed and freed all of it in %v", got, table)
	}
}
