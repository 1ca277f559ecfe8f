package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet: every byte gets a printable rune so that BPE
// vocabularies can be stored as text. Printable Latin-1 bytes map to
// themselves; the other 68 bytes map, in byte order, to U+0100 onwards. This
// is the mapping described by OpenAI's encoder.py (bytes_to_unicode) and used
// by every byte-level tokenizer.json.

// byteLevelRunes is the rune each byte is written as. Immutable after
// initialisation.
var byteLevelRunes = func() (t [256]rune) {
	next := rune(256)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = next
			next++
		}
	}
	return t
}()

// byteLevelBytes inverts byteLevelRunes: the byte for a rune below 324, or -1.
// Immutable after initialisation.
var byteLevelBytes = func() (t [324]int16) {
	for i := range t {
		t[i] = -1
	}
	for b, r := range byteLevelRunes {
		t[r] = int16(b)
	}
	return t
}()

// byteLevelDecode returns the raw bytes a byte-level token string stands for.
// ok is false when some rune is outside the alphabet; Hugging Face's ByteLevel
// decoder then uses the token's own UTF-8 bytes, and so do callers.
func byteLevelDecode(s string) (b []byte, ok bool) {
	b = make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(byteLevelBytes) || byteLevelBytes[r] < 0 {
			return nil, false
		}
		b = append(b, byte(byteLevelBytes[r]))
	}
	return b, true
}

// lossyUTF8 converts b to a string, replacing each maximal ill-formed
// subsequence with one U+FFFD. This is what Rust's String::from_utf8_lossy
// (Hugging Face) and Python's bytes.decode(errors="replace") (tiktoken) do, so
// Decode output matches the reference libraries byte for byte.
func lossyUTF8(b []byte) string {
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

// validText replaces each invalid byte of s with U+FFFD, as converting s to
// runes does. Encoders need valid UTF-8 (regular expressions and normalizers
// work on characters); this is also how tiktoken-go sees such input.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}
