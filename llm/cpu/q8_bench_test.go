package cpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// BenchmarkCPUWeightTypes runs the same step with float32, bfloat16 and
// Q8_0 weights (Model.Quantize) of one model, alternating within each
// iteration so that all three meet the same machine load, and reports the
// milliseconds of each and Q8_0's speed over the others ("x-vs-bf16": 2
// means Q8_0 takes half the time). Models: the GPT-2 124M and the
// Qwen2.5-0.5B shapes (built-in, random weights); steps: decode at batch 1
// and 8 (context 128) and a 512-token prefill. The figures against the
// bandwidth floor come from bench/cpu/tsbench (-dtype q8_0 -bandwidth).
func BenchmarkCPUWeightTypes(b *testing.B) {
	for _, name := range []string{model.Builtin124M, model.BuiltinQwen05B} {
		hs := weightTypeHarnesses(b, name)
		for _, c := range []struct {
			name   string
			decode int // batch size, or 0 for the prefill
		}{{"decode-b1", 1}, {"decode-b8", 8}, {"prefill-512", 0}} {
			b.Run(fmt.Sprintf("model=%s/%s", name, c.name), func(b *testing.B) {
				batches := make([]*engine.Batch, len(hs))
				for i, h := range hs {
					batches[i] = weightTypeBatch(b, h, c.decode)
					if _, err := h.b.Forward(batches[i]); err != nil { // warm up
						b.Fatal(err)
					}
				}
				sums := make([]time.Duration, len(hs))
				for b.Loop() {
					for i, h := range hs {
						t0 := time.Now()
						if _, err := h.b.Forward(batches[i]); err != nil {
							b.Fatal(err)
						}
						sums[i] += time.Since(t0)
					}
				}
				for i, dt := range []string{"f32", "bf16", "q8_0"} {
					b.ReportMetric(sums[i].Seconds()*1000/float64(b.N), "ms-"+dt)
				}
				b.ReportMetric(float64(sums[0])/float64(sums[2]), "x-vs-f32")
				b.ReportMetric(float64(sums[1])/float64(sums[2]), "x-vs-bf16")
				for _, h := range hs {
					freeSeqs(h)
				}
			})
		}
	}
}

// weightTypeHarnesses are harnesses for built-in model name with float32,
// bfloat16 and Q8_0 weights, each with KV for 8 sequences of 144 tokens or
// one of 512.
func weightTypeHarnesses(b *testing.B, name string) []*harness {
	var hs []*harness
	for _, dt := range []string{"float32", "bfloat16", model.QuantQ8_0} {
		m, err := model.Builtin(name)
		if err != nil {
			b.Fatal(err)
		}
		opts := Options{WeightDType: dt}
		if dt == model.QuantQ8_0 {
			if err := m.Quantize(dt); err != nil {
				b.Fatal(err)
			}
			opts.WeightDType = ""
		}
		hs = append(hs, newHarness(b, m, max(8*9, 32), 16, opts))
	}
	return hs
}

// weightTypeBatch is a decode step of seqs sequences at context 128, or
// (seqs 0) a prefill of 512 tokens, on a freshly reset KV pool.
func weightTypeBatch(b *testing.B, h *harness, seqs int) *engine.Batch {
	freeSeqs(h)
	V := h.b.cfg.VocabSize
	if seqs == 0 {
		toks := make([]int, 512)
		for i := range toks {
			toks[i] = (i * 7919) % V
		}
		if ok, _ := h.kv.Allocate(1, 512); !ok {
			b.Fatal("allocate")
		}
		return &engine.Batch{NumTokens: 512, Seqs: []engine.SeqBatch{{ID: 1, Tokens: toks, BlockTable: h.kv.BlockTable(1), Sample: true}}}
	}
	batch := &engine.Batch{NumTokens: seqs}
	for i := range seqs {
		id := kv.SeqID(i + 1)
		if ok, _ := h.kv.Allocate(id, 129); !ok {
			b.Fatal("allocate")
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{1000 + i}, StartPos: 128, BlockTable: h.kv.BlockTable(id), Sample: true})
	}
	return batch
}

// freeSeqs frees the sequences weightTypeBatch allocates (ids 1 to 8).
func freeSeqs(h *harness) {
	for id := range kv.SeqID(8) {
		_ = h.kv.Free(id + 1)
	}
}
