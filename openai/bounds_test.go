package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// countingTokenizer counts the bytes the handler asks it to tokenize.
type countingTokenizer struct {
	llm.Tokenizer
	bytes atomic.Int64
}

func (c *countingTokenizer) Encode(text string, allowSpecial bool) []int {
	c.bytes.Add(int64(len(text)))
	return c.Tokenizer.Encode(text, allowSpecial)
}

// TestOversizedPromptRefusedEarly: a 3.9 MB text prompt on a 1,024-token
// context is refused as context_length_exceeded after tokenizing a few
// tens of kilobytes, not all of it (issue 27: it took 4.4 s and kept
// burning CPU), on /v1/completions and /tokenize alike; /detokenize
// refuses more ids than the context holds. The server stays healthy.
func TestOversizedPromptRefusedEarly(t *testing.T) {
	g, err := tokenizer.GPT2()
	require.NoError(t, err)
	tok := &countingTokenizer{Tokenizer: g}
	f := newFake()
	f.info.MaxModelLen, f.info.VocabSize, f.tok = 1024, g.VocabSize(), tok
	h := NewHandler(f, WithMaxBodyBytes(8<<20))
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 3900000/45)
	prompt, _ := json.Marshal(text)

	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":` + string(prompt) + `,"max_tokens":4}`},
		{"/tokenize", `{"prompt":` + string(prompt) + `}`},
	} {
		tok.bytes.Store(0)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", c.path, strings.NewReader(c.body)))
		require.Equal(t, http.StatusBadRequest, rec.Code, c.path)
		var e errJSON
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), c.path)
		assert.Equal(t, "context_length_exceeded", *e.Error.Code, c.path)
		assert.Equal(t, "prompt", *e.Error.Param, c.path)
		assert.Contains(t, e.Error.Message, "maximum context length is 1024 tokens. However, your prompt has more than", c.path)
		assert.Less(t, tok.bytes.Load(), int64(64<<10), "%s tokenized %d of %d bytes", c.path, tok.bytes.Load(), len(text))
	}

	// A prompt that fits is tokenized whole, as before.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/tokenize", strings.NewReader(`{"prompt":"Hello world"}`)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), `"tokens":[15496,995]`)

	ids := "[" + strings.TrimSuffix(strings.Repeat("15496,", 1025), ",") + "]"
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/detokenize", strings.NewReader(`{"tokens":`+ids+`}`)))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	var e errJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
	assert.Equal(t, "tokens", *e.Error.Param)
	assert.Contains(t, e.Error.Message, "1025 tokens")
	assert.Empty(t, f.requests(), "nothing reached the engine")
}
