package workload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tinyserve/tinyserve/internal/testfiles"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

const (
	siExperiments = "../testdata/serving-inference/experiments"
	siPrompts     = "../testdata/serving-inference/prompts"
)

// The Qwen tokenizer.json is 11 MB: load it once per test binary, from a
// temporary copy of llm/tokenizer's compressed built-in file (with
// testdata/tokenizers/qwen3/tokenizer_config.json beside it).
var (
	qwenOnce sync.Once
	qwenTok  *tokenizer.HFTokenizer
	qwenErr  error
	gpt2Once sync.Once
	gpt2Tok  *tokenizer.GPT2Tokenizer
	gpt2Err  error
)

func qwen(t testing.TB) *tokenizer.HFTokenizer {
	t.Helper()
	qwenOnce.Do(func() {
		qwenErr = errors.New("qwen tokenizer fixture: not unpacked")
		qwenTok, qwenErr = tokenizer.LoadHF(testfiles.QwenTokenizer(t, ".."))
	})
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok
}

func gpt2(t testing.TB) *tokenizer.GPT2Tokenizer {
	t.Helper()
	gpt2Once.Do(func() { gpt2Tok, gpt2Err = tokenizer.GPT2() })
	if gpt2Err != nil {
		t.Fatal(gpt2Err)
	}
	return gpt2Tok
}

// TestServingInferenceByteIdentity is the compatibility promise: the
// serving-inference experiment files, run with the Qwen tokenizer, give
// exactly the prompt files and sidecars that tool wrote.
func TestServingInferenceByteIdentity(t *testing.T) {
	entries, err := os.ReadDir(siExperiments)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(siExperiments, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !IsWorkload(data) {
			continue // example.json is a sweep config
		}
		checked++
		t.Run(e.Name(), func(t *testing.T) {
			cfg, err := LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			paths, digest, err := Write(out, cfg, qwen(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, pair := range [][2]string{
				{paths.Data, filepath.Join(siPrompts, cfg.Name+".jsonl")},
				{paths.Metadata, filepath.Join(siPrompts, cfg.Name+".metadata.json")},
			} {
				got, err := os.ReadFile(pair[0])
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(pair[1])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s at byte %d", pair[0], pair[1], firstDiff(got, want))
				}
			}
			// The committed files verify, with re-tokenization.
			v, err := Verify(siPrompts, cfg, qwen(t))
			if err != nil {
				t.Fatal(err)
			}
			if v != digest {
				t.Fatalf("Verify digest %s, generated %s", v, digest)
			}
		})
	}
	if checked != 4 {
		t.Fatalf("checked %d workloads, want the 4 serving-inference ones", checked)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
