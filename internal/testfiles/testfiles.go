// Package testfiles unpacks the repository's compressed test fixtures for
// tests: the tokenizer.json files are kept gzip-compressed (the Qwen one as
// llm/tokenizer's built-in copy), and a test that needs a plain file gets
// one in its own temporary folder.
package testfiles

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gunzip decompresses the gzip file gz into a new t.TempDir() under its
// name without ".gz", copies each file of beside (a tokenizer_config.json,
// say) into the same folder under its own name, and returns the
// decompressed file's path. It calls t.Fatal on any error.
func Gunzip(t testing.TB, gz string, beside ...string) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(gz), ".gz"))
	if err := gunzip(out, gz); err != nil {
		t.Fatal(err)
	}
	for _, p := range beside {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func gunzip(out, gz string) error {
	f, err := os.Open(gz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	w, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, zr); err != nil {
		w.Close()
		return err
	}
	if err := zr.Close(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// QwenTokenizer returns the path of a temporary copy of the Qwen3
// tokenizer.json (llm/tokenizer/builtin/qwen/tokenizer.json.gz, the one
// copy in the repository) with testdata/tokenizers/qwen3/tokenizer_config.json
// beside it. repoRoot is the repository root relative to the caller's
// package folder, as "../..".
func QwenTokenizer(t testing.TB, repoRoot string) string {
	t.Helper()
	return Gunzip(t, filepath.Join(repoRoot, "llm/tokenizer/builtin/qwen/tokenizer.json.gz"),
		filepath.Join(repoRoot, "testdata/tokenizers/qwen3/tokenizer_config.json"))
}

// LlamaTokenizer returns the path of a temporary copy of the Llama 3.1
// tokenizer.json (testdata/tokenizers/llama3_1/tokenizer.json.gz) with its
// tokenizer_config.json beside it. repoRoot is as for QwenTokenizer.
func LlamaTokenizer(t testing.TB, repoRoot string) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "testdata/tokenizers/llama3_1")
	return Gunzip(t, filepath.Join(dir, "tokenizer.json.gz"), filepath.Join(dir, "tokenizer_config.json"))
}
