package tinyserve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/testfiles"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/openai"
)

// decoderGolden is what these tests read of a Llama-family golden.json
// (testdata/qwen2-tiny/README.md describes the format).
type decoderGolden struct {
	Cases []struct {
		Name     string `json:"name"`
		InputIDs []int  `json:"input_ids"`
		Top10    struct {
			IDs    []int     `json:"ids"`
			Values []float64 `json:"values"`
		} `json:"last_logits_top10"`
		Greedy struct {
			Tokens  []int     `json:"tokens"`
			Margins []float64 `json:"margins"`
		} `json:"greedy"`
	} `json:"cases"`
}

// goldenTol is the logit tolerance the READMEs give (float32 compute,
// float64 rotary angles); a difference of two log-probabilities is a
// difference of two logits, so it gets twice that.
const goldenTol = 1e-4

// decoderFixtures are the tiny Llama-family checkpoints and the tokenizer
// each is served with: none has its own, the tiny Qwens take the built-in
// Qwen tokenizer (Qwen3's tokenizer.json), the tiny Llama a temporary copy
// of testdata/tokenizers/llama3_1's compressed tokenizer.json.
var decoderFixtures = []struct {
	dir       string
	tokenizer func(testing.TB) string
}{
	{"testdata/qwen2-tiny", builtinQwen},
	{"testdata/llama-tiny", func(t testing.TB) string { return testfiles.LlamaTokenizer(t, ".") }},
	{"testdata/qwen3-tiny", builtinQwen},
}

func builtinQwen(testing.TB) string { return tokenizer.BuiltinQwen }

// TestDecoderGoldensThroughOpen serves each tiny checkpoint the way a user
// does (tinyserve.Open with the folder, dtype auto, which for these
// bfloat16 checkpoints is bfloat16) and runs every golden prompt, given as
// token ids, through the engine's public API: 16 greedy tokens with the
// top 10 log-probabilities. The tokens must be the golden's, the first
// step's top 10 the golden's top 10 (near-ties may swap), and the
// differences of log-probabilities the differences of the golden's logits.
// The engine chunks the 2,100-token prompt (step budget 2,048) and keeps
// all seven prompts in flight at once.
func TestDecoderGoldensThroughOpen(t *testing.T) {
	for _, fx := range decoderFixtures {
		t.Run(filepath.Base(fx.dir), func(t *testing.T) {
			g := readDecoderGolden(t, fx.dir)
			e, err := Open(context.Background(), Config{Model: fx.dir, Tokenizer: fx.tokenizer(t), Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			k := 10
			type result struct {
				tokens []int
				lps    []llm.TokenLogprob
				finish llm.FinishReason
			}
			results := make([]chan result, len(g.Cases))
			for i, c := range g.Cases {
				events, err := e.Generate(context.Background(), llm.Request{
					PromptTokens: c.InputIDs,
					Params:       llm.SamplingParams{MaxTokens: len(c.Greedy.Tokens), IgnoreEOS: true, Logprobs: &k},
				})
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				results[i] = make(chan result, 1)
				go func(ch chan<- result) {
					var r result
					for ev := range events {
						r.tokens = append(r.tokens, ev.TokenIDs...)
						r.lps = append(r.lps, ev.Logprobs...)
						r.finish = ev.Finish
					}
					ch <- r
				}(results[i])
			}
			worst := 0.0
			for i, c := range g.Cases {
				if results[i] == nil {
					continue
				}
				r := <-results[i]
				if r.finish != llm.FinishLength || len(r.lps) != len(r.tokens) {
					t.Fatalf("%s: finish %q, %d logprobs for %d tokens", c.Name, r.finish, len(r.lps), len(r.tokens))
				}
				n := len(c.Greedy.Tokens)
				for s, m := range c.Greedy.Margins {
					if m < goldenTol {
						n = s + 1
						break
					}
				}
				if !slices.Equal(r.tokens[:n-1], c.Greedy.Tokens[:n-1]) {
					t.Errorf("%s: greedy tokens %v, want %v", c.Name, r.tokens, c.Greedy.Tokens)
					continue
				}
				// The first step's alternatives are the last prompt
				// position's top 10.
				top := r.lps[0].Top
				if len(top) != k {
					t.Fatalf("%s: %d top logprobs, want %d", c.Name, len(top), k)
				}
				for j := range k {
					want := c.Top10.IDs[j]
					if top[j].ID != want {
						near := j > 0 && c.Top10.IDs[j-1] == top[j].ID || j+1 < k && c.Top10.IDs[j+1] == top[j].ID
						if !near || math.Abs(c.Top10.Values[j]-c.Top10.Values[j^1]) > goldenTol && math.Abs(c.Top10.Values[j]-c.Top10.Values[max(j-1, 0)]) > goldenTol {
							t.Errorf("%s: top-10 ids %v, want %v", c.Name, ids(top), c.Top10.IDs)
							break
						}
						continue
					}
					d := math.Abs(float64(top[0].Logprob-top[j].Logprob) - (c.Top10.Values[0] - c.Top10.Values[j]))
					worst = max(worst, d)
					if d > 2*goldenTol {
						t.Errorf("%s: logprob of top %d is %.6f below the first, golden logits %.6f", c.Name, j, top[0].Logprob-top[j].Logprob, c.Top10.Values[0]-c.Top10.Values[j])
					}
				}
				// Every step's top-1/top-2 margin is the golden's.
				for s := 0; s < n; s++ {
					tp := r.lps[s].Top
					d := math.Abs(float64(tp[0].Logprob-tp[1].Logprob) - c.Greedy.Margins[s])
					worst = max(worst, d)
					if d > 2*goldenTol {
						t.Errorf("%s step %d: margin %.6f, golden %.6f", c.Name, s, tp[0].Logprob-tp[1].Logprob, c.Greedy.Margins[s])
					}
				}
			}
			t.Logf("largest log-probability difference error: %.3g", worst)
		})
	}
}

func ids(top []llm.TopLogprob) []int {
	out := make([]int, len(top))
	for i, t := range top {
		out[i] = t.ID
	}
	return out
}

func readDecoderGolden(t *testing.T, dir string) *decoderGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g decoderGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// TestDecoderGoldenOverHTTP sends one golden prompt as token ids to
// /v1/completions, the server's public API, and checks the greedy text's
// token ids and the first token's top log-probabilities.
func TestDecoderGoldenOverHTTP(t *testing.T) {
	g := readDecoderGolden(t, "testdata/qwen3-tiny")
	c := g.Cases[6] // qwen_chatml: 110 real ChatML tokens
	e, err := Open(context.Background(), Config{Model: "testdata/qwen3-tiny", Tokenizer: tokenizer.BuiltinQwen})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt, _ := json.Marshal(c.InputIDs)
	body := fmt.Sprintf(`{"model":"qwen3-tiny","prompt":%s,"max_tokens":16,"temperature":0,"ignore_eos":true,"logprobs":5,"return_token_ids":true}`, prompt)
	rec := httptest.NewRecorder()
	openai.NewHandler(e).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp struct {
		Choices []struct {
			TokenIDs []int `json:"token_ids"`
			Logprobs struct {
				TopLogprobs []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].TokenIDs; !slices.Equal(got, c.Greedy.Tokens) {
		t.Errorf("token_ids %v, want %v", got, c.Greedy.Tokens)
	}
	if n := len(resp.Choices[0].Logprobs.TopLogprobs); n != 16 || len(resp.Choices[0].Logprobs.TopLogprobs[0]) != 5 {
		t.Fatalf("top_logprobs: %d steps, first with %d", n, len(resp.Choices[0].Logprobs.TopLogprobs[0]))
	}
}
