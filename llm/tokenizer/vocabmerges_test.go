package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeSlowGPT2 writes GPT-2's tokenizer as GPT2Tokenizer.save_pretrained
// does (vocab.json with <|endoftext|>, merges.txt with its #version line),
// plus the given extra files (name -> contents), into a new folder.
func writeSlowGPT2(t *testing.T, extra map[string]string) string {
	t.Helper()
	vocab, merges := gpt2VocabMerges(t)
	vocab[GPT2EOSText] = GPT2EOS
	dir := t.TempDir()
	vb, err := json.Marshal(vocab)
	if err != nil {
		t.Fatal(err)
	}
	var mb strings.Builder
	mb.WriteString("#version: 0.2\n")
	for _, m := range merges {
		mb.WriteString(m[0] + " " + m[1] + "\n")
	}
	files := map[string]string{"vocab.json": string(vb), "merges.txt": mb.String()}
	for k, v := range extra {
		files[k] = v
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestVocabMergesMatchesTiktoken: a folder with only vocab.json and
// merges.txt (no tokenizer.json) tokenizes as GPT-2's tokenizer does.
func TestVocabMergesMatchesTiktoken(t *testing.T) {
	dir := writeSlowGPT2(t, map[string]string{
		"tokenizer_config.json":   `{"add_prefix_space": false, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"}`,
		"special_tokens_map.json": `{"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}`,
	})
	tok, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := gpt2(t)
	if tok.VocabSize() != GPT2VocabSize || tok.EOSTokenID() != GPT2EOS {
		t.Fatalf("vocab %d, eos %d", tok.VocabSize(), tok.EOSTokenID())
	}
	for _, file := range []string{goldenGPT2, goldenGPT2Sp, goldenQwen} {
		for _, c := range loadGolden(t, file) {
			for _, special := range []bool{false, true} {
				got, want := tok.Encode(c.Text, special), g.Encode(c.Text, special)
				if !equalIDs(got, want) {
					t.Errorf("%q (special %v):\n got %v\nwant %v", c.Text, special, got, want)
				}
				if d, w := tok.Decode(got, false), g.Decode(want, false); d != w {
					t.Errorf("decode %v: %q, want %q", got, d, w)
				}
			}
		}
	}
	if !tok.IsSpecial(GPT2EOS) {
		t.Error("<|endoftext|> is not special")
	}
}

// TestVocabMergesAddedTokens: added_tokens.json entries and the named
// special tokens become added tokens, matched before BPE.
func TestVocabMergesAddedTokens(t *testing.T) {
	dir := writeSlowGPT2(t, map[string]string{
		"added_tokens.json":       `{"<pad>": 50257, "<sep>": 50258}`,
		"special_tokens_map.json": `{"eos_token": {"content": "<|endoftext|>", "lstrip": false}, "pad_token": "<pad>"}`,
	})
	tok, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 50259 {
		t.Fatalf("vocab size %d, want 50259", tok.VocabSize())
	}
	if !tok.IsSpecial(50257) || tok.IsSpecial(50258) {
		t.Errorf("special: <pad> %v (want true), <sep> %v (want false)", tok.IsSpecial(50257), tok.IsSpecial(50258))
	}
	got := tok.Encode("a<pad>b<sep>", true)
	want := slices.Concat(gpt2(t).Encode("a", false), []int{50257}, gpt2(t).Encode("b", false), []int{50258})
	if !equalIDs(got, want) {
		t.Errorf("Encode with added tokens = %v, want %v", got, want)
	}
	// Without special tokens allowed, <pad> is text; <sep>, not special, is
	// still matched, as Hugging Face always matches added tokens.
	if got := tok.Encode("<pad><sep>", false); slices.Contains(got, 50257) || !slices.Contains(got, 50258) {
		t.Errorf("Encode(allowSpecial=false) = %v", got)
	}
	if s := tok.Decode([]int{50257, 50258}, true); s != "<sep>" {
		t.Errorf("Decode skipping special = %q, want %q", s, "<sep>")
	}
}

// TestVocabMergesPrefixSpace: add_prefix_space true in tokenizer_config.json
// tokenizes "Hello" as " Hello" (transformers' converted tokenizer).
func TestVocabMergesPrefixSpace(t *testing.T) {
	dir := writeSlowGPT2(t, map[string]string{"tokenizer_config.json": `{"add_prefix_space": true}`})
	tok, err := LoadVocabMerges(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("Hello world", false), gpt2(t).Encode(" Hello world", false); !equalIDs(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

func TestVocabMergesErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"bad merge line", map[string]string{"merges.txt": "#version: 0.2\nĠ t\nabc\n"}, `merges.txt line 3 "abc"`},
		{"merge of unknown tokens", map[string]string{"merges.txt": "#version: 0.2\nqqq zzz\n"}, "missing from the vocab"},
		{"vocab not JSON", map[string]string{"vocab.json": "{"}, "vocab.json"},
		{"special token unknown", map[string]string{"special_tokens_map.json": `{"pad_token": "<nope>"}`}, `pad_token "<nope>" is neither in vocab.json nor an added token`},
		{"bad config", map[string]string{"tokenizer_config.json": `{"add_prefix_space": "yes"}`}, "add_prefix_space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeSlowGPT2(t, tt.files)
			_, err := Load(dir, LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, dir, tt.want)
			}
		})
	}
	// A folder with vocab.json but no merges.txt is not a tokenizer: the
	// error lists what was looked for.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`{}`), 0o644)
	_, err := Load(dir, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "vocab.json + merges.txt") {
		t.Fatalf("err = %v", err)
	}
}

// TestVocabMergesDefaultSpecials: GPT2Tokenizer's bos_token, eos_token and
// unk_token each default to <|endoftext|>, so a tokenizer_config.json that
// names only another eos_token still leaves <|endoftext|> special (as bos
// and unk) in transformers' converted tokenizer: matched whole, skipped
// when decoding without special tokens. A key set to null has no default.
func TestVocabMergesDefaultSpecials(t *testing.T) {
	dir := writeSlowGPT2(t, map[string]string{
		"added_tokens.json":     `{"<|im_end|>": 50257}`,
		"tokenizer_config.json": `{"eos_token": "<|im_end|>"}`,
	})
	tok, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tok.EOSTokenID() != 50257 || !tok.IsSpecial(50257) {
		t.Errorf("eos %d (special %v), want <|im_end|> = 50257", tok.EOSTokenID(), tok.IsSpecial(50257))
	}
	if !tok.IsSpecial(GPT2EOS) {
		t.Error("<|endoftext|> (the default bos and unk token) is not special")
	}
	if got := tok.Encode("a<|endoftext|>", true); !equalIDs(got, []int{64, GPT2EOS}) {
		t.Errorf("Encode = %v, want [64 %d]", got, GPT2EOS)
	}

	dir = writeSlowGPT2(t, map[string]string{
		"added_tokens.json":     `{"<|im_end|>": 50257}`,
		"tokenizer_config.json": `{"eos_token": "<|im_end|>", "bos_token": null, "unk_token": null}`,
	})
	tok, err = Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tok.IsSpecial(GPT2EOS) {
		t.Error("<|endoftext|> is special although bos_token and unk_token are null and eos_token is another")
	}
}

// TestVocabMergesRepeatedMerge: a merge listed twice keeps its first
// place. transformers' converter takes list(GPT2Tokenizer.bpe_ranks), a
// dict's keys in first-insertion order, so "a b", "b c", "a b" are the
// fast tokenizer's merges "a b" (rank 0) and "b c" (rank 1): "abc" is
// "ab" "c". (A tokenizer.json lists merges after conversion, and a pair
// repeated there keeps its last rank, as the Rust library's map does.)
func TestVocabMergesRepeatedMerge(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"vocab.json": `{"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}`,
		"merges.txt": "#version: 0.2\na b\nb c\na b\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := LoadVocabMerges(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("abc", false); !equalIDs(got, []int{3, 2}) {
		t.Errorf("Encode(abc) = %v, want [3 2] (ab c)", got)
	}
}

// TestVocabMergesInHubCache: a Hugging Face id whose cached snapshot has
// only vocab.json and merges.txt (no tokenizer.json) is found by id.
func TestVocabMergesInHubCache(t *testing.T) {
	slow := writeSlowGPT2(t, nil)
	hub := t.TempDir()
	snap := filepath.Join(hub, "models--org--slow-gpt2", "snapshots", "abc")
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(slow, snap); err != nil {
		t.Fatal(err)
	}
	tok, err := Load("org/slow-gpt2", LoadOptions{HFHubCache: hub})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("Hello world", false), gpt2(t).Encode("Hello world", false); !equalIDs(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

// TestVocabMergesInTokenizerDir: --tokenizer-dir's DIR/ORG/NAME folder may
// hold vocab.json and merges.txt instead of a tokenizer.json, as a model
// folder and a hub-cache snapshot may.
func TestVocabMergesInTokenizerDir(t *testing.T) {
	slow := writeSlowGPT2(t, nil)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "org"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(slow, filepath.Join(dir, "org", "slow-gpt2")); err != nil {
		t.Fatal(err)
	}
	tok, err := Load("org/slow-gpt2", LoadOptions{TokenizerDir: dir, HFHubCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("Hello world", false), gpt2(t).Encode("Hello world", false); !equalIDs(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}
