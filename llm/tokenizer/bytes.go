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

// ByteLevelEncode writes raw bytes in GPT-2's byte-level alphabet, the form
// vocab.json, merges.txt and byte-level tokenizer.json files (and GGUF
// vocabularies) store tokens in.
func ByteLevelEncode(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = byteLevelRunes[c]
	}
	return string(r)
}

// ByteLevelDecode returns the raw bytes a byte-level token string stands
// for, and false if some rune is outside the alphabet.
func ByteLevelDecode(s string) ([]byte, bool) { return byteLevelDecode(s) }

// validText replaces each invalid byte of s with U+FFFD, as converting s to
// runes does. Encoders need valid UTF-8 (regular expressions and normalizers
// work on characters); this is also how tiktoken-go sees such input.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}
