package tokenizer

import (
	"unicode/utf8"
)

// ByteDecoder is an incremental [llm.Decoder] for byte-level tokenizers: a token
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
	out := LossyUTF8(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out
}

// Flush implements Decoder.
func (d *ByteDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	out := LossyUTF8(d.pending)
	d.pending = d.pending[:0]
	return out
}

// LossyUTF8 converts b to a string, replacing each maximal ill-formed
// subsequence with one U+FFFD. This is what Rust's String::from_utf8_lossy
// (Hugging Face) and Python's bytes.decode(errors="replace") (tiktoken) do, so
// Decode output matches the reference libraries byte for byte.
func LossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		out = utf8.AppendRune(out, utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return string(out)
}

// maximalSubpart returns how many bytes at the start of b (which does not
// start with a valid character) form the longest prefix of some valid UTF-8
// sequence, at least 1 (Unicode's "maximal subpart" rule).
func maximalSubpart(b []byte) int {
	lead := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the first continuation byte
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead == 0xE0:
		need, lo = 2, 0xA0
	case lead >= 0xE1 && lead <= 0xEC, lead == 0xEE, lead == 0xEF:
		need = 2
	case lead == 0xED:
		need, hi = 2, 0x9F
	case lead == 0xF0:
		need, lo = 3, 0x90
	case lead >= 0xF1 && lead <= 0xF3:
		need = 3
	case lead == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		c := b[n]
		if k == 0 && (c < lo || c > hi) || k > 0 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n
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
