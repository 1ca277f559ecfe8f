//go:build linux

package f32

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the transparent huge page size on x86-64 and arm64 Linux.
const hugePage = 2 << 20

// allocLarge returns size zeroed bytes, 64-byte aligned, that stay valid
// while owner is reachable. Sizes of at least one huge page are mapped
// outside the Go heap and advised MADV_HUGEPAGE: a decode step streams
// every weight once, and with 4 KiB pages it would also walk (and on first
// touch, fault in) a page every 4 KiB, which costs tens of microseconds
// per fault on the VMs we measure. The mapping is released when owner is
// garbage collected. Smaller sizes, or a failed mapping, use the Go heap.
func allocLarge[T any](owner *T, size int) unsafe.Pointer {
	if size < hugePage {
		return heapPanels(size)
	}
	// Over-allocate by one huge page so the start can be aligned to it:
	// the kernel backs only aligned 2 MiB ranges with huge pages.
	mem, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return heapPanels(size)
	}
	off := int((hugePage - uintptr(unsafe.Pointer(&mem[0]))%hugePage) % hugePage)
	// Advice is best effort: without THP the mapping still works.
	_ = unix.Madvise(mem[off:off+size], unix.MADV_HUGEPAGE)
	runtime.AddCleanup(owner, func(m []byte) { _ = unix.Munmap(m) }, mem)
	return unsafe.Pointer(&mem[off])
}
