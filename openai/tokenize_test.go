package openai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// TestTokenizeTokenStrs: return_token_strs gives each token as the
// vocabulary spells it, as vLLM's /tokenize does (Hugging Face's
// convert_ids_to_tokens): GPT-2's " world" is "Ġworld", the three tokens
// that split " 日" are "Ġæ", "Ĺ" and "¥", not U+FFFD each, and the special
// token is its own text.
func TestTokenizeTokenStrs(t *testing.T) {
	tok, err := tokenizer.GPT2()
	require.NoError(t, err)
	f := newFake()
	f.tok = tok
	f.info.VocabSize = tok.VocabSize()
	rec := serve(t, NewHandler(f), "POST", "/tokenize", `{"prompt":"Hello world 日<|endoftext|>","return_token_strs":true}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.JSONEq(t, `{"count":6,"max_model_len":64,"tokens":[15496,995,10545,245,98,50256],`+
		`"token_strs":["Hello","Ġworld","Ġæ","Ĺ","¥","<|endoftext|>"]}`, rec.Body.String())
}
