package tokenizer

import (
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tinyserve/tinyserve/llm"
)

const tinyJSON = "testdata/tiny/tokenizer.json"

func tiny(tb testing.TB) *HFTokenizer {
	tb.Helper()
	tok, err := LoadHF(tinyJSON)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func TestVocabAndSpecials(t *testing.T) {
	g, q, l, ty := gpt2(t), qwen(t), llama(t), tiny(t)
	tests := []struct {
		name       string
		tok        llm.Tokenizer
		vocab, eos int
		special    []int
		notSpecial []int
	}{
		{"gpt2", g, 50257, 50256, []int{50256}, []int{0, 50255, 50257, -1}},
		// Qwen's tokenizer_config.json names <|im_end|> as eos_token.
		{"qwen3", q, 151669, 151645, []int{151643, 151644, 151645, 151656}, []int{151657, 151667, 151668, 0, 151669}},
		// Llama 3.1's tokenizer_config.json names <|eot_id|> (the end of a
		// chat turn), not <|end_of_text|>; all 256 added tokens are special.
		{"llama3_1", l, 128256, 128009, []int{128000, 128001, 128009, 128002, 128255}, []int{0, 127999, 128256, -1}},
		{"tiny", ty, 270, 268, []int{268}, []int{269, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tok.VocabSize(); got != tc.vocab {
				t.Errorf("VocabSize = %d, want %d", got, tc.vocab)
			}
			if got := tc.tok.EOSTokenID(); got != tc.eos {
				t.Errorf("EOSTokenID = %d, want %d", got, tc.eos)
			}
			for _, id := range tc.special {
				if !tc.tok.IsSpecial(id) {
					t.Errorf("IsSpecial(%d) = false", id)
				}
			}
			for _, id := range tc.notSpecial {
				if tc.tok.IsSpecial(id) {
					t.Errorf("IsSpecial(%d) = true", id)
				}
			}
		})
	}
}

func TestSpecialTokenHandling(t *testing.T) {
	g, q, l := gpt2(t), qwen(t), llama(t)
	tests := []struct {
		name         string
		tok          llm.Tokenizer
		text         string
		allowSpecial bool
		want         []int // nil: only check the absence of notWant
		notWant      int
	}{
		{"gpt2 allowed", g, "a<|endoftext|>b", true, []int{64, 50256, 65}, -1},
		{"gpt2 as text", g, "a<|endoftext|>b", false, nil, 50256},
		{"qwen allowed", q, "<|endoftext|>", true, []int{151643}, -1},
		{"qwen as text", q, "<|endoftext|>", false, nil, 151643},
		// Non-special added tokens are matched either way, as in Hugging Face.
		{"qwen think as text", q, "<think>", false, []int{151667}, -1},
		{"llama allowed", l, "<|begin_of_text|>Hello<|eot_id|>", true, []int{128000, 9906, 128009}, -1},
		{"llama reserved allowed", l, "<|reserved_special_token_250|>", true, []int{128255}, -1},
		{"llama as text", l, "<|begin_of_text|>Hello", false, nil, 128000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tok.Encode(tc.text, tc.allowSpecial)
			if tc.want != nil && !equalIDs(got, tc.want) {
				t.Fatalf("Encode = %v, want %v", got, tc.want)
			}
			for _, id := range got {
				if id == tc.notWant {
					t.Fatalf("Encode = %v contains %d", got, tc.notWant)
				}
			}
			if dec := tc.tok.Decode(got, false); dec != tc.text {
				t.Fatalf("Decode = %q, want %q", dec, tc.text)
			}
		})
	}
}

func TestDecodeSkipSpecial(t *testing.T) {
	g, q, l := gpt2(t), qwen(t), llama(t)
	tests := []struct {
		name string
		tok  llm.Tokenizer
		ids  []int
		skip bool
		want string
	}{
		{"gpt2 keep", g, []int{15496, 50256}, false, "Hello<|endoftext|>"},
		{"gpt2 skip", g, []int{15496, 50256}, true, "Hello"},
		{"gpt2 unknown ids skipped", g, []int{-1, 15496, 50257, 1 << 40}, false, "Hello"},
		{"qwen skip special keeps think", q, []int{151644, 9707, 151667, 151645}, true, "Hello<think>"},
		{"qwen keep", q, []int{151644, 9707, 151645}, false, "<|im_start|>Hello<|im_end|>"},
		{"qwen unknown ids skipped", q, []int{151669, 9707, -5}, false, "Hello"},
		{"llama skip", l, []int{128000, 9906, 128009}, true, "Hello"},
		{"llama keep", l, []int{128000, 9906, 128009}, false, "<|begin_of_text|>Hello<|eot_id|>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tok.Decode(tc.ids, tc.skip); got != tc.want {
				t.Fatalf("Decode = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestIncrementalDecoder streams multi-byte text (accents, CJK, emoji with
// modifiers) whose characters byte-level BPE splits across tokens: no chunk
// may hold half a character, and the chunks must add up to Decode's output.
func TestIncrementalDecoder(t *testing.T) {
	text := "héllo wörld — 日本語のテキスト 🎉👍🏽👨‍👩‍👧 ṩ ü ok"
	for _, tc := range []struct {
		name string
		tok  llm.Tokenizer
	}{{"gpt2", gpt2(t)}, {"qwen3", qwen(t)}, {"tiny", tiny(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			ids := tc.tok.Encode(text, false)
			d := tc.tok.NewDecoder(true)
			var b strings.Builder
			held := 0
			for _, id := range ids {
				chunk := d.Add(id)
				if !utf8.ValidString(chunk) {
					t.Fatalf("chunk %q is not valid UTF-8", chunk)
				}
				if chunk == "" {
					held++
				}
				b.WriteString(chunk)
			}
			b.WriteString(d.Flush())
			if got, want := b.String(), tc.tok.Decode(ids, true); got != want || got != text {
				t.Fatalf("streamed %q, Decode %q, text %q", got, want, text)
			}
			if held == 0 {
				t.Fatal("no token held back a partial character; the test text does not exercise splitting")
			}
		})
	}
}

func TestDecoderFlushIncomplete(t *testing.T) {
	g := gpt2(t)
	// "🎉" is 4 bytes that GPT-2 splits over several tokens; stop after the first.
	ids := g.Encode("🎉", false)
	if len(ids) < 2 {
		t.Fatalf("expected the emoji to take several tokens, got %v", ids)
	}
	d := g.NewDecoder(false)
	if got := d.Add(ids[0]); got != "" {
		t.Fatalf("Add released %q before the character was complete", got)
	}
	if got := d.Flush(); got == "" || !strings.ContainsRune(got, utf8.RuneError) {
		t.Fatalf("Flush = %q, want replacement characters", got)
	}
}

func TestLossyUTF8(t *testing.T) {
	// Expected values printed by Python: bytes.decode("utf-8", "replace").
	tests := []struct{ in, want string }{
		{"\xe2\x82A", "\ufffdA"},
		{"\xff\xfe", "\ufffd\ufffd"},
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"},
		{"\xf0\x9f\x98", "\ufffd"},
		{"\xf0\x9f\x98\x80", "\U0001F600"},
		{"a\xc3", "a\ufffd"},
		{"\xc0\xaf", "\ufffd\ufffd"},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},
		{"\xf0\x9fA", "\ufffdA"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := LossyUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("LossyUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInvalidUTF8Input(t *testing.T) {
	for _, tok := range []llm.Tokenizer{gpt2(t), qwen(t)} {
		ids := tok.Encode("ok\xff\xfe done", false)
		if got := tok.Decode(ids, false); got != "ok\ufffd\ufffd done" {
			t.Errorf("%T: round trip of invalid UTF-8 = %q", tok, got)
		}
	}
}

func TestSplitBehaviors(t *testing.T) {
	// The example from Hugging Face's SplitDelimiterBehavior documentation.
	const text = "the-final--countdown"
	tests := []struct {
		behavior string
		invert   bool
		want     []string
	}{
		{"Removed", false, []string{"the", "final", "countdown"}},
		{"Isolated", false, []string{"the", "-", "final", "-", "-", "countdown"}},
		{"MergedWithPrevious", false, []string{"the-", "final-", "-", "countdown"}},
		{"MergedWithNext", false, []string{"the", "-final", "-", "-countdown"}},
		{"Contiguous", false, []string{"the", "-", "final", "--", "countdown"}},
		{"Removed", true, []string{"-", "-", "-"}},
	}
	for _, tc := range tests {
		t.Run(tc.behavior, func(t *testing.T) {
			raw := `{"type":"Split","pattern":{"String":"-"},"behavior":"` + tc.behavior + `","invert":` +
				map[bool]string{true: "true", false: "false"}[tc.invert] + `}`
			var seq []preTokenizer
			if err := appendPreTokenizer(&seq, []byte(raw)); err != nil {
				t.Fatal(err)
			}
			got := seq[0].split(nil, text)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNormalizers checks the normalizers against Hugging Face's output.
// Lowercase maps each character with Rust's char::to_lowercase, which is
// the full Unicode mapping: U+0130 (İ) becomes two characters, i and a
// combining dot above (Hugging Face tokenizers 0.22 encodes "İx" with a
// Lowercase normalizer as the bytes of "i\u0307x"), and a final capital
// sigma becomes σ, not ς (no context).
func TestNormalizers(t *testing.T) {
	tests := []struct{ raw, in, want string }{
		{`{"type":"Lowercase"}`, "İstanbul ΣΑΣ ABC ǅ", "i\u0307stanbul σασ abc ǆ"},
		{`{"type":"NFC"}`, "e\u0301", "\u00e9"},
		{`{"type":"NFKC"}`, "\ufb01\u00b2", "fi2"},
		{`{"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"Lowercase"}]}`, "\u00c9", "e\u0301"},
	}
	for _, tc := range tests {
		n, err := parseNormalizer([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if got := n.normalize(tc.in); got != tc.want {
			t.Errorf("%s on %q: got %q, want %q", tc.raw, tc.in, got, tc.want)
		}
	}
}

func TestOtherPreTokenizers(t *testing.T) {
	tests := []struct {
		name, raw, text string
		want            []string
	}{
		{"digits individual", `{"type":"Digits","individual_digits":true}`, "ab123c4", []string{"ab", "1", "2", "3", "c", "4"}},
		{"digits runs", `{"type":"Digits","individual_digits":false}`, "ab123c4", []string{"ab", "123", "c", "4"}},
		{"bytelevel prefix+regex", `{"type":"ByteLevel","add_prefix_space":true,"use_regex":true}`, "Hello world's", []string{" Hello", " world", "'s"}},
		{"bytelevel keeps leading space", `{"type":"ByteLevel","add_prefix_space":true,"use_regex":false}`, " x y", []string{" x y"}},
		{"bytelevel defaults", `{"type":"ByteLevel"}`, "a  b", []string{" a", " ", " b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seq []preTokenizer
			if err := appendPreTokenizer(&seq, []byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			got := seq[0].split(nil, tc.text)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAddedTokenOptions(t *testing.T) {
	tokens := []addedToken{
		{content: "<s>", special: true},
		{content: "my", lstrip: true, rstrip: true},
		{content: "ony", singleWord: true},
	}
	trie := newTokenTrie()
	for i, at := range tokens {
		trie.add(at.content, i)
	}
	show := func(segs []segment) string {
		var parts []string
		for _, s := range segs {
			if s.token >= 0 {
				parts = append(parts, "["+s.text+"]")
			} else {
				parts = append(parts, s.text)
			}
		}
		return strings.Join(parts, "|")
	}
	tests := []struct {
		text        string
		skipSpecial bool
		want        string
	}{
		{"a<s>b", false, "a|[<s>]|b"},
		{"a<s>b", true, "a<s>b"},
		{"I have  my  dog", false, "I have|[  my  ]|dog"},
		{"pony ony", false, "pony |[ony]"},
		{"onyx", false, "onyx"},
		{"", false, ""},
	}
	for _, tc := range tests {
		if got := show(splitAdded(nil, tc.text, trie, tokens, tc.skipSpecial)); got != tc.want {
			t.Errorf("splitAdded(%q, skip=%v) = %q, want %q", tc.text, tc.skipSpecial, got, tc.want)
		}
	}
}

func TestLeftmostLongest(t *testing.T) {
	tokens := []addedToken{{content: "ab"}, {content: "abc"}, {content: "bcd"}}
	trie := newTokenTrie()
	for i, at := range tokens {
		trie.add(at.content, i)
	}
	// "abc" starts first and is longer than "ab"; "bcd" overlaps it and loses.
	segs := splitAdded(nil, "xabcdab", trie, tokens, false)
	var got []string
	for _, s := range segs {
		got = append(got, s.text)
	}
	if strings.Join(got, "|") != "x|abc|d|ab" {
		t.Fatalf("got %q", got)
	}
}

func TestIgnoreMerges(t *testing.T) {
	data, err := os.ReadFile(tinyJSON)
	if err != nil {
		t.Fatal(err)
	}
	// "hello" is in the tiny vocab only through merges; add "Ġworld!" as a
	// whole-word entry that the merges cannot build.
	with := func(ignore bool) *HFTokenizer {
		s := strings.Replace(string(data), `"ignore_merges": false`, `"ignore_merges": `+map[bool]string{true: "true", false: "false"}[ignore], 1)
		s = strings.Replace(s, `"vocab": {`, `"vocab": {"hel": 300, `, 1)
		tok, err := ParseHF([]byte(s), HFOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if got := with(true).Encode("hel", false); !equalIDs(got, []int{300}) {
		t.Fatalf("ignore_merges: Encode(hel) = %v, want [300]", got)
	}
	if got := with(false).Encode("hel", false); equalIDs(got, []int{300}) {
		t.Fatalf("without ignore_merges, hel must come from merges, got %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	data, err := os.ReadFile(tinyJSON)
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	tests := []struct {
		name        string
		edit        func(string) string
		unsupported bool
		mention     string
	}{
		{"not json", func(string) string { return "{" }, false, "parsing tokenizer.json"},
		{"no model", func(string) string { return `{"added_tokens":[]}` }, false, "no model"},
		{"normalizer", func(s string) string {
			return strings.Replace(s, `"normalizer": {"type": "NFC"}`, `"normalizer": {"type": "Replace"}`, 1)
		}, true, `normalizer "Replace"`},
		{"pre-tokenizer", func(s string) string {
			return strings.Replace(s, `{"type": "Split"`, `{"type": "Metaspace"`, 1)
		}, true, `pre_tokenizer "Metaspace"`},
		{"model", func(s string) string { return strings.Replace(s, `"type": "BPE"`, `"type": "WordPiece"`, 1) }, true, `model "WordPiece"`},
		{"decoder", func(s string) string {
			return strings.Replace(s, `"decoder": {"type": "ByteLevel"`, `"decoder": {"type": "Metaspace"`, 1)
		}, true, `decoder "Metaspace"`},
		{"dropout", func(s string) string { return strings.Replace(s, `"dropout": null`, `"dropout": 0.1`, 1) }, true, "dropout"},
		{"byte fallback", func(s string) string {
			return strings.Replace(s, `"byte_fallback": false`, `"byte_fallback": true`, 1)
		}, true, "byte_fallback"},
		{"suffix", func(s string) string {
			return strings.Replace(s, `"end_of_word_suffix": ""`, `"end_of_word_suffix": "</w>"`, 1)
		}, true, "end_of_word_suffix"},
		{"bad regex", func(s string) string { return strings.Replace(s, `"Regex": "(?i:`, `"Regex": "((?i:`, 1) }, true, "Split regex"},
		{"merge missing token", func(s string) string {
			return strings.Replace(s, `"merges": [`, `"merges": [["zz", "qq"], `, 1)
		}, false, "missing from the vocab"},
		{"merge string format", func(s string) string {
			return strings.Replace(s, `"merges": [`, `"merges": ["a b c"], "x": [`, 1)
		}, false, "two tokens"},
		{"no bytelevel", func(s string) string {
			return strings.Replace(s, `, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]`, `]`, 1)
		}, true, "without ByteLevel"},
		{"added token without id", func(s string) string { return strings.Replace(s, `{"id": 268, `, `{`, 1) }, false, "has no id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			edited := tc.edit(base)
			if edited == base {
				t.Fatal("edit did not change the file; fix the test")
			}
			_, err := ParseHF([]byte(edited), HFOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v (%v)", !tc.unsupported, tc.unsupported, err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestMergesAsStrings(t *testing.T) {
	data, err := os.ReadFile(tinyJSON)
	if err != nil {
		t.Fatal(err)
	}
	pairs := `[["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["l", "l"], ["e", "ll"], ["h", "ell"], ["hell", "o"], ["Ġ", "w"], ["o", "r"], ["Ġw", "or"], ["Ġwor", "l"], ["Ġworl", "d"]]`
	strs := `["Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d"]`
	if !strings.Contains(string(data), pairs) {
		t.Fatal("tiny tokenizer merges changed; update the test")
	}
	a, err := ParseHF(data, HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseHF([]byte(strings.Replace(string(data), pairs, strs, 1)), HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello the world", "hellohello world the"} {
		x, y := a.Encode(text, false), b.Encode(text, false)
		if !equalIDs(x, y) {
			t.Errorf("%q: pairs give %v, strings give %v", text, x, y)
		}
		if len(x) >= len(text) {
			t.Errorf("%q: merges did not apply: %v", text, x)
		}
	}
}

// naiveBPE is the textbook algorithm: repeatedly merge the adjacent pair
// with the lowest rank, leftmost on ties. The heap version must agree.
func naiveBPE(m *bpeModel, ids []int32) []int32 {
	ids = append([]int32(nil), ids...)
	for {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(ids); i++ {
			if mg, ok := m.merges[pairKey(ids[i], ids[i+1])]; ok && (at < 0 || mg.rank < best.rank) {
				best, at = mg, i
			}
		}
		if at < 0 {
			return ids
		}
		ids = append(append(ids[:at:at], best.id), ids[at+2:]...)
	}
}

func TestBPEAgainstNaive(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	q := qwen(t)
	alphabet := []byte("abcdeinorst ")
	for range 2000 {
		n := 1 + rng.IntN(40)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		var start []int32
		for _, c := range b {
			start = append(start, q.model.byteID[c])
		}
		got, want := q.model.merge(string(b)), naiveBPE(q.model, start)
		if len(got) != len(want) {
			t.Fatalf("seed %d, %q: heap %v, naive %v", seed, b, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d, %q: heap %v, naive %v", seed, b, got, want)
			}
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	q := qwen(t)
	text := "Concurrent callers share the BPE cache; results must not change. 並行"
	want := q.Encode(text, false)
	done := make(chan []int)
	for range 8 {
		go func() { done <- q.Encode(text, false) }()
	}
	for range 8 {
		if got := <-done; !equalIDs(got, want) {
			t.Fatalf("concurrent Encode = %v, want %v", got, want)
		}
	}
}
