package mock

import (
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine"
)

func TestTokenizerRoundTrip(t *testing.T) {
	tok := NewTokenizer()
	text := "héllo <|endoftext|> wörld"
	plain := tok.Encode(text, false)
	if slices.Contains(plain, EOSTokenID) || tok.Decode(plain, false) != text {
		t.Errorf("plain encoding: %v -> %q", plain, tok.Decode(plain, false))
	}
	special := tok.Encode(text, true)
	if !slices.Contains(special, EOSTokenID) {
		t.Error("allowSpecial did not produce the EOS id")
	}
	if got := tok.Decode(special, true); got != strings.Replace(text, EndOfText, "", 1) {
		t.Errorf("skipSpecial decode %q", got)
	}
}

// TestForwardReadsThroughBlockTables checks that the mock's answer depends
// on the KV it wrote through the block table: a prefill in two chunks gives
// the reference token, and a decode given the wrong block gives another.
func TestForwardReadsThroughBlockTables(t *testing.T) {
	b := NewBackend(Config{})
	if err := b.AllocateKV(8, 4); err != nil {
		t.Fatal(err)
	}
	prompt := []int{'h', 'e', 'l', 'l', 'o', ' ', 'w'}
	want := Expected(Config{}, prompt, 1)[0]
	table := []int32{5, 2}
	if _, err := b.Forward(&engine.Batch{Seqs: []engine.SeqBatch{{ID: 1, Tokens: prompt[:3], StartPos: 0, BlockTable: table}}}); err != nil {
		t.Fatal(err)
	}
	rows, err := b.Forward(&engine.Batch{Seqs: []engine.SeqBatch{{ID: 1, Tokens: prompt[3:], StartPos: 3, BlockTable: table, Sample: true}}})
	if err != nil || len(rows) != 1 || rows[0].Argmax != want {
		t.Fatalf("chunked prefill: rows %+v err %v, want argmax %d", rows, err, want)
	}
	rows, err = b.Forward(&engine.Batch{Seqs: []engine.SeqBatch{{ID: 1, Tokens: []int{want}, StartPos: 7, BlockTable: []int32{5, 3}, Sample: true, NeedLogits: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if next := Expected(Config{}, append(prompt, want), 1)[0]; rows[0].Argmax == next {
		t.Errorf("reading through a wrong block table still gave the reference token %d", next)
	}
	if _, err := b.Forward(&engine.Batch{Seqs: []engine.SeqBatch{{ID: 1, Tokens: []int{1}, StartPos: 8, BlockTable: table, Sample: true}}}); err == nil {
		t.Error("a position beyond the block table was accepted")
	}
}
