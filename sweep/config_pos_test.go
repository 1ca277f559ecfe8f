package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigSyntaxErrorPosition: a typo in a sweep config is reported
// with the file, line and column (before, encoding/json's message alone
// named neither the file's line nor its column).
func TestLoadConfigSyntaxErrorPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.json")
	if err := os.WriteFile(path, []byte("{\n  \"name\": \"x\",\n  \"concurrency\": [1, 2,, 4]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3:24: ") {
		t.Fatalf("got %v, want %s:3:24: ...", err, path)
	}
}
