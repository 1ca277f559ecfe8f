package tokenizer

import "sync"

// bpeModel is a byte-level BPE model working directly on raw bytes: the
// vocabulary's byte-level strings are decoded once at load time, so encoding
// never builds byte-level strings. Ranks follow the order of the merges list.
type bpeModel struct {
	vocab        map[string]int32 // raw bytes of a token -> id
	byteID       [256]int32       // id of each single byte, -1 when missing
	merges       map[uint64]merge // (left id, right id) -> merge
	ignoreMerges bool
	unkID        int32 // -1 when there is no unknown token
	fuseUnk      bool
	cache        *wordCache
}

// merge is one BPE merge rule: its priority (lower first) and the id of the
// merged token.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// encode appends the ids of one pre-tokenized piece (raw bytes) to dst.
//
// The merge order is Hugging Face's (models/bpe/word.rs merge_all): always
// apply the lowest-ranked merge present, leftmost first on ties. With
// ignore_merges a piece that is itself in the vocabulary is one token.
func (m *bpeModel) encode(dst []int, piece string) []int {
	if piece == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[piece]; ok {
			return append(dst, int(id))
		}
	}
	if ids, ok := m.cache.get(piece); ok {
		for _, id := range ids {
			dst = append(dst, int(id))
		}
		return dst
	}
	ids := m.merge(piece)
	m.cache.put(piece, ids)
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst
}

// symbol is one element of the doubly linked list of tokens being merged.
type symbol struct {
	id         int32
	prev, next int32 // indexes into the list, -1 at the ends
	gone       bool  // merged into its left neighbour
}

// candidate is a possible merge of the symbol at pos with its right neighbour.
type candidate struct {
	rank, pos, id int32
}

func (c candidate) less(o candidate) bool {
	return c.rank < o.rank || c.rank == o.rank && c.pos < o.pos
}

// merge runs BPE over the bytes of piece and returns the resulting ids.
func (m *bpeModel) merge(piece string) []int32 {
	syms := make([]symbol, 0, len(piece))
	var unkRun bool
	for i := 0; i < len(piece); i++ {
		id := m.byteID[piece[i]]
		if id < 0 {
			// A byte the vocabulary lacks: the unknown token (fused with
			// a preceding one when fuse_unk), or nothing at all when there
			// is none, as in Hugging Face's BPE.
			if m.unkID < 0 || (m.fuseUnk && unkRun) {
				continue
			}
			id, unkRun = m.unkID, true
		} else {
			unkRun = false
		}
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1

	var h mergeHeap
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(candidate{mg.rank, int32(i), mg.id})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		left := &syms[c.pos]
		if left.gone || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		// Skip stale candidates: one of the two symbols changed since.
		if mg, ok := m.merges[pairKey(left.id, right.id)]; !ok || mg.id != c.id {
			continue
		}
		left.id = c.id
		right.gone = true
		left.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = c.pos
		}
		if left.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[left.prev].id, left.id)]; ok {
				h.push(candidate{mg.rank, left.prev, mg.id})
			}
		}
		if left.next >= 0 {
			if mg, ok := m.merges[pairKey(left.id, syms[left.next].id)]; ok {
				h.push(candidate{mg.rank, c.pos, mg.id})
			}
		}
	}
	out := make([]int32, 0, len(syms))
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	return out
}

// mergeHeap is a binary min-heap of candidates (container/heap would box
// every element in an interface).
type mergeHeap []candidate

func (h *mergeHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[small]) {
			small = l
		}
		if r < len(s) && s[r].less(s[small]) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// wordCache remembers the BPE result of frequent pieces. Natural text repeats
// a small set of words, so this skips most merging work. It stops growing at
// a fixed size rather than evicting, which bounds memory with no bookkeeping.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	wordCacheEntries = 1 << 16
	wordCacheMaxLen  = 64 // longer pieces are rare and not worth keeping
)

func newWordCache() *wordCache { return &wordCache{m: make(map[string][]int32)} }

func (c *wordCache) get(piece string) ([]int32, bool) {
	if len(piece) > wordCacheMaxLen {
		return nil, false
	}
	c.mu.RLock()
	ids, ok := c.m[piece]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(piece string, ids []int32) {
	if len(piece) > wordCacheMaxLen {
		return
	}
	c.mu.Lock()
	if len(c.m) < wordCacheEntries {
		c.m[piece] = ids
	}
	c.mu.Unlock()
}
