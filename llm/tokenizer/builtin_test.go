package tokenizer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
)

// qwenTokenizerSHA256 is the sha256 of Qwen3's tokenizer.json, the file
// the Qwen goldens were made with (testdata/tokenizers/README.md), which the
// repository keeps only as builtin/qwen/tokenizer.json.gz.
const qwenTokenizerSHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"

// llamaTokenizerSHA256 is the sha256 of Llama 3.1's tokenizer.json, the
// file the Llama goldens were made with, kept as
// testdata/tokenizers/llama3_1/tokenizer.json.gz.
const llamaTokenizerSHA256 = "e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7"

// gunzipSHA256 is the sha256 of gz decompressed.
func gunzipSHA256(t *testing.T, gz []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestBuiltinQwenFiles checks that the embedded files are exactly the
// files the goldens were made with: the decompressed tokenizer.json has
// their sha256, and tokenizer_config.json is testdata's copy.
func TestBuiltinQwenFiles(t *testing.T) {
	if got := gunzipSHA256(t, qwenTokenizerGz); got != qwenTokenizerSHA256 {
		t.Errorf("embedded tokenizer.json has sha256 %s, want %s", got, qwenTokenizerSHA256)
	}
	cfg, err := os.ReadFile(fixtures + "qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(QwenConfigJSON(), cfg) {
		t.Error("QwenConfigJSON differs from testdata/tokenizers/qwen3/tokenizer_config.json")
	}
	// The caller's copy is its own.
	c := QwenConfigJSON()
	c[0] = 'X'
	if QwenConfigJSON()[0] == 'X' {
		t.Error("changing QwenConfigJSON's result changed the embedded file")
	}
}

// TestLlamaFixtureFile checks that the compressed Llama 3.1 fixture
// decompresses to the tokenizer.json the Llama goldens were made with.
func TestLlamaFixtureFile(t *testing.T) {
	gz, err := os.ReadFile(fixtures + "llama3_1/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if got := gunzipSHA256(t, gz); got != llamaTokenizerSHA256 {
		t.Errorf("llama3_1/tokenizer.json.gz decompresses to sha256 %s, want %s", got, llamaTokenizerSHA256)
	}
}

// TestBuiltinQwen checks that Qwen() is the tokenizer LoadHF reads from the
// same files unpacked (qwenJSON): the same ids for every golden,
// <|im_end|> as EOS (the config's eos_token), 151669 ids, no BOS; and that
// repeated and concurrent calls share one parsed tokenizer.
func TestBuiltinQwen(t *testing.T) {
	q, err := Qwen()
	if err != nil {
		t.Fatal(err)
	}
	ref := qwen(t)
	if q == ref {
		t.Fatal("Qwen() returned the test's own LoadHF tokenizer")
	}
	tests := []struct {
		golden       string
		allowSpecial bool
	}{{goldenQwen, false}, {goldenQwenSp, true}}
	for _, tc := range tests {
		for i, c := range loadGolden(t, tc.golden) {
			got, want := q.Encode(c.Text, tc.allowSpecial), ref.Encode(c.Text, tc.allowSpecial)
			if !slices.Equal(got, want) || !slices.Equal(got, c.IDs) {
				t.Errorf("%s case %d %q:\n Qwen() %v\n LoadHF %v\n golden %v", tc.golden, i, c.Text, got, want, c.IDs)
			}
		}
	}
	if got := q.EOSTokenID(); got != 151645 {
		t.Errorf("EOSTokenID = %d, want 151645 (<|im_end|>)", got)
	}
	if got := q.TokenString(q.EOSTokenID()); got != "<|im_end|>" {
		t.Errorf("EOS token is %q, want <|im_end|>", got)
	}
	if got := q.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669", got)
	}
	if got := q.BOSTokenID(); got != -1 {
		t.Errorf("BOSTokenID = %d, want -1", got)
	}
	var wg sync.WaitGroup
	got := make([]*HFTokenizer, 8)
	for i := range got {
		wg.Go(func() {
			tok, err := Qwen()
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		})
	}
	wg.Wait()
	for i, tok := range got {
		if tok != q {
			t.Errorf("call %d returned another tokenizer", i)
		}
	}
}

// TestLoadBuiltinQwen: "qwen2.5" goes through Locate, Load and
// LoadWithFiles like "gpt2", to the one built-in tokenizer, reading no
// files; with a revision it is refused, having none.
func TestLoadBuiltinQwen(t *testing.T) {
	t.Chdir(t.TempDir()) // a folder named qwen2.5 here would not matter either
	if !IsBuiltin(BuiltinQwen) {
		t.Fatal("IsBuiltin(qwen2.5) = false")
	}
	for _, spec := range []string{"Qwen/Qwen2.5-0.5B-Instruct", "qwen", "qwen3"} {
		if IsBuiltin(spec) {
			t.Errorf("IsBuiltin(%q) = true", spec)
		}
	}
	path, builtin, err := Locate(BuiltinQwen, LoadOptions{})
	if err != nil || !builtin || path != "" {
		t.Fatalf("Locate = %q, %v, %v", path, builtin, err)
	}
	q, err := Qwen()
	if err != nil {
		t.Fatal(err)
	}
	tok, files, err := LoadWithFiles(BuiltinQwen, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := tok.(*HFTokenizer); !ok || h != q || files != nil {
		t.Fatalf("LoadWithFiles = %T %p, files %v; want Qwen() %p and no files", tok, tok, files, q)
	}
	if tok, err := Load(BuiltinQwen, LoadOptions{}); err != nil || tok != q {
		t.Fatalf("Load = %p, %v", tok, err)
	}
	if _, err := Load(BuiltinQwen, LoadOptions{Revision: "main"}); err == nil {
		t.Fatal("a revision of the built-in qwen2.5 was accepted")
	}
}
