package cpu

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// idTokenizer is a stand-in llm.Tokenizer with GPT-2's vocabulary size: each
// id decodes to its decimal digits, so engine tests need no BPE tables.
type idTokenizer struct{}

func (idTokenizer) Encode(string, bool) []int { return nil }
func (idTokenizer) Decode(ids []int, _ bool) string {
	return fmt.Sprint(ids)
}
func (idTokenizer) NewDecoder(bool) llm.Decoder {
	return tokenizer.NewByteDecoder(func(id int) []byte { return []byte(strconv.Itoa(id) + " ") })
}
func (idTokenizer) VocabSize() int        { return 50257 }
func (idTokenizer) EOSTokenID() int       { return 50256 }
func (idTokenizer) IsSpecial(id int) bool { return id == 50256 }

// recordingBackend wraps a CPUBackend and keeps a copy of the logits of the
// step that completes each golden prompt's first prefill, so engine runs can
// be checked by last-position logits as well as by tokens.
type recordingBackend struct {
	*Backend
	prompts [][]int
	mu      sync.Mutex
	last    map[int][]float32 // golden case index -> logits
	refills int               // prefills restarting at position 0 for a seq seen before
	seen    map[uint64]bool
}

func (r *recordingBackend) Forward(b *engine.Batch) ([]engine.SampleRow, error) {
	rows, err := r.Backend.Forward(b)
	if err != nil {
		return rows, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	V := r.cfg.VocabSize
	sampled := 0
	for _, s := range b.Seqs {
		if s.StartPos == 0 {
			if r.seen[uint64(s.ID)] {
				r.refills++
			}
			r.seen[uint64(s.ID)] = true
		}
		if !s.Sample {
			continue
		}
		end := s.StartPos + len(s.Tokens)
		for i, p := range r.prompts {
			if _, done := r.last[i]; !done && end == len(p) && slices.Equal(s.Tokens, p[s.StartPos:]) {
				r.last[i] = slices.Clone(r.logits[sampled*V : (sampled+1)*V])
			}
		}
		sampled++
	}
	return rows, nil
}

// TestEngineGolden runs the golden prompts through the engine (greedy,
// ignore_eos) with all prompts submitted together, with a 7-token step budget
// (chunked prefill), and with a block pool too small for all of them
// (preemption by recompute): the tokens must equal the golden greedy ids and
// the prompts' last-position logits must match the golden.
func TestEngineGolden(t *testing.T) {
	variants := []struct {
		name    string
		cfg     engine.Config
		preempt bool
	}{
		{"together", engine.Config{MaxNumBatchedTokens: 2048}, false},
		{"chunked 7", engine.Config{MaxNumBatchedTokens: 7}, false},
		// The 1009-token prompt alone needs 64 blocks of 16; all six need
		// about 100.
		{"preempted", engine.Config{NumBlocks: 66, MaxNumBatchedTokens: 256}, true},
	}
	// GPT-2's checkpoints: the variants' pool sizes are theirs. The Llama
	// family goes through the engine in the root package's
	// TestDecoderGoldensThroughOpen.
	for _, ck := range checkpoints[:2] {
		if raceEnabled && ck.name != "gpt2-tiny-hot" {
			// Under the race detector the engine variants run on the
			// checkpoint that catches more bugs; the backend-level golden
			// tests still cover both.
			continue
		}
		m, g := loadGolden(t, ck.name)
		for _, v := range variants {
			t.Run(ck.name+"/"+v.name, func(t *testing.T) {
				cpu, err := New(m, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer cpu.Close()
				rec := &recordingBackend{Backend: cpu, last: map[int][]float32{}, seen: map[uint64]bool{}}
				for _, c := range g.Cases {
					rec.prompts = append(rec.prompts, c.InputIDs)
				}
				cfg := v.cfg
				cfg.Seed = new(uint64(1))
				e, err := engine.New(rec, idTokenizer{}, cpu.Info(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				got := make([][]int, len(g.Cases))
				var wg sync.WaitGroup
				for i, c := range g.Cases {
					// Prompt plus completion may not pass the context: the
					// 1009-token prompt gets 15 tokens, as its golden feeds
					// back 15.
					maxTokens := min(len(c.Greedy.Tokens), m.Config.MaxPositions-len(c.InputIDs))
					ch, err := e.Generate(context.Background(), llm.Request{
						ID: c.Name, PromptTokens: c.InputIDs,
						Params: llm.SamplingParams{MaxTokens: maxTokens, IgnoreEOS: true},
					})
					if err != nil {
						t.Fatalf("%s: %v", c.Name, err)
					}
					wg.Go(func() {
						for ev := range ch {
							if ev.Err != nil {
								t.Errorf("%s: %v", c.Name, ev.Err)
							}
							got[i] = append(got[i], ev.TokenIDs...)
						}
					})
				}
				wg.Wait()
				d := diffTracker{}
				for i, c := range g.Cases {
					want := c.Greedy.Tokens[:min(len(c.Greedy.Tokens), m.Config.MaxPositions-len(c.InputIDs))]
					if !slices.Equal(got[i], want) {
						t.Errorf("%s: tokens %v, want %v", c.Name, got[i], want)
					}
					if rec.last[i] == nil {
						t.Errorf("%s: no step completed the prompt", c.Name)
						continue
					}
					checkLast(t, d, &g.Cases[i], rec.last[i], ck.tol)
				}
				st := e.Stats()
				if v.preempt && (st.Preemptions == 0 || rec.refills == 0) {
					t.Errorf("no preemption happened (stats %d, re-prefills %d)", st.Preemptions, rec.refills)
				}
				if !v.preempt && st.Preemptions != 0 {
					t.Errorf("%d unexpected preemptions", st.Preemptions)
				}
				t.Logf("steps %d, preemptions %d, re-prefills %d", st.Steps, st.Preemptions, rec.refills)
			})
		}
	}
}

// TestEngineBuiltinTiny serves the default built-in model through the
// engine with seeded temperature sampling and logprobs (the logits path):
// the same seed gives the same tokens from a fresh engine.
func TestEngineBuiltinTiny(t *testing.T) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	run := func() ([]int, string) {
		cpu, err := New(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		e, err := engine.New(cpu, idTokenizer{}, cpu.Info(), engine.Config{Seed: new(uint64(7))})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if info := e.Info(); !info.RandomWeights || info.Backend != "cpu" || info.ID != model.BuiltinTiny {
			t.Errorf("engine info %+v", info)
		}
		seed, lp := int64(42), 2
		ch, err := e.Generate(context.Background(), llm.Request{
			PromptTokens: []int{464, 2068, 7586, 21831},
			Params:       llm.SamplingParams{MaxTokens: 12, Temperature: 0.8, Seed: &seed, Logprobs: &lp, IgnoreEOS: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		var toks []int
		var text string
		for ev := range ch {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			toks = append(toks, ev.TokenIDs...)
			text += ev.Text
			for _, l := range ev.Logprobs {
				if l.Logprob > 0 || len(l.Top) != 2 {
					t.Errorf("logprob %+v", l)
				}
			}
		}
		return toks, text
	}
	a, text := run()
	b, _ := run()
	if len(a) != 12 || !slices.Equal(a, b) {
		t.Errorf("tokens %v and %v, want the same 12", a, b)
	}
	if text == "" {
		t.Error("no text")
	}
}
