package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// TestCommittedWorkloads is the CI check of the repository's own workloads:
// every workload in experiments/ has prompt files in prompts/ that verify,
// token counts included, with the fixture tokenizers, and no prompt file is
// left without its experiment.
func TestCommittedWorkloads(t *testing.T) {
	const experiments, prompts = "../experiments", "../prompts"
	// The tokenizers the committed experiments name, from the fixtures.
	tokenizers := map[string]func(testing.TB) llm.Tokenizer{
		"gpt2":                       func(tb testing.TB) llm.Tokenizer { return gpt2(tb) },
		"Qwen/Qwen2.5-0.5B-Instruct": func(tb testing.TB) llm.Tokenizer { return qwen(tb) },
	}
	entries, err := os.ReadDir(experiments)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(experiments, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !IsWorkload(data) {
			continue // sweep configs live here too
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		names[cfg.Name] = true
		t.Run(cfg.Name, func(t *testing.T) {
			if cfg.Name+".json" != e.Name() {
				t.Errorf("%s names workload %q; keep file and name equal", path, cfg.Name)
			}
			load, ok := tokenizers[cfg.Tokenizer]
			if !ok {
				t.Fatalf("no fixture tokenizer for %q; add one to this test", cfg.Tokenizer)
			}
			if _, err := Verify(prompts, cfg, load(t)); err != nil {
				t.Fatalf("%v\nregenerate with: go run ./cmd/genprompts --workload %s (see docs/workload.md)", err, cfg.Name)
			}
		})
	}
	if len(names) < 12 {
		t.Errorf("found %d workloads in %s, want at least the 12 committed ones", len(names), experiments)
	}
	files, err := filepath.Glob(filepath.Join(prompts, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		if strings.HasSuffix(name, ".aiperf") {
			continue
		}
		if !names[name] {
			t.Errorf("%s has no experiment file", f)
		}
	}
}
