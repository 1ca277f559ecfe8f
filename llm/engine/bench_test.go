package engine

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// nullTokenizer decodes every token to one byte; enough for bookkeeping.
type nullTokenizer struct{}

func (nullTokenizer) Encode(string, bool) []int { return nil }
func (nullTokenizer) Decode([]int, bool) string { return "" }
func (nullTokenizer) VocabSize() int            { return 257 }
func (nullTokenizer) EOSTokenID() int           { return 256 }
func (nullTokenizer) IsSpecial(id int) bool     { return id == 256 }
func (nullTokenizer) NewDecoder(bool) llm.Decoder {
	return tokenizer.NewByteDecoder(func(int) []byte { return []byte{'x'} })
}

// timedBackend answers every sampled row with a fixed argmax and measures
// its own time, so the benchmark can split engine from backend cost.
type timedBackend struct {
	rows    []SampleRow
	elapsed time.Duration
}

func (b *timedBackend) MaxKVBlocks(int) (int, error) { return 1 << 16, nil }
func (b *timedBackend) AllocateKV(int, int) error    { return nil }
func (b *timedBackend) Forward(batch *Batch) ([]SampleRow, error) {
	start := time.Now()
	b.rows = b.rows[:0]
	for i := range batch.Seqs {
		if batch.Seqs[i].Sample {
			b.rows = append(b.rows, SampleRow{Argmax: 'a'})
		}
	}
	b.elapsed += time.Since(start)
	return b.rows, nil
}

// BenchmarkStep reports the engine's own cost per step (scheduler, KV,
// sampling bookkeeping, stop checks, events) with a backend that does no
// work, at 1, 16 and 256 running sequences, and its ratio to the backend's
// time. Finished sequences are replaced at once, so every step also admits
// and prefills some.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("seqs=%d", n), func(b *testing.B) {
			be := &timedBackend{}
			cfg := Config{MaxNumSeqs: n, MaxNumBatchedTokens: 8192, Now: time.Now}
			st, err := newStepper(be, nullTokenizer{}, llm.ModelInfo{VocabSize: 257, MaxModelLen: 4096}, &cfg)
			if err != nil {
				b.Fatal(err)
			}
			prompt := make([]int, 16)
			next := kv.SeqID(0)
			sink := func(llm.Event) {}
			add := func() {
				next++
				q := newRequest(next, llm.Request{PromptTokens: prompt, Params: llm.SamplingParams{MaxTokens: 64, IgnoreEOS: true}}, nullTokenizer{}, 256, uint64(next), sink, time.Now())
				if err := st.add(q); err != nil {
					b.Fatal(err)
				}
			}
			for range n {
				add()
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			for range b.N {
				before := len(st.reqs)
				if err := st.step(); err != nil {
					b.Fatal(err)
				}
				for range before - len(st.reqs) {
					add()
				}
			}
			total := time.Since(start)
			// Process CPU time (all threads, GC included) is less disturbed
			// than wall time when other work shares the cores.
			b.ReportMetric(float64(cpuTime()-cpu0-be.elapsed)/float64(b.N), "engine-cpu-ns/step")
			engineNs := float64(total-be.elapsed) / float64(b.N)
			b.ReportMetric(engineNs, "engine-ns/step")
			b.ReportMetric(float64(be.elapsed)/float64(b.N), "backend-ns/step")
			b.ReportMetric(engineNs/max(1, float64(be.elapsed)/float64(b.N)), "engine/backend")
		})
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
