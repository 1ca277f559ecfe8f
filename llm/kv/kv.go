// Package kv is tinyserve's logical paged KV cache: a pool of fixed-size
// blocks, per-sequence block tables and reference counts. It owns every block
// id; backends size their physical KV storage to the same pool and index it
// by these ids.
//
// Follows vLLM's BlockPool and KVCacheManager (vllm/v1/core/block_pool.py,
// kv_cache_manager.py): ids are minted once, running out of blocks is a normal
// outcome (ok == false) that the scheduler answers by preempting, and misuse
// is a typed error that changes nothing.
//
// With prefix caching (WithPrefixCaching, vLLM's --enable-prefix-caching),
// each full block whose KV is computed (or will be, by the step being
// planned) is indexed by a hash of its tokens and of every token before it.
// A new sequence whose prompt starts with cached blocks shares them instead
// of computing them again, and a freed block keeps its contents until the
// pool needs it for something else (see prefix.go).
//
// The package is pure: no goroutines, clocks or I/O, and not safe for
// concurrent use (the engine's one goroutine owns it).
package kv

import (
	"errors"
	"fmt"
)

// DefaultBlockSize is the number of tokens per block when a config leaves it
// zero, as in vLLM.
const DefaultBlockSize = 16

// SeqID identifies a sequence to the KV manager and the scheduler.
type SeqID uint64

// Errors for misuse. They leave the manager unchanged.
var (
	// ErrUnknownSeq: the sequence has no blocks (never allocated, or freed).
	ErrUnknownSeq = errors.New("kv: unknown sequence")
	// ErrInvalid: an argument is out of range.
	ErrInvalid = errors.New("kv: invalid argument")
)

// Manager is the block pool and the block tables.
type Manager struct {
	blockSize int
	numBlocks int
	free      freeList // the blocks no sequence holds
	refs      []int32  // reference count of each block
	tables    map[SeqID]*table

	prefix prefixCache // cached block contents; unused without prefix caching

	// A one-entry cache: the scheduler allocates for a sequence and then
	// copies its table, so the second lookup is nearly always the first's.
	lastID    SeqID
	lastTable *table
}

// table is one sequence's block ids, in position order.
type table struct {
	blocks []int32
	// With prefix caching: blocks[:numHashed] have had their contents
	// hashed (published, or found to duplicate a published block), and
	// lastHash is the hash of blocks[numHashed-1], the parent of the next.
	numHashed int
	lastHash  BlockHash
}

// lookup finds seq's table, or nil.
func (m *Manager) lookup(seq SeqID) *table {
	if m.lastTable != nil && m.lastID == seq {
		return m.lastTable
	}
	t := m.tables[seq]
	if t != nil {
		m.lastID, m.lastTable = seq, t
	}
	return t
}

// blocksOf is seq's block ids (nil if unknown).
func (m *Manager) blocksOf(seq SeqID) []int32 {
	if t := m.lookup(seq); t != nil {
		return t.blocks
	}
	return nil
}

// Option changes how New builds a Manager.
type Option func(*Manager)

// WithPrefixCaching keeps the contents of full blocks for reuse by later
// sequences with the same prefix (vLLM's automatic prefix caching).
func WithPrefixCaching() Option {
	return func(m *Manager) { m.prefix.enable(m.numBlocks) }
}

// New returns a pool of numBlocks blocks of blockSize tokens; blockSize zero
// means DefaultBlockSize.
func New(numBlocks, blockSize int, opts ...Option) (*Manager, error) {
	if blockSize == 0 {
		blockSize = DefaultBlockSize
	}
	if numBlocks < 1 {
		return nil, fmt.Errorf("%w: num_blocks must be at least 1, got %d", ErrInvalid, numBlocks)
	}
	if blockSize < 1 {
		return nil, fmt.Errorf("%w: block_size must be at least 1, got %d", ErrInvalid, blockSize)
	}
	m := &Manager{
		blockSize: blockSize,
		numBlocks: numBlocks,
		free:      newFreeList(numBlocks),
		refs:      make([]int32, numBlocks),
		tables:    make(map[SeqID]*table),
	}
	// Taken in order 0, 1, 2, ... so traces are easy to read.
	for id := range numBlocks {
		m.free.pushBack(int32(id))
	}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// BlockSize is the number of tokens per block.
func (m *Manager) BlockSize() int { return m.blockSize }

// NumBlocks is the size of the pool.
func (m *Manager) NumBlocks() int { return m.numBlocks }

// NumFree is the number of blocks no sequence holds (cached contents
// included: the pool takes them back when it needs them).
func (m *Manager) NumFree() int { return m.free.len() }

// NumUsed is the number of blocks held by at least one sequence.
func (m *Manager) NumUsed() int { return m.numBlocks - m.free.len() }

// Usage is the fraction of the pool in use, in [0, 1].
func (m *Manager) Usage() float64 { return float64(m.NumUsed()) / float64(m.numBlocks) }

// NumSeqs is the number of sequences holding blocks.
func (m *Manager) NumSeqs() int { return len(m.tables) }

// BlocksFor is the number of blocks that numTokens tokens occupy.
func (m *Manager) BlocksFor(numTokens int) int {
	return (numTokens + m.blockSize - 1) / m.blockSize
}

// Allocate makes sure seq has blocks for numTokens tokens in all, adding
// blocks to its table only when numTokens crosses a block boundary. A new
// seq gets a new table. It returns false, changing nothing, when the pool has
// too few free blocks. A table never shrinks: numTokens below what seq already
// holds is a no-op.
func (m *Manager) Allocate(seq SeqID, numTokens int) (bool, error) {
	if numTokens < 0 {
		return false, fmt.Errorf("%w: numTokens %d is negative", ErrInvalid, numTokens)
	}
	t := m.lookup(seq)
	have := 0
	if t != nil {
		have = len(t.blocks)
	}
	need := m.BlocksFor(numTokens) - have
	if need <= 0 {
		return true, nil
	}
	if need > m.free.len() {
		return false, nil
	}
	if t == nil {
		t = m.newTable(seq)
	}
	for range need {
		t.blocks = append(t.blocks, m.take())
	}
	return true, nil
}

// newTable registers an empty table for seq.
func (m *Manager) newTable(seq SeqID) *table {
	t := &table{}
	m.tables[seq] = t
	m.lastID, m.lastTable = seq, t
	return t
}

// take removes the front block from the free list and gives it one holder,
// evicting its cached contents if it has any.
func (m *Manager) take() int32 {
	id := m.free.front()
	m.free.remove(id)
	m.prefix.evict(id)
	m.refs[id] = 1
	return id
}

// CanAllocate reports whether Allocate(seq, numTokens) would succeed.
func (m *Manager) CanAllocate(seq SeqID, numTokens int) bool {
	return m.BlocksFor(numTokens)-len(m.blocksOf(seq)) <= m.free.len()
}

// Free releases every block of seq (blocks shared with other sequences stay
// until their last holder frees them). Freeing an unknown or already freed
// sequence returns ErrUnknownSeq and changes nothing.
func (m *Manager) Free(seq SeqID) error {
	t := m.lookup(seq)
	if t == nil {
		return fmt.Errorf("%w: %d", ErrUnknownSeq, seq)
	}
	// Free in reverse. Blocks without cached contents go to the front, so
	// the next allocation reuses the table's first block first, keeping
	// allocation order readable in traces. Cached blocks go to the back, so
	// a sequence's last blocks, the least likely to be shared, are evicted
	// before its first ones (as in vLLM).
	for i := len(t.blocks) - 1; i >= 0; i-- {
		id := t.blocks[i]
		m.refs[id]--
		if m.refs[id] > 0 {
			continue
		}
		if m.prefix.has(id) {
			m.free.pushBack(id)
		} else {
			m.free.pushFront(id)
		}
	}
	delete(m.tables, seq)
	m.lastTable = nil
	return nil
}

// Has reports whether seq holds blocks.
func (m *Manager) Has(seq SeqID) bool {
	return m.lookup(seq) != nil
}

// NumSeqBlocks is the number of blocks in seq's table (0 if unknown).
func (m *Manager) NumSeqBlocks(seq SeqID) int { return len(m.blocksOf(seq)) }

// BlockTable returns a copy of seq's block table.
func (m *Manager) BlockTable(seq SeqID) []int32 {
	return append([]int32(nil), m.blocksOf(seq)...)
}

// AppendBlockTable appends seq's block ids to dst and returns it, so callers
// can fill a reused buffer without allocating.
func (m *Manager) AppendBlockTable(dst []int32, seq SeqID) []int32 {
	return append(dst, m.blocksOf(seq)...)
}

// RefCount is the number of holders of block id (0 for a free block).
func (m *Manager) RefCount(id int) int {
	if id < 0 || id >= m.numBlocks {
		return 0
	}
	return int(m.refs[id])
}

// Check verifies the pool's invariants: used + free = total, every held
// block has a positive count equal to its number of holders, and free
// blocks have none. Tests call it after every operation.
func (m *Manager) Check() error {
	holders := make([]int32, m.numBlocks)
	for seq, t := range m.tables {
		if len(t.blocks) == 0 {
			return fmt.Errorf("kv: seq %d has an empty table", seq)
		}
		for _, id := range t.blocks {
			if id < 0 || int(id) >= m.numBlocks {
				return fmt.Errorf("kv: seq %d holds block %d out of range", seq, id)
			}
			holders[id]++
		}
	}
	seen := make([]bool, m.numBlocks)
	numFree, sawCached := 0, false
	for id := m.free.front(); id != m.free.n; id = m.free.next[id] {
		if id < 0 || int(id) >= m.numBlocks {
			return fmt.Errorf("kv: free list holds %d, out of range", id)
		}
		if seen[id] {
			return fmt.Errorf("kv: block %d is free twice", id)
		}
		seen[id] = true
		numFree++
		if holders[id] != 0 || m.refs[id] != 0 {
			return fmt.Errorf("kv: free block %d has holders", id)
		}
		// Blocks without cached contents come first: take evicts cached
		// contents only when no other block is free.
		if m.prefix.has(id) {
			sawCached = true
		} else if sawCached {
			return fmt.Errorf("kv: free block %d without cached contents is behind cached ones", id)
		}
		if m.free.prev[m.free.next[id]] != id {
			return fmt.Errorf("kv: free list links broken after block %d", id)
		}
	}
	if numFree != m.free.len() {
		return fmt.Errorf("kv: free list has %d blocks, counts %d", numFree, m.free.len())
	}
	used := 0
	for id := range m.numBlocks {
		if holders[id] != m.refs[id] {
			return fmt.Errorf("kv: block %d refcount %d, holders %d", id, m.refs[id], holders[id])
		}
		if holders[id] > 0 {
			used++
		}
	}
	if used+numFree != m.numBlocks {
		return fmt.Errorf("kv: used %d + free %d != total %d", used, numFree, m.numBlocks)
	}
	for seq, t := range m.tables {
		if t.numHashed > len(t.blocks) {
			return fmt.Errorf("kv: seq %d has %d hashed blocks of %d", seq, t.numHashed, len(t.blocks))
		}
		// Past numHashed a sequence may still write its blocks, so none of
		// them may be one that others can reuse.
		for i, id := range t.blocks[t.numHashed:] {
			if m.prefix.has(id) {
				return fmt.Errorf("kv: seq %d block %d (id %d) is cached but not yet hashed by it", seq, t.numHashed+i, id)
			}
		}
	}
	return m.prefix.check()
}
