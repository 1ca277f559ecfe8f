package tokenizer

import (
	"testing"
	"unicode/utf8"
)

// TestByteDecoderNeverSplitsCharacters feeds multi-byte text one byte per
// token and checks that no emitted piece is invalid UTF-8 and that the
// pieces add up to the text.
func TestByteDecoderNeverSplitsCharacters(t *testing.T) {
	for _, text := range []string{"héllo wörld", "日本語のテキスト", "emoji 👩‍👩‍👧 ok", "a\xffb", "tail \xe6\x97"} {
		d := NewByteDecoder(func(id int) []byte { return []byte{byte(id)} })
		got := ""
		for i := 0; i < len(text); i++ {
			piece := d.Add(int(text[i]))
			if !utf8.ValidString(piece) {
				t.Errorf("%q: emitted invalid piece %q", text, piece)
			}
			got += piece
		}
		got += d.Flush()
		if want := LossyUTF8([]byte(text)); got != want {
			t.Errorf("decoded %q, want %q", got, want)
		}
	}
}
