package kv

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// BlockHash names the contents of a full block: the SHA-256 of the hash of
// the block before it (zero for a sequence's first block) and the block's
// token ids. Equal hashes mean equal tokens from position 0 to the end of
// the block, so equal KV. A cryptographic hash makes a collision, which
// would silently hand one prompt another's KV, out of reach (vLLM's default
// is SHA-256 too).
type BlockHash [sha256.Size]byte

// prefixCache indexes the blocks whose contents can be reused. A block is
// in it from when its last token's KV is computed, or planned to be by the
// step that shares it (CacheBlocks), until the pool takes it back for other
// contents (evict), whether or not sequences hold it meanwhile.
type prefixCache struct {
	enabled bool
	index   map[BlockHash]int32 // contents -> the block holding them
	hashes  []BlockHash         // per block, valid where cached is set
	cached  []bool
	buf     []byte // hash input, reused
}

func (c *prefixCache) enable(numBlocks int) {
	c.enabled = true
	c.index = make(map[BlockHash]int32)
	c.hashes = make([]BlockHash, numBlocks)
	c.cached = make([]bool, numBlocks)
}

// has reports whether block id holds cached contents.
func (c *prefixCache) has(id int32) bool { return c.enabled && c.cached[id] }

// evict forgets block id's contents, if it has any: it is about to be
// overwritten.
func (c *prefixCache) evict(id int32) {
	if !c.has(id) {
		return
	}
	delete(c.index, c.hashes[id])
	c.cached[id] = false
}

// hash is the BlockHash of a block of tokens after parent.
func (c *prefixCache) hash(parent BlockHash, tokens []int) BlockHash {
	c.buf = append(c.buf[:0], parent[:]...)
	for _, t := range tokens {
		c.buf = binary.LittleEndian.AppendUint64(c.buf, uint64(t))
	}
	return sha256.Sum256(c.buf)
}

// check verifies that the index and the per-block marks agree.
func (c *prefixCache) check() error {
	if !c.enabled {
		return nil
	}
	n := 0
	for id := range c.cached {
		if c.cached[id] {
			n++
			if got, ok := c.index[c.hashes[id]]; !ok || got != int32(id) {
				return fmt.Errorf("kv: cached block %d is not indexed by its hash", id)
			}
		}
	}
	if n != len(c.index) {
		return fmt.Errorf("kv: %d cached blocks, %d index entries", n, len(c.index))
	}
	return nil
}

// PrefixCaching reports whether the manager keeps block contents for reuse.
func (m *Manager) PrefixCaching() bool { return m.prefix.enabled }

// NumCachedBlocks is the number of blocks whose contents can be reused,
// held by sequences or free.
func (m *Manager) NumCachedBlocks() int { return len(m.prefix.index) }

// CachedPrefix appends to dst the ids of the cached blocks that hold the
// longest prefix of tokens made of whole blocks, and returns it; the prefix
// is len(result)*BlockSize() tokens long. It changes nothing: pass the
// result to AllocateWithPrefix before any other call. Without prefix
// caching it returns dst unchanged.
func (m *Manager) CachedPrefix(dst []int32, tokens []int) []int32 {
	if !m.prefix.enabled {
		return dst
	}
	var parent BlockHash
	for end := m.blockSize; end <= len(tokens); end += m.blockSize {
		h := m.prefix.hash(parent, tokens[end-m.blockSize:end])
		id, ok := m.prefix.index[h]
		if !ok {
			break
		}
		dst = append(dst, id)
		parent = h
	}
	return dst
}

// AllocateWithPrefix gives seq, which must hold no blocks, the cached
// blocks of prefix (CachedPrefix's result, with no call in between),
// shared with whoever else holds them, then new blocks up to numTokens
// tokens in all. It returns false, changing nothing, when the pool has too
// few free blocks; reusing a free cached block takes it from the free
// blocks too.
func (m *Manager) AllocateWithPrefix(seq SeqID, prefix []int32, numTokens int) (bool, error) {
	if numTokens < 0 {
		return false, fmt.Errorf("%w: numTokens %d is negative", ErrInvalid, numTokens)
	}
	if m.lookup(seq) != nil {
		return false, fmt.Errorf("%w: seq %d already holds blocks", ErrInvalid, seq)
	}
	reusedFree := 0
	for _, id := range prefix {
		if id < 0 || int(id) >= m.numBlocks || !m.prefix.has(id) {
			return false, fmt.Errorf("%w: block %d holds no cached contents", ErrInvalid, id)
		}
		if m.refs[id] == 0 {
			reusedFree++
		}
	}
	need := max(m.BlocksFor(numTokens)-len(prefix), 0)
	if need+reusedFree > m.free.len() {
		return false, nil
	}
	if len(prefix) == 0 && need == 0 {
		return true, nil // like Allocate: no table for no tokens
	}
	t := m.newTable(seq)
	for _, id := range prefix {
		if m.refs[id] == 0 {
			m.free.remove(id)
		}
		m.refs[id]++
		t.blocks = append(t.blocks, id)
	}
	if len(prefix) > 0 {
		t.numHashed = len(prefix)
		t.lastHash = m.prefix.hashes[prefix[len(prefix)-1]]
	}
	for range need {
		t.blocks = append(t.blocks, m.take())
	}
	return true, nil
}

// CacheBlocks publishes seq's full blocks among its first numComputed
// tokens for reuse: tokens are seq's tokens from position 0, and the KV of
// the first numComputed of them is in the cache, or will be before anyone
// reads it (the scheduler publishes what a step computes when it plans the
// step). A block whose contents
// another block already holds stays private (both hold the same KV; the
// first one keeps serving hits), unless no sequence holds that other block:
// then seq's block takes over the contents and the free one becomes a plain
// free block, reused first, so that taking it for other contents cannot
// lose contents seq still holds. Without prefix caching it does nothing.
func (m *Manager) CacheBlocks(seq SeqID, tokens []int, numComputed int) error {
	if !m.prefix.enabled {
		return nil
	}
	t := m.lookup(seq)
	if t == nil {
		return fmt.Errorf("%w: %d", ErrUnknownSeq, seq)
	}
	if numComputed < 0 || numComputed > len(tokens) {
		return fmt.Errorf("%w: %d computed of %d tokens", ErrInvalid, numComputed, len(tokens))
	}
	full := min(numComputed/m.blockSize, len(t.blocks))
	for ; t.numHashed < full; t.numHashed++ {
		i := t.numHashed
		h := m.prefix.hash(t.lastHash, tokens[i*m.blockSize:(i+1)*m.blockSize])
		id := t.blocks[i]
		if other, dup := m.prefix.index[h]; dup && m.refs[other] == 0 && !m.prefix.cached[id] {
			m.prefix.evict(other)
			m.free.remove(other)
			m.free.pushFront(other)
		}
		if _, dup := m.prefix.index[h]; !dup && !m.prefix.cached[id] {
			m.prefix.index[h] = id
			m.prefix.hashes[id] = h
			m.prefix.cached[id] = true
		}
		t.lastHash = h
	}
	return nil
}
