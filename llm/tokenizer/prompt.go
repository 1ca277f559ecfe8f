package tokenizer

import "github.com/tinyserve/tinyserve/llm"

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
