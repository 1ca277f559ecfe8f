package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// shadowBackend wraps the mock and keeps its own model of the paged cache:
// what every slot was computed from. Before each sequence of a batch runs
// (in batch order, as the mock runs them), every position it skips must
// hold KV computed from exactly its tokens, not only the last one the mock
// reads.
type shadowBackend struct {
	*mock.Backend
	mu        sync.Mutex
	blockSize int
	slots     []uint64
	known     map[uint64][]int // per sequence id: its tokens as far as seen
	prompts   func(id uint64) []int
	err       error
}

func (b *shadowBackend) AllocateKV(numBlocks, blockSize int) error {
	b.blockSize = blockSize
	b.slots = make([]uint64, numBlocks*blockSize)
	return b.Backend.AllocateKV(numBlocks, blockSize)
}

func (b *shadowBackend) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
}

func (b *shadowBackend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	b.mu.Lock()
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		id := uint64(s.ID)
		known := b.known[id]
		if known == nil {
			known = slices.Clone(b.prompts(id))
		}
		for k, tok := range s.Tokens {
			p := s.StartPos + k
			switch {
			case p < len(known):
				if known[p] != tok {
					b.fail("seq %d position %d runs token %d, was %d", id, p, tok, known[p])
				}
			case p == len(known):
				known = append(known, tok)
			default:
				b.fail("seq %d position %d past its %d known tokens", id, p, len(known))
			}
		}
		b.known[id] = known
		h := uint64(0xcbf29ce484222325)
		for p := range s.StartPos + len(s.Tokens) {
			h = (h ^ uint64(known[p])) * 0x100000001b3
			slot := int(s.BlockTable[p/b.blockSize])*b.blockSize + p%b.blockSize
			if p < s.StartPos {
				if b.slots[slot] != h {
					b.fail("seq %d (batch row %d, start %d) position %d: the KV there was computed from other tokens", id, i, s.StartPos, p)
				}
				continue
			}
			b.slots[slot] = h
		}
	}
	b.mu.Unlock()
	return b.Backend.Forward(batch)
}

// TestPrefixCachingRandomWorkloads submits bursts of requests whose prompts
// copy, cut or extend earlier ones (their generated tokens included), some
// cancelled, some prompt-only or scoring their prompt, to engines with tiny
// pools, small blocks and small budgets. Every finished request must match
// the mock's cache-free reference, a cancelled one a prefix of it, and the
// shadow model must never see a skipped position whose KV came from other
// tokens.
func TestPrefixCachingRandomWorkloads(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	trials := 12
	if testing.Short() {
		trials = 4
	}
	for trial := range trials {
		if err := prefixTrial(t, rng); err != nil {
			t.Fatalf("seed %d trial %d: %v", seed, trial, err)
		}
	}
}

type randReq struct {
	prompt    []int
	params    llm.SamplingParams
	cancel    context.CancelFunc
	cancelled bool
	ch        <-chan llm.Event
}

func prefixTrial(t *testing.T, rng *rand.Rand) error {
	bs := 1 + rng.IntN(8)
	maxPrompt, maxOut := 4*bs+12, 8
	// Room for the longest request, and a few blocks more.
	numBlocks := (maxPrompt+maxOut+bs-1)/bs + rng.IntN(8)
	cfg := engine.Config{
		PrefixCaching:       true,
		BlockSize:           bs,
		NumBlocks:           numBlocks,
		MaxNumSeqs:          1 + rng.IntN(8),
		MaxNumBatchedTokens: []int{1 + rng.IntN(24), 7, 64}[rng.IntN(3)],
	}
	var mu sync.Mutex
	var reqs []*randReq
	sb := &shadowBackend{
		Backend: mock.NewBackend(mock.Config{Latency: mock.Latency{PerStep: 100 * time.Microsecond}}),
		known:   map[uint64][]int{},
		prompts: func(id uint64) []int {
			mu.Lock()
			defer mu.Unlock()
			return reqs[id-1].prompt
		},
	}
	e, err := engine.New(sb, mock.NewTokenizer(), mock.Info(), cfg)
	if err != nil {
		return err
	}
	defer e.Close()

	stems := [][]int{prompt(1, maxPrompt), prompt(2, maxPrompt)}
	n := 10 + rng.IntN(30)
	for i := range n {
		var pr []int
		if i > 0 && rng.IntN(2) == 0 {
			// A copy of an earlier request's prompt and what it generates.
			// Often the previous request's, which is likely to be admitted
			// in the same step.
			mu.Lock()
			o := reqs[len(reqs)-1]
			if rng.IntN(2) == 0 {
				o = reqs[rng.IntN(len(reqs))]
			}
			mu.Unlock()
			all := append(slices.Clone(o.prompt), mock.Expected(mock.Config{}, o.prompt, o.params.MaxTokens)...)
			pr = all[:1+rng.IntN(len(all))]
			if rng.IntN(3) == 0 {
				pr = append(pr, prompt(100+i, 1+rng.IntN(2*bs))...)
			}
		} else {
			pr = slices.Clone(stems[rng.IntN(2)][:1+rng.IntN(maxPrompt)])
			if d := rng.IntN(len(pr) + 1); d < len(pr) {
				copy(pr[d:], prompt(200+i, len(pr)-d))
			}
		}
		pr = pr[:min(len(pr), maxPrompt)]
		p := greedy(rng.IntN(maxOut + 1))
		if rng.IntN(5) == 0 {
			zero := 0
			p.PromptLogprobs = &zero
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &randReq{prompt: pr, params: p, cancel: cancel}
		mu.Lock()
		reqs = append(reqs, r)
		mu.Unlock()
		// Submitted one at a time, so that request i is sequence i+1.
		if r.ch, err = e.Generate(ctx, llm.Request{ID: fmt.Sprint(i), PromptTokens: pr, Params: p}); err != nil {
			return fmt.Errorf("Generate %d: %v", i, err)
		}
		if rng.IntN(6) == 0 {
			r.cancelled = true
			d := time.Duration(rng.IntN(1000)) * time.Microsecond
			time.AfterFunc(d, cancel)
		}
		if rng.IntN(4) == 0 { // bursts of about four arrive together
			time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
		}
	}
	results := make([]result, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			for ev := range r.ch {
				results[i].tokens = append(results[i].tokens, ev.TokenIDs...)
				if ev.Finish != "" {
					results[i].last = ev
				}
			}
		})
	}
	wg.Wait()
	for _, r := range reqs {
		r.cancel()
	}
	for i, r := range reqs {
		res := results[i]
		want := mock.Expected(mock.Config{}, r.prompt, r.params.MaxTokens)
		if r.cancelled && res.last.Finish != llm.FinishLength {
			// Cancelled first: whatever came through is a prefix.
			want = want[:min(len(res.tokens), len(want))]
		} else if res.last.Finish != llm.FinishLength {
			return fmt.Errorf("request %d (%d prompt tokens, max %d): finished %q (%v)", i, len(r.prompt), r.params.MaxTokens, res.last.Finish, res.last.Err)
		}
		if !slices.Equal(res.tokens, want) {
			return fmt.Errorf("request %d (%d prompt tokens, max %d, cfg %+v): tokens %v, want %v", i, len(r.prompt), r.params.MaxTokens, cfg, res.tokens, want)
		}
		if c := res.last.CachedPromptTokens; c < 0 || c%bs != 0 || (c > 0 && c >= len(r.prompt)) || (r.params.PromptLogprobs != nil && c != 0) {
			return fmt.Errorf("request %d: %d cached of %d prompt tokens (blocks of %d)", i, c, len(r.prompt), bs)
		}
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.err != nil {
		return fmt.Errorf("cfg %+v: %v", cfg, sb.err)
	}
	return nil
}
