// Package puretest checks from a test that a package stays a pure state
// machine: its non-test files import no clock, concurrency, I/O, logging or
// global randomness packages (the habit taken from etcd's raft).
package puretest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// forbidden are the imports a pure package may not have.
var forbidden = map[string]bool{
	"time": true, "context": true, "sync": true, "sync/atomic": true, "os": true, "net": true,
	"log": true, "log/slog": true, "math/rand": true, "math/rand/v2": true,
}

// Check fails t for every forbidden import in the non-test Go files of dir.
func Check(t testing.TB, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if forbidden[p] || strings.HasPrefix(p, "net/") || strings.HasPrefix(p, "os/") {
				t.Errorf("%s imports %q; the package must stay pure", f, p)
			}
		}
	}
}
