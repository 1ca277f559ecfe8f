//go:build !linux

package f32

// allocFloats returns n zeroed floats from the Go heap, cache-line aligned.
func allocFloats(_ *Packed, n int) []float32 { return heapFloats(n) }
