package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/openai"
)

// nextByte is a trivial model over the byte vocabulary of llm/mock: the
// token after byte b is b+1, so "a" continues "bcdef...". It keeps no state
// per sequence, so it needs no KV storage and ignores block tables and
// Batch.Dropped; a real model writes each token's keys and values into
// the blocks of SeqBatch.BlockTable and reads them back from there.
type nextByte struct {
	vocab  int
	rows   []engine.SampleRow
	logits [][]float32 // one reusable row per sampled sequence
}

// MaxKVBlocks implements engine.Backend: the model keeps nothing per
// block, so any pool fits; the engine caps it at what can be used.
func (m *nextByte) MaxKVBlocks(blockSize int) (int, error) { return 1 << 20, nil }

// AllocateKV implements engine.Backend: there is no KV to allocate.
func (m *nextByte) AllocateKV(numBlocks, blockSize int) error { return nil }

// Forward implements engine.Backend: one row per sequence with Sample set,
// in batch order, with the argmax always and the logits when asked.
func (m *nextByte) Forward(b *engine.Batch) ([]engine.SampleRow, error) {
	m.rows = m.rows[:0]
	for _, s := range b.Seqs {
		if !s.Sample {
			continue // a prefill chunk that does not reach the prompt's end
		}
		next := (s.Tokens[len(s.Tokens)-1] + 1) % 256
		row := engine.SampleRow{Argmax: next}
		if s.NeedLogits { // sampling with temperature, logprobs, min_tokens
			i := len(m.rows)
			if i == len(m.logits) {
				m.logits = append(m.logits, make([]float32, m.vocab))
			}
			l := m.logits[i]
			clear(l)
			l[next] = 10
			row.Logits = l
		}
		m.rows = append(m.rows, row)
	}
	return m.rows, nil
}

// Example_customBackend runs a hand-written Backend in the engine, offline
// and behind the OpenAI handler.
func Example_customBackend() {
	tok := mock.NewTokenizer()
	info := llm.ModelInfo{
		ID:          "next-byte",
		MaxModelLen: 128,
		VocabSize:   tok.VocabSize(),
		// The engine stops at info's EOS, not the tokenizer's: always set
		// it (-1 for none); New refuses a zero the tokenizer doesn't share.
		EOSTokenID: tok.EOSTokenID(),
		Backend:    "next-byte",
	}
	eng, err := engine.New(&nextByte{vocab: tok.VocabSize()}, tok, info, engine.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()

	events, err := eng.Generate(context.Background(), llm.Request{
		PromptTokens: tok.Encode("a", false),
		Params:       llm.SamplingParams{MaxTokens: 8},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var text strings.Builder
	for ev := range events { // read until the channel closes
		text.WriteString(ev.Text)
		if ev.Finish != "" {
			fmt.Printf("offline: %q (%s, %d tokens)\n", text.String(), ev.Finish, ev.CompletionTokens)
		}
	}

	h := openai.NewHandler(eng)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions",
		strings.NewReader(`{"prompt": "k", "max_tokens": 5, "temperature": 0.5, "seed": 1}`)))
	var resp struct {
		Model   string `json:"model"`
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		fmt.Println(rec.Code, err)
		return
	}
	fmt.Printf("HTTP %d: %s %q\n", rec.Code, resp.Model, resp.Choices[0].Text)
	// Output:
	// offline: "bcdefghi" (length, 8 tokens)
	// HTTP 200: next-byte "lmnop"
}
