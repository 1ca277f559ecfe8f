//go:build !race

package f32

import (
	"runtime"
	"testing"
	"unsafe"
)

// hugePageFloats is 2 MiB in floats: above it NewBuffer maps memory outside the heap.
const hugePageFloats = 2 << 20 / 4

// TestMulAddAllocs checks that a product with a ragged last panel (the
// path that uses a scratch tile) allocates nothing: the decode loop calls
// MulAdd thousands of times per step.
func TestMulAddAllocs(t *testing.T) {
	const k, n, m = 64, 45, 7
	p := Pack(make([]float32, k*n), k, n)
	p16 := PackBF16(make([]float32, k*n), k, n)
	x := make([]float32, m*k)
	y := make([]float32, m*n)
	a, b := make([]float32, 64), make([]float32, 64)
	for _, ks := range available() {
		allocs := testing.AllocsPerRun(20, func() {
			p.mulAdd(ks, y, n, x, k, m, 0, n)
			p16.mulAdd(ks, y, n, x, k, m, 0, n)
			_ = ks.dotSlices(a, b)
			ks.axpySlices(a, 0.5, b)
			ks.scaleSlice(a, 0.5)
			ks.axpyRows(a[:16], b[:4], b)
			ks.dotRows(a[:4], b[:16], b)
			_ = ks.expSubSum(a, 1)
			ks.geluTanh(a)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per MulAdd", ks.name, allocs)
		}
	}
}

// TestNewBuffer checks a buffer's shape: zeroed, cache-line aligned, and
// usable end to end, both below and above the huge-page mapping size.
func TestNewBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 1000, hugePageFloats + 3} {
		b := NewBuffer(n)
		f := b.Floats()
		if len(f) != n {
			t.Fatalf("NewBuffer(%d) has %d floats", n, len(f))
		}
		if n == 0 {
			continue
		}
		if addr := uintptr(unsafe.Pointer(&f[0])); addr%64 != 0 {
			t.Errorf("NewBuffer(%d) starts at %#x, not on a cache line", n, addr)
		}
		for i, v := range f {
			if v != 0 {
				t.Fatalf("NewBuffer(%d)[%d] = %v, want 0", n, i, v)
			}
		}
		f[0], f[n-1] = 1, 2
		runtime.KeepAlive(b)
	}
}
