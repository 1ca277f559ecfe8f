package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigSyntaxErrorPosition: a typo in an experiment file is
// reported with the file, line and column.
func TestLoadConfigSyntaxErrorPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exp.json")
	if err := os.WriteFile(path, []byte("{\n  \"name\": \"x\"\n  \"buckets\": []\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.HasPrefix(err.Error(), "experiment "+path+":3:3: ") {
		t.Fatalf("got %v, want experiment %s:3:3: ...", err, path)
	}
}
