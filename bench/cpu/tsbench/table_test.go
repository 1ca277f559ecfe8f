package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTableBestOfRuns checks how repeated runs combine: each engine's best
// median counts, ratios are taken between those, and the strictest floor
// (the smallest) is the one reported.
func TestTableBestOfRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	lines := `# a comment line
{"engine":"tinyserve","case":"decode-b1","ms":12,"runs":5,"floor_ms":9}
{"engine":"peer","case":"decode-b1","ms":30,"runs":5}
{"engine":"tinyserve","case":"decode-b1","ms":10,"runs":5,"floor_ms":8}
{"engine":"peer","case":"decode-b1","ms":40,"runs":5}
{"engine":"peer","config":{"threads":2}}
{"engine":"peer","check":"greedy-16","ok":true}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := printTable(&out, path, "tinyserve", tableOptions{Yardstick: issueFloor}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"10.0", "30.0", "3.00x", "8.0", "1.25x", "best of its runs"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"12.0", "40.0", "9.0"} {
		if strings.Contains(got, bad) {
			t.Errorf("table shows %q, a slower run's figure:\n%s", bad, got)
		}
	}
}

// TestTableMarkdown checks the Markdown form and that configuration and
// check lines make no rows.
func TestTableMarkdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	lines := `{"engine":"a","config":{"threads":2}}
{"engine":"a","case":"prefill-512","ms":100,"runs":5}
{"engine":"b","case":"prefill-512","ms":150,"runs":5}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := printTable(&out, path, "a", tableOptions{Markdown: true}); err != nil {
		t.Fatal(err)
	}
	want := "| case | a ms | b ms | b/a | floor here ms | a/floor here |\n| --- | --- | --- | --- | --- | --- |\n| prefill-512 | 100.0 | 150.0 | 1.50x | — | — |\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
