//go:build amd64 && !purego

package f32

// prefetchT1 asks for lines 64-byte cache lines from p on to be brought
// into L2. Prefetches never fault, so the range may run past mapped memory.
//
//go:noescape
func prefetchT1(p *float32, lines int)
