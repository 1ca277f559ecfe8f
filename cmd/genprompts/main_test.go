package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/workload"
)

const testWorkload = `{
  "name": "tiny_c1",
  "model": "gpt2",
  "tokenizer": "gpt2",
  "seed": 3,
  "request_count": 4,
  "temperature": 0.0,
  "buckets": [{"name": "tiny_c1", "count": 4, "prompt_tokens": 40, "output_tokens": 8}]
}
`

// sweepConfig is not a workload (no buckets) and must be skipped by "all".
const sweepConfig = `{"name": "example", "prompts": "prompts/tiny_c1.jsonl", "concurrency": [1, 2]}`

// setup makes a working folder with an experiments/ folder and returns it.
func setup(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	exp := filepath.Join(dir, "experiments")
	if err := os.Mkdir(exp, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"tiny_c1.json": testWorkload, "example.json": sweepConfig} {
		if err := os.WriteFile(filepath.Join(exp, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run runs genprompts with args in dir; relative paths resolve against the
// working folder, so the flags are given as absolute paths.
func run(t *testing.T, dir string, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{"genprompts",
		"--experiments", filepath.Join(dir, "experiments"),
		"--output-dir", filepath.Join(dir, "prompts")}, args...)
	err := newApp(&stdout, &stderr, func(k string) string { return env[k] }).Run(full)
	return stdout.String(), stderr.String(), err
}

func TestGenerateVerifyExport(t *testing.T) {
	dir := setup(t)
	out, _, err := run(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(out)
	if len(fields) != 3 || fields[0] != "generated" || fields[1] != "tiny_c1" || len(fields[2]) != 64 {
		t.Fatalf("generate printed %q; want one 'generated tiny_c1 <sha256>' line (example.json skipped)", out)
	}
	digest := fields[2]

	out, _, err = run(t, dir, nil, "--verify")
	if err != nil {
		t.Fatal(err)
	}
	if out != "verified tiny_c1 "+digest+"\n" {
		t.Fatalf("verify printed %q", out)
	}

	exportDir := filepath.Join(dir, "aiperf")
	out, _, err = run(t, dir, nil, "--export", "aiperf", "--export-dir", exportDir, "--workload", "tiny_c1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "exported tiny_c1 ") {
		t.Fatalf("export printed %q", out)
	}
	data, err := os.ReadFile(filepath.Join(exportDir, "tiny_c1.aiperf.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("export has %d lines, want 4", len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first["output_length"] != 8.0 || !strings.HasPrefix(first["text"].(string), "tiny_c1 request 000000.") {
		t.Fatalf("first export line = %v", first)
	}
}

func TestVerifyFailsOnTamperedFile(t *testing.T) {
	dir := setup(t)
	if _, _, err := run(t, dir, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prompts", "tiny_c1.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte("Analyze"), []byte("Analyse"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, dir, nil, "--verify")
	if err == nil || !strings.Contains(err.Error(), "tiny_c1") || !strings.Contains(err.Error(), "workload_sha256") {
		t.Fatalf("err = %v, want a mismatch naming the workload and the digest", err)
	}
	// Export refuses files that do not verify.
	if _, _, err := run(t, dir, nil, "--export", "aiperf"); err == nil {
		t.Fatal("export of a tampered workload succeeded")
	}
}

// TestVerifyCatchesRecomputedDigest: an edit hidden by recomputing the
// sidecar's workload_sha256 still fails --verify, which names the row.
func TestVerifyCatchesRecomputedDigest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func([]byte) []byte
		mention string
	}{
		{"text", func(b []byte) []byte { return bytes.Replace(b, []byte("Analyze"), []byte("Analyse"), 1) }, "row 1 (tiny_c1_000000)"},
		{"order", func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			lines[0], lines[1] = lines[1], lines[0]
			return bytes.Join(lines, nil)
		}, `row 1: id "tiny_c1_000001"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			if _, _, err := run(t, dir, nil); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, "prompts", "tiny_c1.jsonl")
			meta := filepath.Join(dir, "prompts", "tiny_c1.metadata.json")
			before, err := os.ReadFile(data)
			if err != nil {
				t.Fatal(err)
			}
			after := tc.edit(before)
			m, err := os.ReadFile(meta)
			if err != nil {
				t.Fatal(err)
			}
			m = bytes.Replace(m, []byte(workload.SHA256(before)), []byte(workload.SHA256(after)), 1)
			if err := os.WriteFile(data, after, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(meta, m, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err = run(t, dir, nil, "--verify")
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want a mismatch mentioning %q", err, tc.mention)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	dir := setup(t)
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"unknown workload", []string{"--workload", "nope"}, "nope"},
		{"sweep config by name", []string{"--workload", "example"}, "not a workload"},
		{"bad export format", []string{"--export", "csv"}, "aiperf"},
		{"missing tokenizer", []string{"--tokenizer", "Org/Missing"}, "looked in"},
		{"verify before generate", []string{"--verify"}, "tiny_c1"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, dir, map[string]string{"HF_HUB_CACHE": t.TempDir()}, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want mention of %q", err, tc.mention)
			}
		})
	}
}

// TestBrokenJSONIsNotSkipped: a file in the experiments folder that is not
// JSON could be a workload with a typo, so "all" refuses it by name rather
// than skipping it as it skips sweep configs; naming it does the same.
func TestBrokenJSONIsNotSkipped(t *testing.T) {
	dir := setup(t)
	if err := os.WriteFile(filepath.Join(dir, "experiments", "typo.json"), []byte(`{"name": "typo", "buckets": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--workload", "typo"}} {
		_, _, err := run(t, dir, nil, args...)
		if err == nil || !strings.Contains(err.Error(), "typo.json is not valid JSON") {
			t.Errorf("%v: err = %v, want typo.json named as not valid JSON", args, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "prompts", "tiny_c1.jsonl")); err == nil {
		t.Error("the other workloads were generated although the folder has a broken file")
	}
}

// TestVerifyWithoutTokenizer: when the tokenizer cannot be found, verify
// still checks everything else and says the prompts were not regenerated.
func TestVerifyWithoutTokenizer(t *testing.T) {
	dir := setup(t)
	if _, _, err := run(t, dir, nil); err != nil {
		t.Fatal(err)
	}
	// Point the workload at a tokenizer that is not on this machine.
	path := filepath.Join(dir, "experiments", "tiny_c1.json")
	cfgMeta := filepath.Join(dir, "prompts", "tiny_c1.metadata.json")
	for _, p := range []string{path, cfgMeta} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte(`"tokenizer": "gpt2"`), []byte(`"tokenizer": "Org/Absent"`), 1)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := run(t, dir, map[string]string{"HF_HUB_CACHE": t.TempDir()}, "--verify")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "verified tiny_c1 ") || !strings.Contains(errOut, "not regenerated") {
		t.Fatalf("stdout %q, stderr %q", out, errOut)
	}
}

// TestVerifyMissingNamedTokenizer: a tokenizer named with --tokenizer that
// cannot be found is an error with --verify and --export too, as it is when
// generating: the user asked for it, so a note would hide a typo.
func TestVerifyMissingNamedTokenizer(t *testing.T) {
	dir := setup(t)
	if _, _, err := run(t, dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, extra := range []string{"--verify", "--export=aiperf"} {
		out, errOut, err := run(t, dir, map[string]string{"HF_HUB_CACHE": t.TempDir()}, extra, "--tokenizer", "Org/Missing")
		if err == nil || !strings.Contains(err.Error(), `"Org/Missing" not found`) {
			t.Errorf("%s: err = %v, want the tokenizer named as not found (stdout %q, stderr %q)", extra, err, out, errOut)
		}
		if err != nil && strings.Contains(err.Error(), "generate the workload") {
			t.Errorf("%s: err = %v; generating first would not help", extra, err)
		}
	}
}
