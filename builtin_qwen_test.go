package tinyserve

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/openai"
)

// TestHeavyBuiltinQwen serves the built-in qwen2.5-0.5b-random the way the
// si-qwen sweeps do, with no files: Qwen2.5-0.5B's shape, dtype auto
// (bfloat16, the built-in's stored type), the embedded Qwen tokenizer,
// Qwen2.5-Instruct's stop ids, and a completion over HTTP whose usage
// counts the tokenizer's tokens. Generating 494M weights takes seconds, and
// minutes under the race detector, so .ci/run runs it without -race (its
// "Heavy" step).
func TestHeavyBuiltinQwen(t *testing.T) {
	if raceEnabled {
		t.Skip("494M generated weights under the race detector: .ci/run runs this test without -race")
	}
	e, err := Open(context.Background(), Config{Model: "qwen2.5-0.5b-random", KVCacheBytes: 32 << 20, Seed: new(uint64(1))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info := e.Info()
	if info.VocabSize != 151936 || info.MaxModelLen != 32768 || !info.RandomWeights || info.Backend != "cpu" {
		t.Errorf("info %+v", info)
	}
	if info.EOSTokenID != 151645 || !slices.Equal(info.StopTokenIDs, []int{151643}) {
		t.Errorf("stop ids: EOS %d, others %v; want <|im_end|> 151645 and <|endoftext|> 151643", info.EOSTokenID, info.StopTokenIDs)
	}
	if n := e.Tokenizer().VocabSize(); n != 151669 {
		t.Errorf("tokenizer of %d ids, want Qwen's 151669", n)
	}
	prompt := "Analyze how continuous batching affects latency."
	want := len(e.Tokenizer().Encode(prompt, true))
	rec := httptest.NewRecorder()
	body := `{"model":"qwen2.5-0.5b-random","prompt":"` + prompt + `","max_tokens":4,"temperature":0,"ignore_eos":true}`
	openai.NewHandler(e).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Usage.PromptTokens != want || resp.Usage.CompletionTokens != 4 {
		t.Errorf("usage %+v, want %d prompt tokens (no BOS: Qwen adds none) and 4 completion tokens", resp.Usage, want)
	}
	// Greedy decoding is deterministic across engines of the same model.
	again, err := Open(context.Background(), Config{Model: "qwen2.5-0.5b-random", KVCacheBytes: 32 << 20, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	run := func(e llm.Engine) []int {
		ev, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{9707, 11, 1879, 0}, Params: llm.SamplingParams{MaxTokens: 3, IgnoreEOS: true}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int
		for x := range ev {
			ids = append(ids, x.TokenIDs...)
		}
		return ids
	}
	if a, b := run(e), run(again); !slices.Equal(a, b) || len(a) != 3 {
		t.Errorf("greedy tokens %v with 2 threads, %v with 1", a, b)
	}
}
