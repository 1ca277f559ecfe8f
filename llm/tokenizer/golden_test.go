package tokenizer

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// TestGoldens checks both tokenizers against ids produced by the reference
// libraries (see testdata/tokenizers/README.md), and that decoding the ids
// gives the text back (Qwen's NFC normalizer changes decomposed accents, so
// there the round trip is checked on the normalized text).
func TestGoldens(t *testing.T) {
	tests := []struct {
		name         string
		tok          func(testing.TB) llm.Tokenizer
		golden       string
		allowSpecial bool
		normalize    func(string) string
	}{
		{"gpt2", func(tb testing.TB) llm.Tokenizer { return gpt2(tb) }, goldenGPT2, false, nil},
		{"gpt2_special", func(tb testing.TB) llm.Tokenizer { return gpt2(tb) }, goldenGPT2Sp, true, nil},
		{"qwen3", func(tb testing.TB) llm.Tokenizer { return qwen(tb) }, goldenQwen, false, nil},
		{"qwen3_special", func(tb testing.TB) llm.Tokenizer { return qwen(tb) }, goldenQwenSp, true, nil},
		{"llama3_1", func(tb testing.TB) llm.Tokenizer { return llama(tb) }, goldenLlama, false, nil},
		{"llama3_1_special", func(tb testing.TB) llm.Tokenizer { return llama(tb) }, goldenLlamaSp, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.tok(t)
			for i, c := range loadGolden(t, tc.golden) {
				got := tok.Encode(c.Text, tc.allowSpecial)
				if !equalIDs(got, c.IDs) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
					continue
				}
				want := c.Text
				if q, ok := tok.(*HFTokenizer); ok {
					want = q.normalize(want)
				}
				if dec := tok.Decode(got, false); dec != want {
					t.Errorf("case %d: Decode = %q, want %q", i, dec, want)
				}
			}
		})
	}
}

// TestVariantGoldens checks the components the Qwen and GPT-2 goldens do not
// exercise (Lowercase and NFKD/NFKC normalizers, ByteLevel's regex and
// prefix space, every Split behavior, Digits, added-token options) against
// Hugging Face's Rust tokenizers: each variant is the tiny fixture with one
// thing changed, with the library's ids and decodings of tricky strings
// (testdata/tokenizers/variants).
func TestVariantGoldens(t *testing.T) {
	b, err := os.ReadFile(goldenVariants)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Variants []struct {
			Name      string          `json:"name"`
			Tokenizer json.RawMessage `json:"tokenizer"`
			Cases     []struct {
				Text        string `json:"text"`
				IDs         []int  `json:"ids"`
				Decoded     string `json:"decoded"`
				DecodedSkip string `json:"decoded_skip"`
			} `json:"cases"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Variants) == 0 {
		t.Fatal("no variants")
	}
	for _, v := range g.Variants {
		t.Run(v.Name, func(t *testing.T) {
			tok, err := ParseHF(v.Tokenizer, HFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range v.Cases {
				// Hugging Face matches special added tokens in the text by
				// default: allowSpecial true.
				if got := tok.Encode(c.Text, true); !equalIDs(got, c.IDs) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
				}
				if got := tok.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("case %d: Decode(%v) = %q, want %q", i, c.IDs, got, c.Decoded)
				}
				if got := tok.Decode(c.IDs, true); got != c.DecodedSkip {
					t.Errorf("case %d: Decode(%v, skip) = %q, want %q", i, c.IDs, got, c.DecodedSkip)
				}
			}
		})
	}
}
