package cpu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// benchModel is the model the CPU benchmarks run: the checkpoint folder in
// $TINYSERVE_BENCH_MODEL when set (bench/cpu/run.sh writes the 124M random
// checkpoint as safetensors and points here), else the built-in 124M shape
// generated in memory.
func benchModel(b *testing.B) *model.Model {
	b.Helper()
	var m *model.Model
	var err error
	if dir := os.Getenv("TINYSERVE_BENCH_MODEL"); dir != "" {
		m, err = model.Load(dir)
	} else {
		m, err = model.Builtin(model.Builtin124M)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// prefillStep is a harness with KV for one sequence and the step that
// prefills its n prompt tokens in one chunk, sampling after the last.
func prefillStep(b *testing.B, m *model.Model, n int) (*harness, *engine.Batch) {
	h := newHarness(b, m, (n+15)/16, 16, Options{})
	toks := make([]int, n)
	for i := range toks {
		toks[i] = (i * 7919) % m.Config.VocabSize
	}
	if ok, _ := h.kv.Allocate(1, n); !ok {
		b.Fatal("allocate")
	}
	return h, &engine.Batch{NumTokens: n, Seqs: []engine.SeqBatch{{ID: 1, Tokens: toks, BlockTable: h.kv.BlockTable(1), Sample: true}}}
}

// BenchmarkCPUPrefill runs one prompt of 128 or 512 tokens through every
// layer, with the LM head for the last row only (what serving needs), and
// reports prompt tokens per second.
func BenchmarkCPUPrefill(b *testing.B) {
	m := benchModel(b)
	for _, n := range []int{128, 512} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			h, batch := prefillStep(b, m, n)
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.b.Forward(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			reportPeakRSS(b)
		})
	}
}

// BenchmarkCPUPrefillPromptLogits measures what prompt log-probabilities
// (echo with logprobs) cost: a 128-token prefill with the LM head for the
// last row only and one with every row's logits (PromptLogits), run in
// alternation so that both meet the same machine, and reports the ratio.
// Alternation is also the worst case for the prompt-logits buffer, which
// a plain step lets go: each scored step here allocates it afresh, as in
// mixed traffic (back-to-back scoring steps reuse it).
func BenchmarkCPUPrefillPromptLogits(b *testing.B) {
	m := benchModel(b)
	h, step := prefillStep(b, m, 128)
	plain := *step
	scored := plain
	scored.Seqs = []engine.SeqBatch{plain.Seqs[0]}
	scored.Seqs[0].PromptLogits = true
	var tPlain, tScored time.Duration
	for b.Loop() {
		for _, c := range []struct {
			batch *engine.Batch
			sum   *time.Duration
		}{{&plain, &tPlain}, {&scored, &tScored}} {
			t0 := time.Now()
			if _, err := h.b.Forward(c.batch); err != nil {
				b.Fatal(err)
			}
			*c.sum += time.Since(t0)
		}
	}
	b.ReportMetric(tPlain.Seconds()*1000/float64(b.N), "ms/plain")
	b.ReportMetric(tScored.Seconds()*1000/float64(b.N), "ms/prompt-logits")
	b.ReportMetric(float64(tScored)/float64(tPlain), "x-vs-plain")
}

// BenchmarkCPUDecode runs decode steps for batches of 1, 8 and 32
// sequences at a context of 128 tokens (one new token each, attention over
// 129 positions, LM head for every row) and reports generated tokens per
// second. The cache positions before 128 hold zeros rather than a real
// prefill, which costs the same arithmetic and saves minutes of setup.
func BenchmarkCPUDecode(b *testing.B) {
	m := benchModel(b)
	const ctx = 128
	for _, batchSize := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("batch=%d", batchSize), func(b *testing.B) {
			blocksPer := (ctx + 1 + 15) / 16
			h := newHarness(b, m, batchSize*blocksPer, 16, Options{})
			batch := &engine.Batch{NumTokens: batchSize}
			for i := range batchSize {
				id := kv.SeqID(i + 1)
				if ok, _ := h.kv.Allocate(id, ctx+1); !ok {
					b.Fatal("allocate")
				}
				batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{1000 + i}, StartPos: ctx,
					BlockTable: h.kv.BlockTable(id), Sample: true})
			}
			if _, err := h.b.Forward(batch); err != nil { // grow buffers outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.b.Forward(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batchSize)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/step")
			reportPeakRSS(b)
		})
	}
}

// BenchmarkBuiltinTiny measures building the default model, which must
// stay well under a second.
func BenchmarkBuiltinTiny(b *testing.B) {
	for b.Loop() {
		if _, err := model.Builtin(model.BuiltinTiny); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCPUDecodeTiny is a decode step of the default model at batch 8,
// the shape the sweep's embedded target runs.
func BenchmarkCPUDecodeTiny(b *testing.B) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		b.Fatal(err)
	}
	h := newHarness(b, m, 8*9, 16, Options{})
	batch := &engine.Batch{NumTokens: 8}
	for i := range 8 {
		id := kv.SeqID(i + 1)
		if ok, _ := h.kv.Allocate(id, 129); !ok {
			b.Fatal("allocate")
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{i}, StartPos: 128, BlockTable: h.kv.BlockTable(id), Sample: true})
	}
	for b.Loop() {
		if _, err := h.b.Forward(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(8*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// reportPeakRSS reports the process's peak resident memory (VmHWM) where
// /proc provides it.
func reportPeakRSS(b *testing.B) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err == nil {
				b.ReportMetric(float64(kb)/1024, "peakRSS-MiB")
			}
			return
		}
	}
}
