//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package checkpoint

import "os"

// mapFile reads the whole file: this platform has no syscall.Mmap.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	return readFile(f, size)
}
