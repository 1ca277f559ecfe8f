package loadgen

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStandsAlone: the load generator is the sweep's lowest layer; it may
// import the workload and internal helpers (sweep/internal/files among
// them), never the runner above it (package sweep) or any other package
// under it.
func TestStandsAlone(t *testing.T) {
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
			if p == "github.com/tinyserve/tinyserve/sweep" || (strings.HasPrefix(p, "github.com/tinyserve/tinyserve/sweep/") && p != "github.com/tinyserve/tinyserve/sweep/loadgen" && p != "github.com/tinyserve/tinyserve/sweep/internal/files") {
				t.Errorf("%s imports %s, a higher layer", f, p)
			}
		}
	}
}
