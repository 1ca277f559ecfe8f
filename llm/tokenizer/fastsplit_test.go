package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// splitters returns, for each hand-written pattern, the fast splitter and
// the regexp2 one it must agree with.
func splitters(tb testing.TB) map[string][2]*regexSplit {
	tb.Helper()
	out := map[string][2]*regexSplit{}
	for name, expr := range map[string]string{"gpt2": gpt2Pattern, "qwen": qwenPattern, "llama3": llama3Pattern} {
		re := regexp2.MustCompile(expr, regexp2.None)
		fast := fastPatternFor(expr)
		if fast == fastNone {
			tb.Fatalf("%s pattern has no fast matcher", name)
		}
		out[name] = [2]*regexSplit{
			{re: re, fast: fast, behavior: behaviorIsolated},
			{re: re, behavior: behaviorIsolated},
		}
	}
	return out
}

func checkSame(t *testing.T, name string, pair [2]*regexSplit, s string) {
	t.Helper()
	fast, slow := pair[0].split(nil, s), pair[1].split(nil, s)
	if strings.Join(fast, "\x00|") != strings.Join(slow, "\x00|") {
		t.Fatalf("%s on %q:\nfast   %q\nregexp %q", name, s, fast, slow)
	}
}

// tricky covers every class boundary the patterns care about: ASCII and
// Unicode spaces, line breaks, apostrophes and contraction letters in both
// cases (and runes that case-fold near them), letters, marks, digits of
// several kinds, symbols, emoji, control characters.
var tricky = []string{
	" ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u0085", "\u2028", "\u3000", "\v", "\f",
	"'", "s", "S", "t", "T", "re", "RE", "Re", "ve", "VE", "m", "M", "ll", "LL", "lL", "d", "D",
	"\u017f", "\u212a", "\u0130", "a", "é", "e\u0301", "日本", "ß", "Ω",
	"1", "23", "456", "7890", "\u0663", "\u216b", "\u00b2", "½",
	"!", "?!", "_", "-", ".", "(", "\u200b", "\u200d", "🎉", "👍🏽", "\x00", "\x1f",
}

func TestFastSplitMatchesRegexp2(t *testing.T) {
	sp := splitters(t)
	var texts []string
	// Every pair and triple of tricky pieces.
	for _, a := range tricky {
		for _, b := range tricky {
			texts = append(texts, a+b)
			for _, c := range []string{" a", "1!", "\n'"} {
				texts = append(texts, a+b+c)
			}
		}
	}
	for _, file := range []string{goldenGPT2, goldenQwen, goldenQwenSp} {
		for _, c := range loadGolden(t, file) {
			texts = append(texts, c.Text)
		}
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for range 1500 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(tricky[rng.IntN(len(tricky))])
		}
		texts = append(texts, b.String())
	}
	for name, pair := range sp {
		for _, s := range texts {
			checkSame(t, name, pair, s)
		}
	}
}

// TestFastClassesMatchRegexp2 checks the character classes and the
// case-folded contraction letters for every rune of the Basic Multilingual
// Plane and a sample above it: one regexp2 pass per class over a string of
// all those runes gives the set regexp2 matches.
func TestFastClassesMatchRegexp2(t *testing.T) {
	var runes []rune
	for r := rune(1); r < 0x30000; r++ {
		if (r < 0x10000 || r%7 == 0) && utf8.ValidRune(r) {
			runes = append(runes, r)
		}
	}
	matched := func(expr string, text []rune) map[int]bool {
		re := regexp2.MustCompile(expr, regexp2.None)
		got := map[int]bool{}
		m, err := re.FindRunesMatch(text)
		for err == nil && m != nil {
			got[m.Index] = true
			m, err = re.FindNextMatch(m)
		}
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, cls := range []struct {
		expr string
		in   func(rune) bool
	}{{`\s`, isS}, {`\p{L}`, isL}, {`\p{N}`, isN}} {
		got := matched(cls.expr, runes)
		for i, r := range runes {
			if got[i] != cls.in(r) {
				t.Errorf("%s on U+%04X: regexp2 %v, ours %v", cls.expr, r, got[i], cls.in(r))
			}
		}
	}
	// Each rune X as "'X" + "e" + "l": the case-insensitive contraction
	// matches at the apostrophe exactly when contraction() says so.
	var text []rune
	for _, r := range runes {
		text = append(text, '\'', r, 'e', 'l', 0)
	}
	got := matched(`(?i:'s|'t|'re|'ve|'m|'ll|'d)`, text)
	for k, r := range runes {
		i := 5 * k
		want := contraction(text, i, true) > i
		if got[i] != want {
			t.Errorf("contraction '%c (U+%04X): regexp2 %v, ours %v", r, r, got[i], want)
		}
	}
}

// FuzzFastSplit compares the hand-written matchers with regexp2 on arbitrary
// text. Seeds: testdata/fuzz/FuzzFastSplit.
func FuzzFastSplit(f *testing.F) {
	for _, s := range tricky {
		f.Add(s + " x" + s)
	}
	sp := splitters(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 1024 {
			t.Skip()
		}
		for name, pair := range sp {
			checkSame(t, name, pair, s)
		}
	})
}
