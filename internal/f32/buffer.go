package f32

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Buffer is a large, long-lived float32 array (a KV cache) held in memory
// the way packed weights are: huge pages where the OS grants them, and
// every page touched before NewBuffer returns, so that no decode step pays
// a page fault the first time it writes a block (tens of microseconds per
// 4 KiB page on the VMs we measure: a batch-8 step entering fresh blocks
// spent about 3 ms of its 20 ms faulting). The memory lives as long as
// the Buffer: keep the *Buffer, not only its Floats, for as long as the
// floats are used.
type Buffer struct {
	data []float32
}

// pageFloats is the smallest page size in floats: the touch stride.
const pageFloats = 4096 / 4

// NewBuffer returns n zeroed floats, 64-byte aligned and resident.
func NewBuffer(n int) *Buffer {
	b := &Buffer{}
	if n <= 0 {
		return b
	}
	b.data = unsafe.Slice((*float32)(allocLarge(b, 4*n)), n)
	// A write per page faults it in now rather than during a step; the
	// memory is fresh and zero, so writing zero changes nothing. Faults on
	// a VM are slow (the host backs the page too), so large buffers are
	// touched from several goroutines, in chunks of whole huge pages.
	const chunk = 2 << 20 / 4
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i += pageFloats {
					b.data[i] = 0
				}
			}
		})
	}
	wg.Wait()
	return b
}

// Floats is the buffer's memory, valid while b is reachable.
func (b *Buffer) Floats() []float32 { return b.data }
