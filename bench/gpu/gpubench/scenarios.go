package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/llm"
)

// Scenario is one of tiny-vLLM's benchmark shapes: prompts of ISL tokens
// (or, for mixed_prefill, alternately ISL and ISL2), OSL generated tokens
// each (greedy, ignore_eos), Concurrency requests in flight.
type Scenario struct {
	Name        string `json:"name"`
	ISL         int    `json:"isl"`
	ISL2        int    `json:"isl2,omitempty"`
	OSL         int    `json:"osl"`
	Concurrency int    `json:"concurrency"`
}

// scenarios are tiny-vLLM's seven (the workload issue's GPT-2 versions).
var scenarios = []Scenario{
	{Name: "latency_c1", ISL: 128, OSL: 32, Concurrency: 1},
	{Name: "batch_c2", ISL: 128, OSL: 32, Concurrency: 2},
	{Name: "batch_c4", ISL: 128, OSL: 32, Concurrency: 4},
	{Name: "queue_c8", ISL: 128, OSL: 32, Concurrency: 8},
	{Name: "prefill_512_16", ISL: 512, OSL: 16, Concurrency: 4},
	{Name: "decode_32_128", ISL: 32, OSL: 128, Concurrency: 4},
	{Name: "mixed_prefill", ISL: 32, ISL2: 256, OSL: 32, Concurrency: 4},
}

// prompts returns n prompts of random token ids below vocab, from a fixed
// seed, so every run and the PyTorch peer (which draws its own with the
// same lengths) measure the same shapes.
func (s Scenario) prompts(n, vocab int, seed uint64) [][]int {
	r := rand.New(rand.NewPCG(seed, uint64(len(s.Name))))
	out := make([][]int, n)
	for i := range out {
		l := s.ISL
		if s.ISL2 > 0 && i%2 == 1 {
			l = s.ISL2
		}
		p := make([]int, l)
		for j := range p {
			p[j] = r.IntN(vocab)
		}
		out[i] = p
	}
	return out
}

// Result is one scenario's measurement; hf_peer.py writes the same fields.
type Result struct {
	Scenario
	Requests     int     `json:"requests"`
	WallS        float64 `json:"wall_s"`
	OutputTokens int     `json:"output_tokens"`
	OutputTokS   float64 `json:"output_tok_s"`
	LatencyP50S  float64 `json:"latency_p50_s"`
	LatencyP95S  float64 `json:"latency_p95_s"`
	TTFTP50S     float64 `json:"ttft_p50_s"`
	// StepMSP50 is the median over batches of a batch's time over its
	// output length: the peer's time per generate step (its prefill
	// included), which moves with its host, so the table shows it beside
	// the ratio. hf_peer.py writes it; tinyserve's runs leave it 0.
	StepMSP50 float64 `json:"step_ms_p50,omitempty"`
}

// Report is a whole run: what ran and every scenario's result.
type Report struct {
	Engine  string   `json:"engine"`
	Device  string   `json:"device"`
	DType   string   `json:"dtype"`
	Model   string   `json:"model"`
	Results []Result `json:"results"`
}

// runScenario sends n requests with s.Concurrency closed-loop clients
// (each sends its next request when the previous one finishes) and
// measures end-to-end latency per request and output tokens per second
// over the whole run.
func runScenario(ctx context.Context, eng llm.Engine, s Scenario, n, vocab int) (Result, error) {
	prompts := s.prompts(n, vocab, 20240601)
	lat := make([]float64, n)
	ttft := make([]float64, n)
	toks := make([]int, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	errs := make(chan error, s.Concurrency)
	start := time.Now()
	for range s.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				ch, err := eng.Generate(ctx, llm.Request{
					ID: fmt.Sprintf("%s-%d", s.Name, i), PromptTokens: prompts[i],
					Params: llm.SamplingParams{MaxTokens: s.OSL, IgnoreEOS: true},
				})
				if err != nil {
					errs <- err
					return
				}
				first := true
				for ev := range ch {
					if first && len(ev.TokenIDs) > 0 {
						ttft[i] = time.Since(t0).Seconds()
						first = false
					}
					if ev.Finish != "" {
						if ev.Err != nil {
							errs <- fmt.Errorf("request %d: %w", i, ev.Err)
							return
						}
						toks[i] = ev.CompletionTokens
					}
				}
				lat[i] = time.Since(t0).Seconds()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return Result{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	r := Result{Scenario: s, Requests: n, WallS: wall}
	for i := range n {
		r.OutputTokens += toks[i]
		if toks[i] != s.OSL {
			return r, fmt.Errorf("%s: request %d generated %d tokens, want %d (ignore_eos)", s.Name, i, toks[i], s.OSL)
		}
	}
	r.OutputTokS = float64(r.OutputTokens) / wall
	r.LatencyP50S = percentile(lat, 50)
	r.LatencyP95S = percentile(lat, 95)
	r.TTFTP50S = percentile(ttft, 50)
	return r, nil
}

func collect(ch <-chan error) []error {
	var out []error
	for e := range ch {
		out = append(out, e)
	}
	return out
}

// percentile is the linearly interpolated p-th percentile (numpy's
// default), the definition hf_peer.py uses too.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(pos)
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	f := pos - float64(lo)
	return s[lo]*(1-f) + s[lo+1]*f
}
