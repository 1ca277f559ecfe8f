package openai

import (
	"strings"
	"unicode"

	"github.com/tinyserve/tinyserve/llm"
)

// badWordIDs tokenizes vLLM's bad_words the way vLLM does, so that a word
// is banned where it starts the text and inside it: each word without its
// leading whitespace, and again after one space (the form GPT-2 gives a
// word inside text) when that starts with another token and has as many.
func badWordIDs(tok llm.Tokenizer, words []string) [][]int {
	if len(words) == 0 {
		return nil
	}
	out := make([][]int, 0, 2*len(words))
	for _, w := range words {
		w = strings.TrimLeftFunc(w, unicode.IsSpace)
		plain := tok.Encode(w, true)
		out = append(out, plain)
		if spaced := tok.Encode(" "+w, true); len(spaced) == len(plain) && spaced[0] != plain[0] {
			out = append(out, spaced)
		}
	}
	return out
}

// uniqueStrings returns ss without repeats, in first-seen order.
func uniqueStrings(ss []string) []string {
	if len(ss) < 2 {
		return ss
	}
	seen := make(map[string]bool, len(ss))
	out := ss[:0:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
