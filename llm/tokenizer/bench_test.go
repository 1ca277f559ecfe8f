package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// benchText is about 1 MB built from the golden strings (prose, code,
// numbers, whitespace runs, several scripts, emoji), so both encoders see the
// same mixed input.
func benchText(b *testing.B) string {
	b.Helper()
	var sb strings.Builder
	cases := loadGolden(b, goldenQwen)
	for sb.Len() < 1<<20 {
		for _, c := range cases {
			sb.WriteString(c.Text)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// BenchmarkEncode1MB compares the pure-Go Hugging Face encoder (Qwen3's
// tokenizer.json, and GPT-2's vocabulary as a tokenizer.json, which gives
// the same ids as r50k) with tiktoken-go's r50k_base on the same 1 MB of
// text:
//
//	go test -run '^$' -bench Encode1MB -benchtime 5x ./llm/tokenizer
//
// Compare the MB/s columns; docs/workload.md records a measured ratio.
func BenchmarkEncode1MB(b *testing.B) {
	text := benchText(b)
	for _, bc := range []struct {
		name   string
		encode func(string) []int
	}{
		{"hf-qwen3", func(s string) []int { return qwen(b).Encode(s, false) }},
		{"hf-gpt2", func(s string) []int { return hfGPT2(b).Encode(s, false) }},
		// tiktoken-go itself. The golden text has a 340-letter word, so
		// GPT2Tokenizer.Encode would take its linear path; measure both.
		{"tiktoken-go-r50k", func(s string) []int { return gpt2(b).enc.EncodeOrdinary(s) }},
		{"gpt2-tokenizer", func(s string) []int { return gpt2(b).Encode(s, false) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.encode("warm up") // load outside the timed loop
			b.SetBytes(int64(len(text)))
			n := 0
			for b.Loop() {
				n = len(bc.encode(text))
			}
			b.ReportMetric(float64(n), "tokens")
		})
	}
}

// BenchmarkParseBuiltinQwen measures what the first call of Qwen() costs
// (later calls reuse its result): decompressing the embedded 11 MB
// tokenizer.json and parsing it, against parsing the same bytes alone.
//
//	go test -run '^$' -bench ParseBuiltinQwen -benchtime 5x -benchmem ./llm/tokenizer
func BenchmarkParseBuiltinQwen(b *testing.B) {
	b.Run("gunzip+parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseBuiltinQwen(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		data, err := os.ReadFile(qwenJSON(b))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := ParseHF(data, HFOptions{EOSToken: "<|im_end|>"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
