//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint

import (
	"os"
	"syscall"
)

// mapFile maps the whole file read-only. Weights then live in the page
// cache, shared between processes and loaded lazily, instead of being
// copied onto the Go heap.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readFile(f, size)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
