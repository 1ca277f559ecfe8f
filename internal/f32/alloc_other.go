//go:build !linux

package f32

import "unsafe"

// allocLarge returns size zeroed bytes from the Go heap, 64-byte aligned.
func allocLarge[T any](_ *T, size int) unsafe.Pointer { return heapPanels(size) }
