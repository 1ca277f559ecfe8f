package tokenizer

import (
	"os"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzParseHF feeds arbitrary tokenizer.json contents to the parser: it must
// return an error or a tokenizer that encodes and decodes without panicking.
// Seeds: the tiny fixture (testdata/tiny) and the corpus in
// testdata/fuzz/FuzzParseHF.
func FuzzParseHF(f *testing.F) {
	tinyData, err := os.ReadFile(tinyJSON)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tinyData)
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`))
	f.Add([]byte(`{"model":{"vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},"decoder":{"type":"Sequence","decoders":[{"type":"ByteLevel"}]},"added_tokens":[{"id":3,"content":"<x>","special":true,"lstrip":true,"rstrip":true,"single_word":true}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ParseHF(data, HFOptions{})
		if err != nil {
			return
		}
		for _, text := range []string{"", "ab <x> hello world", "<|endoftext|>日本 \u00e9\u0301 12345  \n\t"} {
			ids := tok.Encode(text, true)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", text, id, tok.VocabSize())
				}
			}
			_ = tok.Decode(ids, true)
			_ = tok.Encode(text, false)
		}
	})
}

// The tokenizers FuzzRoundTrip checks, loaded once per test binary.
var (
	tinyOnce sync.Once
	tinyTok  *HFTokenizer
	tinyErr  error
)

// FuzzRoundTrip checks that byte-level BPE is lossless: decoding the
// encoding of any valid UTF-8 text gives the text back (after NFC for the
// tokenizers that normalize), with and without special tokens, for GPT-2,
// Qwen3 and the tiny fixture. Seeds: testdata/fuzz/FuzzRoundTrip.
func FuzzRoundTrip(f *testing.F) {
	for _, c := range loadGolden(f, goldenQwen) {
		f.Add(c.Text)
	}
	for _, c := range loadGolden(f, goldenQwenSp) {
		f.Add(c.Text)
	}
	g, q := gpt2(f), qwen(f)
	tinyOnce.Do(func() { tinyTok, tinyErr = LoadHF(tinyJSON) })
	if tinyErr != nil {
		f.Fatal(tinyErr)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || len(text) > 1<<12 {
			t.Skip()
		}
		for _, allow := range []bool{false, true} {
			if got := g.Decode(g.Encode(text, allow), false); got != text {
				t.Fatalf("gpt2 allowSpecial=%v: %q -> %q", allow, text, got)
			}
			want := norm.NFC.String(text)
			if got := q.Decode(q.Encode(text, allow), false); got != want {
				t.Fatalf("qwen3 allowSpecial=%v: %q -> %q, want %q", allow, text, got, want)
			}
			if got := tinyTok.Decode(tinyTok.Encode(text, allow), false); got != want {
				t.Fatalf("tiny allowSpecial=%v: %q -> %q, want %q", allow, text, got, want)
			}
		}
	})
}
