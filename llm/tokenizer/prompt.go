package tokenizer

import (
	"context"
	"unicode/utf8"

	"github.com/tinyserve/tinyserve/llm"
)

// EncodePrompt tokenizes a prompt as a completions request does: special
// tokens written in the text become their ids, and with addSpecial the
// tokenizer's template tokens are added (vLLM's add_special_tokens, true
// by default for /v1/completions and /tokenize, false for chat, whose
// template writes them itself).
func EncodePrompt(tok llm.Tokenizer, text string, addSpecial bool) []int {
	ids := tok.Encode(text, true)
	if a, ok := tok.(llm.SpecialTokensAdder); ok && addSpecial {
		return a.AddSpecialTokens(ids)
	}
	return ids
}

// Bounds of EncodePromptLimit.
const (
	// limitWindowMin is the smallest prefix tried first: below it a prompt
	// is tokenized whole, at once.
	limitWindowMin = 16 << 10
	// limitTailSlack is how many of a prefix's tokens are not counted: the
	// tokens of a prefix are those of the whole text except near the cut
	// (a word, a special token or a run of spaces cut in two tokenizes
	// differently), and those differ over a few dozen bytes at most.
	limitTailSlack = 64
)

// EncodePromptLimit is [EncodePrompt] for a prompt that may have at most
// limit tokens (a context length). A long text is tokenized by growing
// prefixes (doubling, from 16 KiB or 4 bytes per allowed token): once a
// prefix holds more than limit tokens, not counting the last
// limitTailSlack of them, the whole text does too, and it stops there, so
// a prompt that cannot fit is refused in time proportional to limit rather
// than to its length. It then returns nil and that lower bound on the
// prompt's tokens (more than limit); otherwise the whole prompt's ids and
// their count (which may still exceed limit, by at most the slack). ctx is
// checked between prefixes (a client that went away).
func EncodePromptLimit(ctx context.Context, tok llm.Tokenizer, text string, addSpecial bool, limit int) (ids []int, count int, err error) {
	window := max(limitWindowMin, 4*limit)
	for ; window < len(text); window *= 2 {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		cut := window
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut-- // a whole character: half of one would read as U+FFFD
		}
		if n := len(tok.Encode(text[:cut], true)) - limitTailSlack; n > limit {
			return nil, n, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	ids = EncodePrompt(tok, text, addSpecial)
	return ids, len(ids), nil
}
