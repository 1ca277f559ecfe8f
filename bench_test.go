package tinyserve

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm"
)

// BenchmarkPrefixCaching measures what prefix caching saves on the CPU
// backend with GPT-2 124M's shape: four requests at once, each a 448-token
// prefix shared with earlier requests (a system prompt, few-shot examples)
// plus a 16-token tail of its own, generating 8 tokens ("shared"); four
// such requests whose common prefix no earlier request computed ("cold",
// the first of them computes it for the others); against, in the same
// engine and alternating with them, four requests of the same lengths that
// share nothing. Run with -benchtime=3x; each iteration takes a few seconds
// on two cores.
func BenchmarkPrefixCaching(b *testing.B) {
	e, err := Open(context.Background(), Config{Model: "gpt2-124m-random", EnablePrefixCaching: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	const prefixLen, tailLen, batch, maxTokens = 448, 16, 4, 8
	rng := rand.New(rand.NewPCG(1, 2))
	randomTokens := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = rng.IntN(50000)
		}
		return out
	}
	shared := randomTokens(prefixLen)
	runBatch := func(prompts [][]int) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, p := range prompts {
			ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: p, Params: llm.SamplingParams{MaxTokens: maxTokens, IgnoreEOS: true}})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				for ev := range ch {
					if ev.Err != nil {
						b.Error(ev.Err)
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	withPrefix := func(prefix []int) [][]int {
		ps := make([][]int, batch)
		for i := range ps {
			ps[i] = append(append([]int(nil), prefix...), randomTokens(tailLen)...)
		}
		return ps
	}
	unshared := func() [][]int {
		ps := make([][]int, batch)
		for i := range ps {
			ps[i] = randomTokens(prefixLen + tailLen)
		}
		return ps
	}
	runBatch(withPrefix(shared)[:1]) // computes the shared prefix once, as a first user would
	var tShared, tCold, tUnshared time.Duration
	for b.Loop() {
		tUnshared += runBatch(unshared())
		tShared += runBatch(withPrefix(shared))
		tCold += runBatch(withPrefix(randomTokens(prefixLen)))
	}
	st := e.Stats()
	b.ReportMetric(tUnshared.Seconds()*1000/float64(b.N), "ms/unshared")
	b.ReportMetric(tShared.Seconds()*1000/float64(b.N), "ms/shared")
	b.ReportMetric(tCold.Seconds()*1000/float64(b.N), "ms/cold")
	b.ReportMetric(float64(tUnshared)/float64(tShared), "x-speedup-shared")
	b.ReportMetric(float64(tUnshared)/float64(tCold), "x-speedup-cold")
	b.ReportMetric(float64(st.PrefixCacheHits)/float64(st.PrefixCacheQueries), "hit-rate")
}
