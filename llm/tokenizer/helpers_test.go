package tokenizer

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
)

// Fixture paths: the repository's top-level testdata module.
const (
	fixtures     = "../../testdata/tokenizers/"
	qwenJSON     = fixtures + "qwen3/tokenizer.json"
	goldenGPT2   = fixtures + "golden_gpt2.json"
	goldenGPT2Sp = fixtures + "golden_gpt2_special.json"
	goldenQwen   = fixtures + "golden_qwen3.json"
	goldenQwenSp = fixtures + "golden_qwen3_special.json"
)

// The Qwen tokenizer.json is 11 MB and GPT-2's ranks take a while to parse:
// load each once per test binary.
var (
	qwenOnce sync.Once
	qwenTok  *HFTokenizer
	qwenErr  error
	gpt2Once sync.Once
	gpt2Tok  *GPT2Tokenizer
	gpt2Err  error
)

func qwen(tb testing.TB) *HFTokenizer {
	tb.Helper()
	qwenOnce.Do(func() { qwenTok, qwenErr = LoadHF(qwenJSON) })
	if qwenErr != nil {
		tb.Fatal(qwenErr)
	}
	return qwenTok
}

func gpt2(tb testing.TB) *GPT2Tokenizer {
	tb.Helper()
	gpt2Once.Do(func() { gpt2Tok, gpt2Err = GPT2() })
	if gpt2Err != nil {
		tb.Fatal(gpt2Err)
	}
	return gpt2Tok
}

type goldenCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func loadGolden(tb testing.TB, path string) []goldenCase {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		tb.Fatal(err)
	}
	if len(g.Cases) == 0 {
		tb.Fatalf("%s has no cases", path)
	}
	return g.Cases
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
