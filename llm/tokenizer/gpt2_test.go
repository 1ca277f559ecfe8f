package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestGPT2LinearPathMatchesTiktoken: the heap-based path used for long pieces
// must give tiktoken-go's ids on everything, not only on the inputs that
// take it.
func TestGPT2LinearPathMatchesTiktoken(t *testing.T) {
	g := gpt2(t)
	var texts []string
	for _, file := range []string{goldenGPT2, goldenQwen, goldenGPT2Sp, goldenQwenSp} {
		for _, c := range loadGolden(t, file) {
			texts = append(texts, c.Text)
		}
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	alphabet := []string{"a", "e", "th", "in", "Q", " ", "  ", "\n", "1", "23", "!", "'s", "é", "日", "🎉", "<|endoftext|>", "\t", ".", "ing"}
	for range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(30) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	var long strings.Builder
	for long.Len() < 64<<10 {
		for _, s := range texts[:45] {
			long.WriteString(s)
			long.WriteByte(' ')
		}
	}
	texts = append(texts, long.String())
	// Whitespace runs past the linear path's threshold, alone and between
	// words: the linear path must split and merge them as tiktoken does.
	for _, ws := range []string{"\n", " ", "\t", "\u00a0", "\u3000", "\u2028", " \n", "\r\n"} {
		run := strings.Repeat(ws, 300)
		texts = append(texts, run, "a"+run+"b", "x "+run, run+"!")
	}
	for _, s := range texts {
		for _, allow := range []bool{false, true} {
			var want []int
			if allow {
				want = g.enc.Encode(s, []string{"all"}, nil)
			} else {
				want = g.enc.EncodeOrdinary(s)
			}
			if got := g.encodeLinear(s, allow); !equalIDs(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%q allowSpecial=%v: linear %v, tiktoken %v", s, allow, got, want)
			}
		}
	}
}

func TestGPT2LongInputs(t *testing.T) {
	g := gpt2(t)
	tests := []struct {
		name  string
		text  string
		allow bool
	}{
		{"long word", strings.Repeat("a", 100000), false},
		{"long number", strings.Repeat("9", 100000), false},
		{"long symbols", strings.Repeat("!", 100000), false},
		{"long accented word", strings.Repeat("é", 50000), false},
		{"many markers", strings.Repeat("<|endoftext|>x", 20000), true},
		{"long newlines", strings.Repeat("\n", 100000), false},
		{"long no-break spaces", strings.Repeat("\u00a0", 50000), false},
		{"long ideographic spaces", strings.Repeat("\u3000", 40000), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !needsLinearPath(tc.text, tc.allow) {
				t.Fatal("input does not take the linear path")
			}
			start := time.Now()
			ids := g.Encode(tc.text, tc.allow)
			// tiktoken-go needs tens of seconds for these; a generous bound
			// still catches a return to quadratic time without timing noise.
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("Encode took %v", d)
			}
			if got := g.Decode(ids, false); got != tc.text {
				t.Fatalf("round trip changed the text (len %d -> %d)", len(tc.text), len(got))
			}
		})
	}
	if needsLinearPath(strings.Repeat("word ", 10000), false) {
		t.Error("ordinary prose takes the linear path")
	}
}
