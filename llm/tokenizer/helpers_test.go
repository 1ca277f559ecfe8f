package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/tinyserve/tinyserve/internal/testfiles"
)

// Fixture paths: the repository's top-level testdata module.
const (
	fixtures       = "../../testdata/tokenizers/"
	goldenGPT2     = fixtures + "golden_gpt2.json"
	goldenGPT2Sp   = fixtures + "golden_gpt2_special.json"
	goldenQwen     = fixtures + "golden_qwen3.json"
	goldenQwenSp   = fixtures + "golden_qwen3_special.json"
	goldenLlama    = fixtures + "golden_llama3_1.json"
	goldenLlamaSp  = fixtures + "golden_llama3_1_special.json"
	goldenVariants = fixtures + "variants/golden_variants.json"
)

// qwenJSON is the path of a temporary copy of Qwen3's tokenizer.json (kept
// only compressed, as the built-in tokenizer's builtin/qwen/tokenizer.json.gz)
// with testdata/tokenizers/qwen3/tokenizer_config.json beside it.
func qwenJSON(tb testing.TB) string { return testfiles.QwenTokenizer(tb, "../..") }

// llamaJSON is the path of a temporary copy of Llama 3.1's tokenizer.json
// (testdata/tokenizers/llama3_1/tokenizer.json.gz) with its
// tokenizer_config.json beside it.
func llamaJSON(tb testing.TB) string { return testfiles.LlamaTokenizer(tb, "../..") }

// errNotUnpacked is what qwen and llama report after a failed unpacking
// (which ended the test that tried it).
var errNotUnpacked = errors.New("tokenizer fixture: not unpacked")

// The Qwen tokenizer.json is 11 MB and GPT-2's ranks take a while to parse:
// load each once per test binary.
var (
	qwenOnce  sync.Once
	qwenTok   *HFTokenizer
	qwenErr   error
	llamaOnce sync.Once
	llamaTok  *HFTokenizer
	llamaErr  error
	gpt2Once  sync.Once
	gpt2Tok   *GPT2Tokenizer
	gpt2Err   error
)

func qwen(tb testing.TB) *HFTokenizer {
	tb.Helper()
	qwenOnce.Do(func() {
		qwenErr = errNotUnpacked
		qwenTok, qwenErr = LoadHF(qwenJSON(tb))
	})
	if qwenErr != nil {
		tb.Fatal(qwenErr)
	}
	return qwenTok
}

func llama(tb testing.TB) *HFTokenizer {
	tb.Helper()
	llamaOnce.Do(func() {
		llamaErr = errNotUnpacked
		llamaTok, llamaErr = LoadHF(llamaJSON(tb))
	})
	if llamaErr != nil {
		tb.Fatal(llamaErr)
	}
	return llamaTok
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

// TestByteLevelRoundTrip checks the exported alphabet helpers on every
// byte: encoding gives printable runes (no spaces or controls, as in
// vocab.json) and decoding gives the bytes back.
func TestByteLevelRoundTrip(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	s := ByteLevelEncode(all)
	for _, r := range s {
		if r <= ' ' || r == 0x7f || (r >= 0x80 && r < 0xa1) || r == 0xad {
			t.Errorf("byte-level rune %U is not printable", r)
		}
	}
	if ByteLevelEncode([]byte(" the")) != "Ġthe" {
		t.Errorf(`" the" encodes to %q, want "Ġthe"`, ByteLevelEncode([]byte(" the")))
	}
	back, ok := ByteLevelDecode(s)
	if !ok || string(back) != string(all) {
		t.Errorf("decode of the 256-byte alphabet: ok=%v, %d bytes back", ok, len(back))
	}
	if _, ok := ByteLevelDecode("a\u4e00"); ok {
		t.Error("a rune outside the alphabet decoded")
	}
}
