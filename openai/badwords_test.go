package openai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// TestBadWordIDs: GPT-2's ids (as Hugging Face's tokenizer gives them) of
// each bad word, bare and after a space, as vLLM tokenizes bad_words: the
// spaced form only when it starts with another token and has as many.
func TestBadWordIDs(t *testing.T) {
	tok, err := tokenizer.GPT2()
	require.NoError(t, err)
	assert.Equal(t, [][]int{{31373}, {23748}}, badWordIDs(tok, []string{"hello"}))
	// Leading whitespace is dropped first, so " world" is "world" twice over.
	assert.Equal(t, [][]int{{6894}, {995}}, badWordIDs(tok, []string{" world"}))
	assert.Equal(t, [][]int{{15496, 11, 995}, {18435, 11, 995}}, badWordIDs(tok, []string{"Hello, world"}))
	// A special token's text is the special token; after a space it is two
	// tokens, so only the bare form counts.
	assert.Equal(t, [][]int{{50256}}, badWordIDs(tok, []string{"<|endoftext|>"}))
	assert.Nil(t, badWordIDs(tok, nil))
}

// TestBadWordsReachTheEngine: the words arrive at the engine tokenized.
func TestBadWordsReachTheEngine(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"bad_words":["hé","\tb"]}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	// The fake's tokenizer is bytes: " hé" is one token longer, so only the
	// bare forms.
	assert.Equal(t, [][]int{{104, 195, 169}, {'b'}}, f.requests()[0].Params.BadWords)
}
