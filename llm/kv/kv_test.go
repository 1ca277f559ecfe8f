package kv

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func mustNew(t *testing.T, blocks, size int) *Manager {
	t.Helper()
	m, err := New(blocks, size)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewValidates(t *testing.T) {
	for _, c := range []struct{ blocks, size int }{{0, 16}, {-1, 16}, {4, -2}} {
		if _, err := New(c.blocks, c.size); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%d, %d) = %v, want ErrInvalid", c.blocks, c.size, err)
		}
	}
	m := mustNew(t, 3, 0)
	if m.BlockSize() != DefaultBlockSize {
		t.Errorf("default block size %d", m.BlockSize())
	}
}

func TestAllocateExtendsAtBlockBoundaries(t *testing.T) {
	m := mustNew(t, 4, 4)
	steps := []struct {
		tokens, blocks int
	}{{1, 1}, {4, 1}, {5, 2}, {8, 2}, {9, 3}, {3, 3}}
	for _, s := range steps {
		ok, err := m.Allocate(7, s.tokens)
		if !ok || err != nil {
			t.Fatalf("Allocate(%d) = %v, %v", s.tokens, ok, err)
		}
		if got := m.NumSeqBlocks(7); got != s.blocks {
			t.Errorf("after %d tokens: %d blocks, want %d", s.tokens, got, s.blocks)
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
	}
	// Out of blocks is a normal outcome that changes nothing.
	before := m.BlockTable(7)
	ok, err := m.Allocate(7, 17)
	if ok || err != nil {
		t.Fatalf("Allocate beyond the pool = %v, %v; want false, nil", ok, err)
	}
	if got := m.BlockTable(7); len(got) != len(before) || m.NumFree() != 1 {
		t.Errorf("failed allocation changed the table: %v -> %v, free %d", before, got, m.NumFree())
	}
	if m.CanAllocate(7, 17) || !m.CanAllocate(7, 16) {
		t.Error("CanAllocate disagrees with the pool")
	}
}

func TestFreeTwiceAndUnknownAreErrors(t *testing.T) {
	m := mustNew(t, 4, 4)
	if _, err := m.Allocate(1, 6); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(1); err != nil {
		t.Fatal(err)
	}
	if err := m.Free(1); !errors.Is(err, ErrUnknownSeq) {
		t.Errorf("second Free = %v", err)
	}
	if err := m.Free(99); !errors.Is(err, ErrUnknownSeq) {
		t.Errorf("Free of unknown = %v", err)
	}
	if _, err := m.Allocate(1, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative tokens = %v", err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if m.NumFree() != 4 || m.NumUsed() != 0 || m.Usage() != 0 {
		t.Errorf("free %d used %d usage %v", m.NumFree(), m.NumUsed(), m.Usage())
	}
}

func TestTablesAreCopies(t *testing.T) {
	m := mustNew(t, 4, 2)
	if _, err := m.Allocate(1, 4); err != nil {
		t.Fatal(err)
	}
	table := m.BlockTable(1)
	table[0] = 3
	if m.BlockTable(1)[0] == 3 {
		t.Error("BlockTable returned the manager's own slice")
	}
}

// TestRandomOperations checks used + free = total and the refcounts after
// every operation of a random sequence of allocations and frees, against a
// naive model of how many blocks each sequence should hold.
func TestRandomOperations(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	m := mustNew(t, 32, 4)
	want := map[SeqID]int{} // tokens each live sequence holds
	for i := 0; i < 20000; i++ {
		id := SeqID(rng.IntN(12))
		if rng.IntN(3) == 0 {
			err := m.Free(id)
			_, live := want[id]
			if live != (err == nil) {
				t.Fatalf("seed %d op %d: Free(%d) = %v, live %v", seed, i, id, err, live)
			}
			delete(want, id)
		} else {
			n := rng.IntN(40)
			free := m.NumFree()
			need := m.BlocksFor(n) - m.BlocksFor(want[id])
			ok, err := m.Allocate(id, n)
			if err != nil || ok != (need <= free) {
				t.Fatalf("seed %d op %d: Allocate(%d, %d) = %v, %v with %d free, %d needed", seed, i, id, n, ok, err, free, need)
			}
			if ok && n > want[id] {
				want[id] = n
			}
			if ok && n == 0 && !m.Has(id) {
				delete(want, id)
			}
		}
		if err := m.Check(); err != nil {
			t.Fatalf("seed %d op %d: %v", seed, i, err)
		}
		used := 0
		for id, n := range want {
			if got := m.NumSeqBlocks(id); got != m.BlocksFor(n) {
				t.Fatalf("seed %d op %d: seq %d holds %d blocks, want %d", seed, i, id, got, m.BlocksFor(n))
			}
			used += m.BlocksFor(n)
		}
		if used != m.NumUsed() {
			t.Fatalf("seed %d op %d: used %d, want %d", seed, i, m.NumUsed(), used)
		}
	}
}
