package mock

import (
	"strings"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// EndOfText is the byte tokenizer's only special token: id 256.
const EndOfText = "<|endoftext|>"

// EOSTokenID is the id of EndOfText.
const EOSTokenID = 256

// Tokenizer is a byte-level tokenizer: ids 0-255 are the bytes, 256 is
// <|endoftext|>. It implements llm.Tokenizer.
type Tokenizer struct{}

// NewTokenizer returns the byte tokenizer.
func NewTokenizer() Tokenizer { return Tokenizer{} }

// Encode implements llm.Tokenizer.
func (Tokenizer) Encode(text string, allowSpecial bool) []int {
	ids := make([]int, 0, len(text))
	for len(text) > 0 {
		if allowSpecial && strings.HasPrefix(text, EndOfText) {
			ids = append(ids, EOSTokenID)
			text = text[len(EndOfText):]
			continue
		}
		ids = append(ids, int(text[0]))
		text = text[1:]
	}
	return ids
}

// Decode implements llm.Tokenizer.
func (t Tokenizer) Decode(ids []int, skipSpecial bool) string {
	d := t.NewDecoder(skipSpecial)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

// NewDecoder implements llm.Tokenizer.
func (Tokenizer) NewDecoder(skipSpecial bool) llm.Decoder {
	return tokenizer.NewByteDecoder(func(id int) []byte {
		switch {
		case id >= 0 && id < 256:
			return []byte{byte(id)}
		case id == EOSTokenID && !skipSpecial:
			return []byte(EndOfText)
		}
		return nil
	})
}

// VocabSize implements llm.Tokenizer: 257.
func (Tokenizer) VocabSize() int { return 257 }

// EOSTokenID implements llm.Tokenizer.
func (Tokenizer) EOSTokenID() int { return EOSTokenID }

// IsSpecial implements llm.Tokenizer.
func (Tokenizer) IsSpecial(id int) bool { return id == EOSTokenID }
