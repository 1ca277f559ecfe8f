package testfiles

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// TestGunzip: the file comes back as it was, under its name without ".gz",
// with the beside files next to it.
func TestGunzip(t *testing.T) {
	src := t.TempDir()
	want := []byte(`{"model": {}}`)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(want)
	zw.Close()
	gz := filepath.Join(src, "tokenizer.json.gz")
	cfg := filepath.Join(src, "tokenizer_config.json")
	if err := os.WriteFile(gz, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := Gunzip(t, gz, cfg)
	if filepath.Base(out) != "tokenizer.json" || filepath.Dir(out) == src {
		t.Errorf("Gunzip = %s, want tokenizer.json in a new folder", out)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want) {
		t.Errorf("decompressed %q, %v; want %q", got, err, want)
	}
	if got, err := os.ReadFile(filepath.Join(filepath.Dir(out), "tokenizer_config.json")); err != nil || string(got) != "{}" {
		t.Errorf("beside file %q, %v", got, err)
	}
}

// TestFixtures: the repository's two compressed tokenizers unpack.
func TestFixtures(t *testing.T) {
	for _, p := range []string{QwenTokenizer(t, "../.."), LlamaTokenizer(t, "../..")} {
		for _, name := range []string{p, filepath.Join(filepath.Dir(p), "tokenizer_config.json")} {
			if fi, err := os.Stat(name); err != nil || fi.Size() == 0 {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}
