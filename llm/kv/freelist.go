package kv

// freeList holds the blocks no sequence holds, as a doubly linked list over
// block ids (vLLM's FreeKVCacheBlockQueue). Blocks are taken from the front.
// A block with no cached contents is put back at the front, so the block
// freed last is reused first and stays hot in the caches, as a stack would.
// A block whose contents are cached for prefix reuse goes to the back, so
// cached blocks are evicted least recently freed first, and only after
// every block without contents is gone. A block leaves the middle of the
// list in O(1) when a new sequence reuses its cached contents.
type freeList struct {
	next, prev []int32 // per block, and one sentinel at index n
	n          int32   // the sentinel's index: the number of blocks
	size       int
}

func newFreeList(numBlocks int) freeList {
	l := freeList{next: make([]int32, numBlocks+1), prev: make([]int32, numBlocks+1), n: int32(numBlocks)}
	l.next[l.n], l.prev[l.n] = l.n, l.n
	return l
}

func (l *freeList) len() int { return l.size }

// front is the block that the next take returns; only valid when len > 0.
func (l *freeList) front() int32 { return l.next[l.n] }

// pushFront and pushBack insert a block that is not in the list.
func (l *freeList) pushFront(id int32) { l.insertAfter(id, l.n) }
func (l *freeList) pushBack(id int32)  { l.insertAfter(id, l.prev[l.n]) }

func (l *freeList) insertAfter(id, at int32) {
	nx := l.next[at]
	l.next[at], l.prev[id] = id, at
	l.next[id], l.prev[nx] = nx, id
	l.size++
}

// remove takes a block that is in the list out of it.
func (l *freeList) remove(id int32) {
	p, nx := l.prev[id], l.next[id]
	l.next[p], l.prev[nx] = nx, p
	l.next[id], l.prev[id] = -1, -1
	l.size--
}
