package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// gatedBackend holds the first Forward until every request of a trial is
// submitted, so that they all contend for the pool and the budget from the
// first step, whatever the goroutines' timing.
type gatedBackend struct {
	*Backend
	gate chan struct{}
	once sync.Once
}

func (g *gatedBackend) Forward(b *engine.Batch) ([]engine.SampleRow, error) {
	g.once.Do(func() { <-g.gate })
	return g.Backend.Forward(b)
}

// outcome is everything a request produced that batching must not change.
type outcome struct {
	Tokens   []int
	Logprobs []llm.TokenLogprob
	Prompt   []llm.TokenLogprob
	Finish   llm.FinishReason
	Err      string
}

// TestEngineBatchingIsBitIdentical runs random workloads through the engine
// on the CPU backend under random block sizes, token budgets (chunked
// prefill, down to one token a step), pools small enough to preempt,
// max_num_seqs, thread counts and prefix caching, and requires of every
// request exactly what it gets alone on a default engine: the same tokens
// (greedy and seeded sampling), and the same log-probabilities and prompt
// log-probabilities to the bit. The CPU forward computes each value in a
// fixed order whatever the batch, so chunking, recompute after preemption,
// shared cached blocks and neighbours in the batch can change nothing.
//
// It runs on a float32 GPT-2, and on Q8_0 weights (whose integer products
// round each activation block to 16 bits, so that a last-bit difference
// anywhere upstream would show): a GPT-2 wide enough for several blocks a
// row and, with a 2,048-wide MLP, more than one of the products' 32-block
// slices, and the tiny Llama's shape (rotary positions, grouped-query
// attention, gated MLP, RMSNorm).
func TestEngineBatchingIsBitIdentical(t *testing.T) {
	quantized := func(m *model.Model) *model.Model {
		if err := m.Quantize(model.QuantQ8_0); err != nil {
			t.Fatal(err)
		}
		return m
	}
	wide := gpt2Config(300, 64, 96, 2, 4)
	wide.Intermediate = 2048
	// The tiny Llama's shape with GPT-2's small vocabulary (its own 128K
	// would make the race detector's run take minutes).
	llama, err := model.LoadConfig(filepath.Join(fixtures, "llama-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	llama.VocabSize, llama.MaxPositions = 300, 64
	llama.BOSTokenID, llama.EOSTokenIDs = -1, nil
	models := []struct {
		name   string
		m      func() *model.Model
		trials int
	}{
		{"gpt2-float32", func() *model.Model { return randomModel(t, "t", gpt2Config(300, 64, 32, 2, 4), 11, 0.5) }, 12},
		{"gpt2-wide-float32", func() *model.Model { return randomModel(t, "t", wide, 11, 0.5) }, 6},
		{"gpt2-q8_0", func() *model.Model { return quantized(randomModel(t, "t", wide, 11, 0.5)) }, 6},
		{"llama-q8_0", func() *model.Model { return quantized(randomModel(t, "l", llama, 11, 0.5)) }, 4},
	}
	preemptions := uint64(0)
	for _, mc := range models {
		t.Run(mc.name, func(t *testing.T) {
			trials := mc.trials
			if raceEnabled {
				trials = (trials + 1) / 2
			}
			preemptions += checkBatchingBitIdentical(t, mc.m(), trials)
		})
	}
	if preemptions == 0 {
		t.Error("no trial preempted: the pools are too large to test recompute")
	}
}

// checkBatchingBitIdentical is TestEngineBatchingIsBitIdentical on model m
// over trials random workloads; it returns how many preemptions they had.
func checkBatchingBitIdentical(t *testing.T, m *model.Model, trials int) uint64 {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))

	runAll := func(cfg engine.Config, threads int, reqs []llm.Request) ([]outcome, llm.Stats) {
		t.Helper()
		cpu, err := New(m, Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		g := &gatedBackend{Backend: cpu, gate: make(chan struct{})}
		e, err := engine.New(g, idTokenizer{}, cpu.Info(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		outs := make([]outcome, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			ch, err := e.Generate(context.Background(), r)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			wg.Go(func() {
				for ev := range ch {
					o := &outs[i]
					o.Tokens = append(o.Tokens, ev.TokenIDs...)
					o.Logprobs = append(o.Logprobs, ev.Logprobs...)
					o.Prompt = append(o.Prompt, ev.PromptLogprobs...)
					if ev.Finish != "" {
						o.Finish = ev.Finish
					}
					if ev.Err != nil {
						o.Err = ev.Err.Error()
					}
				}
			})
		}
		close(g.gate)
		wg.Wait()
		return outs, e.Stats()
	}

	preemptions, cachedHits := uint64(0), uint64(0)
	for trial := range trials {
		// Requests: prompts from two stems (so prefixes are shared), some
		// cut, some extended; greedy with logprobs, seeded sampling, and
		// prompt log-probabilities on a few.
		var reqs []llm.Request
		stems := [2][]int{}
		for s := range stems {
			for range 40 {
				stems[s] = append(stems[s], rng.IntN(300))
			}
		}
		for i := range 3 + rng.IntN(6) {
			p := append([]int(nil), stems[rng.IntN(2)][:1+rng.IntN(40)]...)
			for range rng.IntN(6) {
				p = append(p, rng.IntN(300))
			}
			lp := 1 + rng.IntN(3)
			params := llm.SamplingParams{MaxTokens: 1 + rng.IntN(min(20, 64-len(p))), IgnoreEOS: true, Logprobs: &lp}
			if rng.IntN(3) == 0 {
				s := int64(i)
				params.Temperature, params.Seed = 0.9, &s
			}
			if rng.IntN(4) == 0 {
				plp := rng.IntN(3)
				params.PromptLogprobs = &plp
			}
			reqs = append(reqs, llm.Request{ID: fmt.Sprint(i), PromptTokens: p, Params: params})
		}
		want := make([]outcome, len(reqs))
		for i, r := range reqs {
			o, _ := runAll(engine.Config{Seed: new(uint64(1))}, 1, []llm.Request{r})
			want[i] = o[0]
		}
		blockSize := []int{1, 2, 3, 4, 5, 8, 16}[rng.IntN(7)]
		// The pool holds the largest request and a little more, so that
		// several at once must preempt.
		need := 0
		for _, r := range reqs {
			need = max(need, (len(r.PromptTokens)+r.Params.MaxTokens+blockSize-1)/blockSize)
		}
		cfg := engine.Config{
			BlockSize:           blockSize,
			NumBlocks:           need + rng.IntN(need+1),
			MaxNumBatchedTokens: 1 + rng.IntN(24),
			MaxNumSeqs:          1 + rng.IntN(6),
			PrefixCaching:       rng.IntN(2) == 0,
			Seed:                new(uint64(1)),
		}
		threads := 1 + rng.IntN(3)
		got, st := runAll(cfg, threads, reqs)
		preemptions += st.Preemptions
		cachedHits += st.PrefixCacheHits
		for i := range reqs {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("trial %d (config %+v, %d threads) request %d (%d prompt tokens, %+v):\n got %+v\nwant %+v",
					trial, cfg, threads, i, len(reqs[i].PromptTokens), reqs[i].Params, got[i], want[i])
			}
		}
	}
	t.Logf("%d preemptions, %d prompt tokens from the prefix cache", preemptions, cachedHits)
	return preemptions
}
