package tokenizer

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/testfiles"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/gguf"
)

// ggufTexts exercise the pre-tokenizers: unicode, runs of spaces and
// newlines, digits, contractions, emoji, and special tokens in the text.
var ggufTexts = []string{
	"Hello, world!",
	"  leading and   inner spaces\n\n\ttabs\r\n",
	"Héllo wörld — naïve café, 你好世界, Привет, مرحبا, 🙂👍🏽",
	"I'm sure they'll've DONE it: 1234567 + 3.14159 = 42",
	"e\u0301 (combining) vs é; ﬁ ligature",
	"<|endoftext|> between <|im_start|>user\nhi<|im_end|> and <think>x</think>",
	"<|begin_of_text|><|start_header_id|>system<|end_header_id|>",
	"code:\n    for i in range(10):\n        print(i)  # done\n",
	"",
	" ",
}

// vocabFile writes v as the metadata of an otherwise empty GGUF file and
// parses it back.
func vocabFile(t *testing.T, v *GGUFVocab, extra ...gguf.KV) *gguf.File {
	t.Helper()
	var b bytes.Buffer
	if err := gguf.Write(&b, append(v.KVs(), extra...), nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sameTokenizer checks that a and b encode (with and without special
// tokens) and decode (with and without skipping them) every text alike.
func sameTokenizer(t *testing.T, a, b llm.Tokenizer) {
	t.Helper()
	if a.VocabSize() != b.VocabSize() || a.EOSTokenID() != b.EOSTokenID() {
		t.Errorf("vocabulary %d, eos %d; want %d, %d", a.VocabSize(), a.EOSTokenID(), b.VocabSize(), b.EOSTokenID())
	}
	for _, text := range ggufTexts {
		for _, special := range []bool{false, true} {
			ga, gb := a.Encode(text, special), b.Encode(text, special)
			if !slices.Equal(ga, gb) {
				t.Errorf("Encode(%q, %v) = %v, want %v", text, special, ga, gb)
				continue
			}
			for _, skip := range []bool{false, true} {
				if da, db := a.Decode(ga, skip), b.Decode(gb, skip); da != db {
					t.Errorf("Decode(%v, %v) = %q, want %q", ga, skip, da, db)
				}
			}
		}
	}
}

// skipUnderRace skips a test that only decodes large vocabularies, on one
// goroutine: under the race detector it takes half a minute and checks no
// concurrency (TestGGUFTokenizerGPT2 runs FromGGUF there).
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("decodes 150k-token vocabularies: too slow under the race detector, and single-threaded")
	}
}

func TestGGUFTokenizerQwen(t *testing.T) {
	skipUnderRace(t)
	v, err := QwenGGUFVocab(151936)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromGGUF(vocabFile(t, v))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Qwen()
	if err != nil {
		t.Fatal(err)
	}
	sameTokenizer(t, got, want)
	for _, id := range []int{151643, 151645, 151657, 151667} { // <|endoftext|>, <|im_end|>, <tool_call>, <think>
		if got.IsSpecial(id) != want.IsSpecial(id) || got.TokenString(id) != want.TokenString(id) {
			t.Errorf("id %d: %q special %v, want %q %v", id, got.TokenString(id), got.IsSpecial(id), want.TokenString(id), want.IsSpecial(id))
		}
	}
}

func TestGGUFTokenizerLlama3(t *testing.T) {
	skipUnderRace(t)
	path := testfiles.LlamaTokenizer(t, "../..")
	v, err := HFGGUFVocab(path, "llama-bpe", 128256)
	if err != nil {
		t.Fatal(err)
	}
	if v.BOS != 128000 || !v.AddBOS || v.EOS < 0 {
		t.Errorf("bos %d (add %v), eos %d", v.BOS, v.AddBOS, v.EOS)
	}
	got, err := FromGGUF(vocabFile(t, v))
	if err != nil {
		t.Fatal(err)
	}
	want, err := LoadHF(path)
	if err != nil {
		t.Fatal(err)
	}
	sameTokenizer(t, got, want)
	if a, b := got.AddSpecialTokens([]int{5}), want.AddSpecialTokens([]int{5}); !slices.Equal(a, b) {
		t.Errorf("AddSpecialTokens: %v, want %v", a, b)
	}
}

func TestGGUFTokenizerGPT2(t *testing.T) {
	v, err := GPT2GGUFVocab()
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromGGUF(vocabFile(t, v))
	if err != nil {
		t.Fatal(err)
	}
	want, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	sameTokenizer(t, got, want)
}

func TestGGUFTokenizerRefusals(t *testing.T) {
	v := &GGUFVocab{Pre: "gpt-2", Tokens: []string{"a", "b", "ab"}, Types: []int32{1, 1, 1}, Merges: []string{"a b"}, BOS: -1, EOS: -1, Pad: -1}
	if _, err := FromGGUF(vocabFile(t, v)); err != nil {
		t.Fatalf("a minimal vocabulary: %v", err)
	}
	for _, c := range []struct {
		extra []gguf.KV
		edit  func(*GGUFVocab)
		want  string
	}{
		{edit: func(v *GGUFVocab) { v.Pre = "deepseek-coder" }, want: `tokenizer.ggml.pre "deepseek-coder"`},
		{edit: func(v *GGUFVocab) { v.Types = []int32{1, 6, 1} }, want: "token_type 6"},
		{edit: func(v *GGUFVocab) { v.Types = []int32{1} }, want: "1 entries for 3 tokens"},
		{edit: func(v *GGUFVocab) { v.EOS = 7 }, want: "eos_token_id 7 is not a token id"},
		{edit: func(v *GGUFVocab) { v.Merges = []string{"a c"} }, want: "merge 0"},
	} {
		w := *v
		c.edit(&w)
		_, err := FromGGUF(vocabFile(t, &w, c.extra...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
	// A SentencePiece ("llama") vocabulary is refused by name.
	var b bytes.Buffer
	if err := gguf.Write(&b, []gguf.KV{{Key: "tokenizer.ggml.model", Value: "llama"}}, nil); err != nil {
		t.Fatal(err)
	}
	f, _ := gguf.Parse(b.Bytes())
	if _, err := FromGGUF(f); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `tokenizer.ggml.model "llama"`) {
		t.Errorf("llama model: %v", err)
	}
}
