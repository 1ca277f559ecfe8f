//go:build !linux

package f32

import "unsafe"

// allocPanels returns size zeroed bytes from the Go heap, 64-byte aligned.
func allocPanels(_ *Packed, size int) unsafe.Pointer { return heapPanels(size) }
