//go:build !amd64 || purego

package f32

func prefetchT1(*float32, int) {}
