package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// batchDir makes a folder with experiments/ holding validConfig as
// unit.json and a sweep config (no buckets) beside it, and returns it.
func batchDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	exp := filepath.Join(dir, "experiments")
	if err := os.Mkdir(exp, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"unit.json": validConfig, "sweep.json": `{"name": "s", "concurrency": [1]}`} {
		if err := os.WriteFile(filepath.Join(exp, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBatch: a Batch generates, verifies and exports the workloads
// ExperimentFiles lists, one line each; the sweep config is skipped.
func TestBatch(t *testing.T) {
	dir := batchDir(t)
	paths, err := ExperimentFiles(filepath.Join(dir, "experiments"), "all")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || filepath.Base(paths[0]) != "unit.json" {
		t.Fatalf("ExperimentFiles = %v, want unit.json alone", paths)
	}
	var out bytes.Buffer
	b := &Batch{Dir: filepath.Join(dir, "prompts"), Out: &out}
	if err := b.Generate(paths[0]); err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(out.String())
	if len(fields) != 3 || fields[0] != "generated" || fields[1] != "unit" || len(fields[2]) != 64 {
		t.Fatalf("Generate printed %q", out.String())
	}
	out.Reset()
	if err := b.Verify(paths[0]); err != nil {
		t.Fatal(err)
	}
	if out.String() != "verified unit "+fields[2]+"\n" {
		t.Fatalf("Verify printed %q", out.String())
	}
	out.Reset()
	if err := b.ExportAIPerf(paths[0], filepath.Join(dir, "aiperf")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "aiperf", "unit.aiperf.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != 6 || !strings.HasPrefix(out.String(), "exported unit ") {
		t.Fatalf("export wrote %d lines and printed %q", n, out.String())
	}
}

// TestBatchMissingTokenizer: the workload's own tokenizer missing is a
// note and a verification without token counts; a Batch.Tokenizer missing
// is an error, for export too, that does not advise generating first.
func TestBatchMissingTokenizer(t *testing.T) {
	dir := batchDir(t)
	path := filepath.Join(dir, "experiments", "unit.json")
	prompts := filepath.Join(dir, "prompts")
	if err := (&Batch{Dir: prompts}).Generate(path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, filepath.Join(prompts, "unit.metadata.json")} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Replace(b, []byte(`"tokenizer": "gpt2"`), []byte(`"tokenizer": "Org/Absent"`), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := tokenizer.LoadOptions{HFHubCache: t.TempDir()}
	var out, notes bytes.Buffer
	if err := (&Batch{Dir: prompts, LoadOptions: opts, Out: &out, Notes: &notes}).Verify(path); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "verified unit ") || !strings.Contains(notes.String(), "not regenerated") {
		t.Fatalf("out %q, notes %q", out.String(), notes.String())
	}
	named := &Batch{Dir: prompts, Tokenizer: "Org/Missing", LoadOptions: opts}
	for name, run := range map[string]func() error{
		"verify": func() error { return named.Verify(path) },
		"export": func() error { return named.ExportAIPerf(path, t.TempDir()) },
	} {
		err := run()
		if err == nil || !strings.Contains(err.Error(), `"Org/Missing" not found`) || strings.Contains(err.Error(), "generate the workload") {
			t.Errorf("%s: err = %v, want the named tokenizer not found, without advice to generate", name, err)
		}
	}
}

// TestExperimentFilesBrokenJSON: a file that is not JSON is refused by
// name, whether listed with "all" or named.
func TestExperimentFilesBrokenJSON(t *testing.T) {
	dir := batchDir(t)
	exp := filepath.Join(dir, "experiments")
	if err := os.WriteFile(filepath.Join(exp, "typo.json"), []byte(`{"buckets": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"all", "typo"} {
		if _, err := ExperimentFiles(exp, name); err == nil || !strings.Contains(err.Error(), "typo.json is not valid JSON") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := ExperimentFiles(exp, "sweep"); err == nil || !strings.Contains(err.Error(), "not a workload") {
		t.Errorf("sweep config by name: err = %v", err)
	}
}
