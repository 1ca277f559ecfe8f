package analysis

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestStandsAlone: the analysis is the layer above the load generator; it
// may import the load generator and the sweep's internal file helpers,
// never the reports or the runner above it (package sweep).
func TestStandsAlone(t *testing.T) {
	const sweep = "github.com/tinyserve/tinyserve/sweep"
	allowed := []string{sweep + "/loadgen", sweep + "/internal/files"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if (p == sweep || strings.HasPrefix(p, sweep+"/")) && !slices.Contains(allowed, p) {
				t.Errorf("%s imports %s, a higher layer", f, p)
			}
		}
	}
}
