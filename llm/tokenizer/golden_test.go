package tokenizer

import (
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
