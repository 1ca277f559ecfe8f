package tokenizer

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// gpt2HFJSON builds a Hugging Face tokenizer.json for GPT-2 from tiktoken's
// r50k ranks, the way GPT-2's own tokenizer.json is laid out (ByteLevel
// pre-tokenizer with its built-in regex, merges as pairs). The merge of a
// token is the two parts BPE reaches when only lower-ranked tokens exist, so
// the merge list is in rank order. Encoding with it must agree with tiktoken
// everywhere: an independent check of the BPE model and of the ByteLevel
// pre-tokenizer's regex path, which the Qwen goldens do not use.
func gpt2HFJSON(tb testing.TB) []byte {
	tb.Helper()
	vocab, merges := gpt2VocabMerges(tb)
	vocab[GPT2EOSText] = GPT2EOS
	doc := map[string]any{
		"version":        "1.0",
		"added_tokens":   []any{map[string]any{"id": GPT2EOS, "content": GPT2EOSText, "special": true, "normalized": false}},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// gpt2VocabMerges derives GPT-2's byte-level vocabulary (without
// <|endoftext|>) and its merges, in rank order, from tiktoken's r50k ranks.
func gpt2VocabMerges(tb testing.TB) (map[string]int, [][2]string) {
	tb.Helper()
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("r50k_base.tiktoken")
	if err != nil {
		tb.Fatal(err)
	}
	byRank := make([]string, len(ranks))
	for s, r := range ranks {
		byRank[r] = s
	}
	toByteLevel := func(s string) string {
		rs := make([]rune, len(s))
		for i := range len(s) {
			rs[i] = byteLevelRunes[s[i]]
		}
		return string(rs)
	}
	vocab := make(map[string]int, len(ranks)+1)
	var merges [][2]string
	for r, tok := range byRank {
		vocab[toByteLevel(tok)] = r
		if len(tok) < 2 {
			continue
		}
		parts := rankedBPE(tok, ranks, r)
		if len(parts) != 2 {
			tb.Fatalf("token %d %q does not split into two lower-ranked parts: %q", r, tok, parts)
		}
		merges = append(merges, [2]string{toByteLevel(parts[0]), toByteLevel(parts[1])})
	}
	return vocab, merges
}

// rankedBPE is tiktoken's algorithm restricted to tokens ranked below limit:
// repeatedly join the adjacent pair whose joined bytes have the lowest rank.
func rankedBPE(s string, ranks map[string]int, limit int) []string {
	parts := make([]string, len(s))
	for i := range len(s) {
		parts[i] = s[i : i+1]
	}
	for len(parts) > 1 {
		best, at := limit, -1
		for i := 0; i+1 < len(parts); i++ {
			if r, ok := ranks[parts[i]+parts[i+1]]; ok && r < best {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		parts = slices.Replace(parts, at, at+2, parts[at]+parts[at+1])
	}
	return parts
}

var (
	hfGPT2Once sync.Once
	hfGPT2Tok  *HFTokenizer
	hfGPT2Err  error
)

func hfGPT2(tb testing.TB) *HFTokenizer {
	tb.Helper()
	hfGPT2Once.Do(func() { hfGPT2Tok, hfGPT2Err = ParseHF(gpt2HFJSON(tb), HFOptions{}) })
	if hfGPT2Err != nil {
		tb.Fatal(hfGPT2Err)
	}
	return hfGPT2Tok
}

func TestHFGPT2MatchesTiktoken(t *testing.T) {
	h, g := hfGPT2(t), gpt2(t)
	if h.VocabSize() != GPT2VocabSize || h.EOSTokenID() != GPT2EOS {
		t.Fatalf("vocab %d, eos %d", h.VocabSize(), h.EOSTokenID())
	}
	var texts []string
	for _, c := range loadGolden(t, goldenGPT2) {
		texts = append(texts, c.Text)
		if got := h.Encode(c.Text, false); !equalIDs(got, c.IDs) {
			t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	for _, c := range loadGolden(t, goldenGPT2Sp) {
		if got := h.Encode(c.Text, true); !equalIDs(got, c.IDs) {
			t.Errorf("special %q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	// Qwen's strings too (other scripts, emoji): same ids as tiktoken.
	for _, c := range loadGolden(t, goldenQwen) {
		texts = append(texts, c.Text)
	}
	for _, s := range texts {
		if a, b := h.Encode(s, false), g.Encode(s, false); !equalIDs(a, b) {
			t.Errorf("%q: HF %v, tiktoken %v", s, a, b)
		}
	}
}
