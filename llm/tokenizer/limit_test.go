package tokenizer

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// countingTok counts the bytes it is asked to tokenize.
type countingTok struct {
	llm.Tokenizer
	bytes int
}

func (c *countingTok) Encode(text string, allowSpecial bool) []int {
	c.bytes += len(text)
	return c.Tokenizer.Encode(text, allowSpecial)
}

// limitText is a long text of the kinds that tokenize unevenly: words,
// runs of spaces and newlines, digits, CJK, emoji and special tokens.
func limitText(rng *rand.Rand, n int) string {
	parts := []string{"the ", "quick", " brown", "   ", "\n\n", "12345", "日本語の", "😀", "<|endoftext|>", "<|im_start|>", "aaaaaaaa", "----", " ", "é", "\r\n"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// TestEncodePromptLimit: the bounded encoder either returns exactly
// EncodePrompt's ids, or refuses a text whose true count is over the limit
// with a lower bound that is over it too and never above the true count.
func TestEncodePromptLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		name string
		tok  llm.Tokenizer
	}{{"gpt2", gpt2(t)}, {"qwen", qwen(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			refused := 0
			for range 16 {
				text := limitText(rng, rng.IntN(100<<10))
				limit := 1 + rng.IntN(20000)
				want := EncodePrompt(tc.tok, text, true)
				ids, n, err := EncodePromptLimit(context.Background(), tc.tok, text, true, limit)
				if err != nil {
					t.Fatal(err)
				}
				if ids == nil {
					refused++
					if n <= limit || len(want) <= limit || n > len(want) {
						t.Fatalf("refused %d bytes at limit %d with bound %d; true count %d", len(text), limit, n, len(want))
					}
					continue
				}
				if !slices.Equal(ids, want) || n != len(want) {
					t.Fatalf("%d bytes: ids differ from EncodePrompt's (%d vs %d)", len(text), len(ids), len(want))
				}
			}
			if refused == 0 {
				t.Error("no text was refused early: the test does not reach the bound")
			}
		})
	}
}

// TestEncodePromptLimitWork: refusing a 4 MB text at a context of 1,024
// tokenizes tens of kilobytes, not the 4 MB, and a cancelled context stops
// it.
func TestEncodePromptLimitWork(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 90000)
	c := &countingTok{Tokenizer: gpt2(t)}
	ids, n, err := EncodePromptLimit(context.Background(), c, text, true, 1024)
	if err != nil || ids != nil || n <= 1024 {
		t.Fatalf("ids %d, bound %d, err %v: want a refusal", len(ids), n, err)
	}
	if c.bytes > 64<<10 {
		t.Errorf("tokenized %d bytes of a %d-byte text to refuse it at 1024 tokens", c.bytes, len(text))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.bytes = 0
	if _, _, err := EncodePromptLimit(ctx, c, text, true, 1<<20); err == nil || c.bytes > 64<<10 {
		t.Errorf("cancelled: err %v after %d bytes", err, c.bytes)
	}
}
