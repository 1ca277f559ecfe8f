package tinyserve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/gguf"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/openai"
)

// ggufFixtures are the tiny checkpoints written as GGUF files by
// model.WriteGGUF, each with the vocabulary of the tokenizer it is served
// with (decoderFixtures).
var ggufFixtures = []string{"testdata/gpt2-tiny", "testdata/qwen2-tiny", "testdata/llama-tiny", "testdata/qwen3-tiny"}

// ggufRaceFixtures are those the race detector runs: converting and
// loading the Llama-family tinies' 150k-row embeddings takes 15-30 s each
// under it, and their concurrency is GPT-2's.
var ggufRaceFixtures = ggufFixtures[:1]

// ggufFixturesToRun are the fixtures this build runs.
func ggufFixturesToRun() []string {
	if raceEnabled {
		return ggufRaceFixtures
	}
	return ggufFixtures
}

// writeTinyGGUF converts the checkpoint folder dir into a GGUF file of
// matrix type typ under t.TempDir(), with its tokenizer's vocabulary and
// chat template, and returns its path.
func writeTinyGGUF(t testing.TB, dir string, typ tensor.DType) string {
	t.Helper()
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var (
		v       *tokenizer.GGUFVocab
		cfgJSON []byte
	)
	switch m.Config.Arch {
	case model.ArchGPT2:
		v, err = tokenizer.GPT2GGUFVocab()
	case model.ArchLlama:
		path := testfiles.LlamaTokenizer(t, ".")
		v, err = tokenizer.HFGGUFVocab(path, "llama-bpe", m.Config.VocabSize)
		cfgJSON, _ = os.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	default:
		v, err = tokenizer.QwenGGUFVocab(m.Config.VocabSize)
		cfgJSON = tokenizer.QwenConfigJSON()
	}
	if err != nil {
		t.Fatal(err)
	}
	meta := v.KVs()
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if json.Unmarshal(cfgJSON, &cfg) == nil && cfg.ChatTemplate != "" {
		meta = append(meta, gguf.KV{Key: "tokenizer.chat_template", Value: cfg.ChatTemplate})
	}
	path := filepath.Join(t.TempDir(), filepath.Base(dir)+"-"+strings.ToLower(string(typ))+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteGGUF(m, f, model.GGUFOptions{Type: typ, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// greedyRun generates n[i] greedy tokens after prompt i with e, all
// prompts in flight at once, and returns the tokens and each step's top-2
// log-probability margin.
func greedyRun(t *testing.T, e interface {
	Generate(context.Context, llm.Request) (<-chan llm.Event, error)
}, prompts [][]int, n []int) (tokens [][]int, margins [][]float64) {
	t.Helper()
	k := 2
	chans := make([]<-chan llm.Event, len(prompts))
	for i, p := range prompts {
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: p,
			Params: llm.SamplingParams{MaxTokens: n[i], IgnoreEOS: true, Logprobs: &k}})
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
	}
	tokens, margins = make([][]int, len(prompts)), make([][]float64, len(prompts))
	for i, ch := range chans {
		for ev := range ch {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			tokens[i] = append(tokens[i], ev.TokenIDs...)
			for _, lp := range ev.Logprobs {
				margins[i] = append(margins[i], float64(lp.Top[0].Logprob-lp.Top[1].Logprob))
			}
		}
	}
	return tokens, margins
}

// goldenPrompts are the golden's prompts (without those too long for a
// race-detector run) and greedy results.
func goldenPrompts(t *testing.T, dir string) (prompts [][]int, want [][]int, wantMargins [][]float64) {
	g := readDecoderGolden(t, dir)
	for _, c := range g.Cases {
		if raceEnabled && len(c.InputIDs) > 300 {
			continue
		}
		prompts = append(prompts, c.InputIDs)
		want = append(want, c.Greedy.Tokens)
		wantMargins = append(wantMargins, c.Greedy.Margins)
	}
	return prompts, want, wantMargins
}

// TestGGUFGoldensThroughOpen serves an F32 GGUF of each tiny checkpoint
// through tinyserve.Open (the model, its tokenizer and chat template all
// from the one file) and runs the golden prompts: the greedy tokens are the
// golden's up to its first near-tie, and every token and margin is exactly
// what the same checkpoint's folder gives at float32 (margins within 1e-5).
func TestGGUFGoldensThroughOpen(t *testing.T) {
	for _, dir := range ggufFixturesToRun() {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			path := writeTinyGGUF(t, dir, tensor.F32)
			prompts, want, wantMargins := goldenPrompts(t, dir)
			cfg, err := model.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			n := make([]int, len(want))
			for i := range want {
				// GPT-2's longest golden reaches position 1024, one past
				// what the server lets a request fill.
				n[i] = min(len(want[i]), cfg.MaxPositions-len(prompts[i]))
			}
			e, err := Open(context.Background(), Config{Model: path, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			got, gotMargins := greedyRun(t, e, prompts, n)
			ref, err := Open(context.Background(), Config{Model: dir, DType: "float32", Tokenizer: tokenizerFor(t, dir), Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			refTokens, refMargins := greedyRun(t, ref, prompts, n)
			for i := range prompts {
				// Margins agree to float32 rounding: how the engine
				// batches prompts in flight moves the last bits.
				same := slices.EqualFunc(gotMargins[i], refMargins[i], func(a, b float64) bool { return math.Abs(a-b) < 1e-5 })
				if !slices.Equal(got[i], refTokens[i]) || !same {
					t.Errorf("prompt %d: GGUF gives %v (margins %v), the folder at float32 %v (%v)", i, got[i], gotMargins[i], refTokens[i], refMargins[i])
				}
				k := n[i]
				for s, m := range wantMargins[i][:k] {
					if m < goldenTol {
						k = s // the near-tie step may differ
						break
					}
				}
				if !slices.Equal(got[i][:k], want[i][:k]) {
					t.Errorf("prompt %d: greedy %v, golden %v", i, got[i], want[i])
				}
			}
		})
	}
}

// tokenizerFor is the tokenizer decoderFixtures serve dir with.
func tokenizerFor(t testing.TB, dir string) string {
	for _, fx := range decoderFixtures {
		if fx.dir == dir {
			return fx.tokenizer(t)
		}
	}
	return "" // gpt2-tiny: the built-in GPT-2 BPE
}

// TestGGUFOverHTTP serves a qwen3-tiny GGUF through the OpenAI server:
// /v1/completions on text gives the tokens the checkpoint folder gives
// with its tokenizer, and /v1/chat/completions renders the GGUF's chat
// template.
func TestGGUFOverHTTP(t *testing.T) {
	if raceEnabled {
		t.Skip("loads two 150k-vocabulary models: 18 s under the race detector; the server's concurrency is tested on smaller models")
	}
	path := writeTinyGGUF(t, "testdata/qwen3-tiny", tensor.F32)
	e, err := Open(context.Background(), Config{Model: path, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ref, err := Open(context.Background(), Config{Model: "testdata/qwen3-tiny", DType: "float32", Tokenizer: tokenizer.BuiltinQwen, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	post := func(eng *engine.Engine, url, body string) map[string]any {
		t.Helper()
		rec := httptest.NewRecorder()
		openai.NewHandler(eng).ServeHTTP(rec, httptest.NewRequest("POST", url, strings.NewReader(body)))
		if rec.Code != 200 {
			t.Fatalf("%s: status %d: %s", url, rec.Code, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	const completion = `{"model":"%s","prompt":"Héllo wörld, 你好! <|im_start|>user","max_tokens":12,"temperature":0,"ignore_eos":true,"return_token_ids":true}`
	a := post(e, "/v1/completions", fmt.Sprintf(completion, "qwen3-tiny-f32"))
	b := post(ref, "/v1/completions", fmt.Sprintf(completion, "qwen3-tiny"))
	ca, cb := a["choices"].([]any)[0].(map[string]any), b["choices"].([]any)[0].(map[string]any)
	if fmt.Sprint(ca["token_ids"], ca["prompt_token_ids"]) != fmt.Sprint(cb["token_ids"], cb["prompt_token_ids"]) || ca["text"] != cb["text"] {
		t.Errorf("GGUF: %v %v %q; folder: %v %v %q", ca["prompt_token_ids"], ca["token_ids"], ca["text"], cb["prompt_token_ids"], cb["token_ids"], cb["text"])
	}
	const chatReq = `{"model":"%s","messages":[{"role":"user","content":"Hi there"}],"max_tokens":8,"temperature":0,"ignore_eos":true}`
	ga := post(e, "/v1/chat/completions", fmt.Sprintf(chatReq, "qwen3-tiny-f32"))
	gb := post(ref, "/v1/chat/completions", fmt.Sprintf(chatReq, "qwen3-tiny"))
	if fmt.Sprint(ga["usage"]) != fmt.Sprint(gb["usage"]) || fmt.Sprint(ga["choices"]) != fmt.Sprint(gb["choices"]) {
		t.Errorf("chat: GGUF %v %v; folder %v %v", ga["usage"], ga["choices"], gb["usage"], gb["choices"])
	}
}

// TestGGUFQ8_0 serves a Q8_0 GGUF of each tiny checkpoint (ggml's blocks
// as the writer quantized them, products in tinyserve's 8-bit kernels).
// Its greedy tokens and margins are those of the folder served with
// --quantization q8_0 (the same blocks, quantized at load), to the bit:
// the CPU backend's results do not depend on how the concurrent requests
// happen to share steps (llm/cpu's TestEngineBatchingIsBitIdentical).
// Against the folder's float32 ones they must agree up to the first step
// whose float32 margin is under q8Tie (Q8_0 weights move these
// random-weight tinies' logits by up to a few tenths), and the counts of
// agreeing steps are logged.
func TestGGUFQ8_0(t *testing.T) {
	const q8Tie = 0.5
	for _, dir := range ggufFixturesToRun() {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			path := writeTinyGGUF(t, dir, tensor.Q8_0)
			prompts, want, _ := goldenPrompts(t, dir)
			cfg, err := model.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			n := make([]int, len(want))
			for i := range want {
				n[i] = min(len(want[i]), cfg.MaxPositions-len(prompts[i]))
			}
			e, err := Open(context.Background(), Config{Model: path, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			got, gotMargins := greedyRun(t, e, prompts, n)
			ref, err := Open(context.Background(), Config{Model: dir, DType: "float32", Tokenizer: tokenizerFor(t, dir), Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			refTokens, refMargins := greedyRun(t, ref, prompts, n)
			q8, err := Open(context.Background(), Config{Model: dir, Quantization: "q8_0", Tokenizer: tokenizerFor(t, dir), Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer q8.Close()
			q8Tokens, q8Margins := greedyRun(t, q8, prompts, n)
			steps, same, prefix, beforeTie := 0, 0, 0, 0
			for i := range prompts {
				tie := len(refTokens[i])
				for s, m := range refMargins[i] {
					if m < q8Tie {
						tie = s
						break
					}
				}
				beforeTie += tie
				if !slices.Equal(got[i], q8Tokens[i]) || !slices.Equal(gotMargins[i], q8Margins[i]) {
					t.Errorf("prompt %d: the Q8_0 GGUF gives %v (margins %.6f), the folder with --quantization q8_0 %v (%.6f)", i, got[i], gotMargins[i], q8Tokens[i], q8Margins[i])
				}
				if !slices.Equal(got[i][:tie], refTokens[i][:tie]) {
					t.Errorf("prompt %d: Q8_0 gives %v, float32 %v (margins %.3f), differing before the first margin under %v", i, got[i], refTokens[i], refMargins[i], q8Tie)
				}
				k := 0
				for k < len(got[i]) && got[i][k] == refTokens[i][k] {
					k++
				}
				prefix += k
				for s := range got[i] {
					steps++
					if got[i][s] == refTokens[i][s] {
						same++
					}
				}
			}
			t.Logf("Q8_0 vs float32 greedy: %d of %d steps the same token, %d in the common prefixes; %d steps before a float32 margin under %v", same, steps, prefix, beforeTie, q8Tie)
		})
	}
}

// TestGGUFOllamaThroughOpen serves an ollama model (a synthesized store:
// a manifest naming the GGUF as a sha256-<hex> blob, without the .gguf
// extension) through tinyserve.Open: the model and its tokenizer come
// from the blob, and it answers as the same file named by its path.
func TestGGUFOllamaThroughOpen(t *testing.T) {
	path := writeTinyGGUF(t, "testdata/gpt2-tiny", tensor.F32)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	blob := filepath.Join(root, "blobs", "sha256-"+digest)
	manifest := filepath.Join(root, "manifests", "registry.ollama.ai", "library", "tiny-gpt2-gguf", "f32")
	for p, b := range map[string][]byte{blob: data, manifest: []byte(`{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + digest + `"}]}`)} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(k string) string { return map[string]string{"OLLAMA_MODELS": root, "HF_HUB_CACHE": t.TempDir()}[k] }
	run := func(model string) (string, llm.ModelInfo) {
		e, err := Open(context.Background(), Config{Model: model, Getenv: getenv, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: e.Tokenizer().Encode("Héllo wörld, 你好", false), Params: llm.SamplingParams{MaxTokens: 8, IgnoreEOS: true}})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for ev := range ch {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			text.WriteString(ev.Text)
		}
		return text.String(), e.Info()
	}
	got, info := run("tiny-gpt2-gguf:f32")
	want, _ := run(path)
	if got != want || info.ID != "tiny-gpt2-gguf:f32" || info.Source == nil || !slices.Equal(info.Source.TokenizerFiles, []string{blob}) {
		t.Errorf("ollama model: %q (id %q, source %+v); the file by its path: %q", got, info.ID, info.Source, want)
	}
}
