// Package fuzzseed adds files as seeds to a fuzz target, so that the real
// inputs a parser meets (committed experiments, fixtures' config files)
// are always part of its corpus.
package fuzzseed

import (
	"os"
	"path/filepath"
	"testing"
)

// AddFiles adds the contents of every file matching pattern (filepath.Glob)
// to f's seed corpus, each as a single []byte argument, and returns how
// many it added. A file that matches but cannot be read fails f.
func AddFiles(f *testing.F, pattern string) int {
	f.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	return len(paths)
}
