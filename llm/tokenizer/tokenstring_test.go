package tokenizer

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTokenStringIsTheFilesSpelling: every token of Qwen3's tokenizer.json,
// vocabulary entry or added token, comes back from TokenString exactly as
// the file writes it, which is what Hugging Face's convert_ids_to_tokens
// returns.
func TestTokenStringIsTheFilesSpelling(t *testing.T) {
	data, err := os.ReadFile(qwenJSON(t))
	require.NoError(t, err)
	var f struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	require.NoError(t, json.Unmarshal(data, &f))
	tok := qwen(t)
	for s, id := range f.Model.Vocab {
		if got := tok.TokenString(id); got != s {
			t.Fatalf("TokenString(%d) = %q, want %q", id, got, s)
		}
	}
	for _, at := range f.AddedTokens {
		assert.Equal(t, at.Content, tok.TokenString(at.ID))
	}
	assert.Empty(t, tok.TokenString(-1))
	assert.Empty(t, tok.TokenString(tok.VocabSize()))
}

// TestGPT2TokenString: GPT-2's vocab.json spelling, as Hugging Face's
// GPT2Tokenizer.convert_ids_to_tokens gives it.
func TestGPT2TokenString(t *testing.T) {
	tok := gpt2(t)
	for id, want := range map[int]string{15496: "Hello", 995: "Ġworld", 198: "Ċ", 245: "Ĺ", 50256: "<|endoftext|>"} {
		assert.Equal(t, want, tok.TokenString(id), "id %d", id)
	}
	assert.Empty(t, tok.TokenString(-1))
	assert.Empty(t, tok.TokenString(GPT2VocabSize))
}
