package llm

import "unicode/utf8"

// Tokenizer turns text into token ids and back. Implementations are safe for
// concurrent use.
type Tokenizer interface {
	// Encode tokenizes text. Special tokens written in the text (such as
	// <|endoftext|>) become their ids only when allowSpecial is true; otherwise
	// they are encoded as ordinary text.
	Encode(text string, allowSpecial bool) []int
	// Decode turns ids into text, leaving out special tokens when skipSpecial
	// is true. Bytes that do not form valid UTF-8 become U+FFFD.
	Decode(ids []int, skipSpecial bool) string
	// NewDecoder returns an incremental decoder for streaming one sequence.
	NewDecoder(skipSpecial bool) Decoder
	// VocabSize is the number of token ids, special ones included.
	VocabSize() int
	// EOSTokenID is the end-of-text token, or -1 when there is none.
	EOSTokenID() int
	// IsSpecial reports whether id is a special token.
	IsSpecial(id int) bool
}

// Decoder turns a stream of token ids into text without ever emitting half a
// UTF-8 character. It is not safe for concurrent use.
type Decoder interface {
	// Add appends one token and returns the text that became complete.
	Add(id int) string
	// Flush returns what is left, with incomplete characters as U+FFFD.
	Flush() string
}

// ByteDecoder is an incremental [Decoder] for byte-level tokenizers: a token
// is a byte string, and text is released only up to the last complete UTF-8
// character.
type ByteDecoder struct {
	tokenBytes func(id int) []byte // the bytes of a token, nil to skip it
	pending    []byte
}

// NewByteDecoder returns a ByteDecoder over tokenBytes, which gives the bytes
// of one token (nil or empty to emit nothing, e.g. for a skipped special).
func NewByteDecoder(tokenBytes func(id int) []byte) *ByteDecoder {
	return &ByteDecoder{tokenBytes: tokenBytes}
}

// Add implements Decoder.
func (d *ByteDecoder) Add(id int) string {
	b := d.tokenBytes(id)
	if len(d.pending) == 0 && completePrefix(b) == len(b) && utf8.Valid(b) {
		return string(b) // the common case: a token of whole characters
	}
	d.pending = append(d.pending, b...)
	n := completePrefix(d.pending)
	if n == 0 {
		return ""
	}
	out := validUTF8(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out
}

// Flush implements Decoder.
func (d *ByteDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	out := validUTF8(d.pending)
	d.pending = d.pending[:0]
	return out
}

// validUTF8 converts b to a string, replacing each invalid byte with U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b)))
}

// completePrefix returns the length of the longest prefix of b that can be
// released now: everything up to a trailing, still incomplete UTF-8 sequence.
// Invalid bytes are released (they can never become valid) and are shown as
// U+FFFD by the caller's string conversion when they reach output.
func completePrefix(b []byte) int {
	// An incomplete sequence is at most 3 bytes long, at the very end.
	for back := 1; back <= 3 && back <= len(b); back++ {
		i := len(b) - back
		c := b[i]
		if c < 0x80 {
			return len(b) // ASCII: everything before and at it is complete
		}
		if c >= 0xC0 { // a lead byte: is its sequence complete?
			need := 0
			switch {
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			default:
				need = 2
			}
			if back < need && !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
		// a continuation byte: look further back for its lead
	}
	return len(b)
}
