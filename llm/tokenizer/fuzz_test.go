package tokenizer

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/tinyserve/tinyserve/llm"
)

// FuzzParseHF feeds arbitrary tokenizer.json contents to the parser: it must
// return an error or a tokenizer that encodes and decodes without panicking
// and whose ids, the template's included, are all in the vocabulary.
// Seeds: the tiny fixture (testdata/tiny), small files with each kind of
// post_processor, and the corpus in testdata/fuzz/FuzzParseHF.
func FuzzParseHF(f *testing.F) {
	tinyData, err := os.ReadFile(tinyJSON)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tinyData)
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`))
	f.Add([]byte(`{"model":{"vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},"decoder":{"type":"Sequence","decoders":[{"type":"ByteLevel"}]},"added_tokens":[{"id":3,"content":"<x>","special":true,"lstrip":true,"rstrip":true,"single_word":true}]}`))
	// The post-processors a template can come from, on a small file, so
	// the fuzzer starts from each shape (nested Sequence, multi-id
	// special tokens, cls/sep pairs).
	const pre = `{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false},"decoder":{"type":"ByteLevel"},"added_tokens":[{"id":3,"content":"<s>","special":true}],"post_processor":`
	for _, pp := range []string{
		`{"type":"Sequence","processors":[{"type":"ByteLevel","trim_offsets":false},{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[],"special_tokens":{"<s>":{"id":"<s>","ids":[3],"tokens":["<s>"]}}}]}`,
		`{"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"T","type_id":1}}],"special_tokens":{"T":{"id":"T","ids":[3,2],"tokens":["<s>","ab"]}}}`,
		`{"type":"RobertaProcessing","sep":["<s>",3],"cls":["a",0]}`,
		`{"type":"BertProcessing","sep":["<s>",3],"cls":["b",1]}`,
	} {
		f.Add([]byte(pre + pp + "}"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ParseHF(data, HFOptions{})
		if err != nil {
			return
		}
		if b := tok.BOSTokenID(); b < -1 || b >= tok.VocabSize() {
			t.Fatalf("BOSTokenID %d outside [-1, %d)", b, tok.VocabSize())
		}
		for _, text := range []string{"", "ab <x> hello world", "<|endoftext|>日本 \u00e9\u0301 12345  \n\t"} {
			ids := tok.Encode(text, true)
			for _, id := range tok.AddSpecialTokens(ids) {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("AddSpecialTokens(Encode(%q)) gave id %d outside [0, %d)", text, id, tok.VocabSize())
				}
			}
			_ = tok.Decode(ids, true)
			_ = tok.Encode(text, false)
		}
	})
}

// The tokenizers FuzzRoundTrip checks, loaded once per test binary.
var (
	tinyOnce sync.Once
	tinyTok  *HFTokenizer
	tinyErr  error
)

// FuzzRoundTrip checks that byte-level BPE is lossless: decoding the
// encoding of any valid UTF-8 text gives the text back (after NFC for the
// tokenizers that normalize), with and without special tokens, for GPT-2,
// Qwen3 and the tiny fixture. Seeds: testdata/fuzz/FuzzRoundTrip.
func FuzzRoundTrip(f *testing.F) {
	for _, c := range loadGolden(f, goldenQwen) {
		f.Add(c.Text)
	}
	for _, c := range loadGolden(f, goldenQwenSp) {
		f.Add(c.Text)
	}
	g, q := gpt2(f), qwen(f)
	tinyOnce.Do(func() { tinyTok, tinyErr = LoadHF(tinyJSON) })
	if tinyErr != nil {
		f.Fatal(tinyErr)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || len(text) > 1<<12 {
			t.Skip()
		}
		for _, allow := range []bool{false, true} {
			if got := g.Decode(g.Encode(text, allow), false); got != text {
				t.Fatalf("gpt2 allowSpecial=%v: %q -> %q", allow, text, got)
			}
			want := norm.NFC.String(text)
			if got := q.Decode(q.Encode(text, allow), false); got != want {
				t.Fatalf("qwen3 allowSpecial=%v: %q -> %q, want %q", allow, text, got, want)
			}
			if got := tinyTok.Decode(tinyTok.Encode(text, allow), false); got != want {
				t.Fatalf("tiny allowSpecial=%v: %q -> %q, want %q", allow, text, got, want)
			}
		}
	})
}

// FuzzDetokenize decodes arbitrary id sequences (two bytes of input per id,
// ids out of range included) with the tiny fixture and GPT-2, whose
// single-byte tokens make any byte string: the streaming decoder's pieces
// are valid UTF-8 and add up (with Flush) to what Decode gives for the whole
// sequence, skipping special tokens is decoding the sequence without them,
// and the decoded text round-trips through Encode (after NFC where the
// tokenizer normalizes). FuzzRoundTrip starts from text; this starts from
// ids, so its texts hold added tokens, U+FFFD and odd byte splits. Each
// run encodes too, so new inputs are slow to minimize: fuzz with
//
//	go test -run XXX -fuzz FuzzDetokenize -fuzzminimizetime 2s ./llm/tokenizer
func FuzzDetokenize(f *testing.F) {
	f.Add([]byte{0, 72, 0, 105})
	f.Add([]byte{0, 0xe6, 0, 0x97, 0, 0x41, 0, 0xe6})    // a character cut by another token
	f.Add([]byte{0, 0xed, 0, 0xa0, 0, 0x80, 0xff, 0xff}) // a surrogate's bytes, an id out of range
	f.Add([]byte{0, 0xf0, 0, 0x9f, 0, 0x98})
	g := gpt2(f)
	tinyOnce.Do(func() { tinyTok, tinyErr = LoadHF(tinyJSON) })
	if tinyErr != nil {
		f.Fatal(tinyErr)
	}
	toks := []struct {
		name string
		tok  llm.Tokenizer
		nfc  bool
	}{{"tiny", tinyTok, true}, {"gpt2", g, false}}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<9 {
			t.Skip()
		}
		for _, c := range toks {
			n := c.tok.VocabSize()
			ids := make([]int, 0, len(data)/2)
			for i := 0; i+1 < len(data); i += 2 {
				v := int(data[i])<<8 | int(data[i+1])
				ids = append(ids, v%(n+2)-1) // -1 and n name no token
			}
			for _, skip := range []bool{false, true} {
				want := c.tok.Decode(ids, skip)
				if !utf8.ValidString(want) {
					t.Fatalf("%s: Decode(%v, %v) = %q, not UTF-8", c.name, ids, skip, want)
				}
				d := c.tok.NewDecoder(skip)
				var got strings.Builder
				for _, id := range ids {
					piece := d.Add(id)
					if !utf8.ValidString(piece) {
						t.Fatalf("%s: streaming %v emitted %q, not UTF-8", c.name, ids, piece)
					}
					got.WriteString(piece)
				}
				got.WriteString(d.Flush())
				if got.String() != want {
					t.Fatalf("%s skipSpecial=%v: streaming %v gives %q, Decode %q", c.name, skip, ids, got.String(), want)
				}
			}
			kept := slices.DeleteFunc(slices.Clone(ids), c.tok.IsSpecial)
			if a, b := c.tok.Decode(ids, true), c.tok.Decode(kept, false); a != b {
				t.Fatalf("%s: skipping specials of %v gives %q, decoding without them %q", c.name, ids, a, b)
			}
			text := c.tok.Decode(ids, false)
			want := text
			if c.nfc {
				want = norm.NFC.String(text)
			}
			if back := c.tok.Decode(c.tok.Encode(text, true), false); back != want {
				t.Fatalf("%s: %q (from %v) encodes and decodes to %q", c.name, text, ids, back)
			}
		}
	})
}

// FuzzSplitAdded cuts fuzzed text at up to three fuzzed added tokens (each
// with fuzzed special, single_word, lstrip and rstrip flags): the segments
// are never empty and concatenate back to the text; a token segment is its
// token's content plus, only where lstrip/rstrip allow it, whitespace on
// that side; no special token is cut out when they are skipped; and a
// single_word token cut out does not touch a word character.
func FuzzSplitAdded(f *testing.F) {
	f.Add("a <x> b<x>c <|endoftext|>", "<x>", "<|endoftext|>", "", uint16(0x0f0))
	f.Add("  <x>  y", "<x>", "x", "<", uint16(0x00c))
	f.Add("abab", "ab", "aba", "b", uint16(0x111))
	f.Add("日本 語 日本", "日本", " ", "本", uint16(0xfff))
	f.Fuzz(func(t *testing.T, s, c0, c1, c2 string, flags uint16) {
		var tokens []addedToken
		trie := newTokenTrie()
		for i, c := range []string{c0, c1, c2} {
			fl := flags >> (4 * i)
			tokens = append(tokens, addedToken{id: i, content: c, special: fl&1 != 0, singleWord: fl&2 != 0, lstrip: fl&4 != 0, rstrip: fl&8 != 0})
			trie.add(c, i)
		}
		for _, skip := range []bool{false, true} {
			segs := splitAdded(nil, s, trie, tokens, skip)
			var all strings.Builder
			for k, seg := range segs {
				all.WriteString(seg.text)
				if seg.text == "" {
					t.Fatalf("segment %d of %q is empty: %q", k, s, segTexts(segs))
				}
				if seg.token < 0 {
					continue
				}
				at := tokens[seg.token]
				if skip && at.special {
					t.Fatalf("special token %q cut out of %q while skipped", at.content, s)
				}
				// The content may itself hold whitespace: any place of it
				// that leaves only allowed whitespace around it will do
				// (and, for a single_word token, touches no word character
				// in the text around that place).
				found := false
				for i := 0; i+len(at.content) <= len(seg.text) && !found; i++ {
					l, r := seg.text[:i], seg.text[i+len(at.content):]
					found = seg.text[i:i+len(at.content)] == at.content &&
						(l == "" || at.lstrip && strings.TrimFunc(l, unicode.IsSpace) == "") &&
						(r == "" || at.rstrip && strings.TrimFunc(r, unicode.IsSpace) == "")
					if found && at.singleWord {
						before := strings.Join(segTexts(segs[:k]), "") + l
						after := r + strings.Join(segTexts(segs[k+1:]), "")
						found = !endsWithWordChar(before) && !startsWithWordChar(after)
					}
				}
				if !found {
					t.Fatalf("segment %q of %q is not token %+v with only allowed whitespace around it (or it touches a word)", seg.text, s, at)
				}
			}
			if all.String() != s {
				t.Fatalf("segments %q of %q concatenate to %q", segTexts(segs), s, all.String())
			}
		}
	})
}

func segTexts(segs []segment) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.text
	}
	return out
}
