package checkpoint

import (
	"fmt"
	"io"
	"os"
)

// readFile reads the whole file onto the heap: the fallback where mapping
// is unavailable or fails (some file systems do not support mmap).
func readFile(f *os.File, size int64) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), data); err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, func() error { return nil }, nil
}
