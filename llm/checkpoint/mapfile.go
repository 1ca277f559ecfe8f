package checkpoint

import (
	"fmt"
	"os"
)

// MapFile maps the whole file at path read-only (reading it onto the heap
// where mapping is unavailable) and returns its bytes with the function
// that releases them. Other weight formats (llm/gguf) share the page-cache
// mapping safetensors files get rather than copy weights onto the heap.
func MapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, release, err := mapFile(f, st.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, release, nil
}
