package cuda

// Step benchmarks and the step profile for the device check
// (bench/gpu/run.sh): they run where a GPU is (or on the emulated libraries,
// bench/gpu/emulate.sh) and skip elsewhere.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// benchModel is GPT-2 124M with random weights, or the built-in model or
// checkpoint folder $TINYSERVE_GPU_BENCH_MODEL names (bench/gpu/run.sh's
// MODEL, for a dry run on the emulator with a small one).
func benchModel(b *testing.B) *model.Model {
	name := os.Getenv("TINYSERVE_GPU_BENCH_MODEL")
	if name == "" {
		name = model.Builtin124M
	}
	m, err := model.OpenWith(name, model.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// BenchmarkGPUDecodeStep times one decode step of GPT-2 124M (random
// weights; see benchModel) for 4 sequences at position 128, the per-step goal
// (under 1 ms), in float16. Each iteration is a full Forward: metadata
// copy, 12 layers, LM head for 4 rows, argmax, result copy.
func BenchmarkGPUDecodeStep(b *testing.B) {
	for _, v := range []struct {
		dt     string
		graphs bool
	}{{"float16", false}, {"float16", true}, {"float32", false}} {
		name := v.dt
		if v.graphs {
			name += "-graphs"
		}
		b.Run(name, func(b *testing.B) {
			m := benchModel(b)
			const seqs, prompt = 4, 128
			gb := newGPUOpts(b, m, Options{DType: v.dt, CUDAGraphs: v.graphs}, seqs*64)
			timeSteps(b, gb, decodeBatch(b, gb, m.Config.VocabSize, seqs, prompt, 64))
		})
	}
}

// timeSteps runs batch on gb as b's loop, after ten untimed steps (buffers
// grown, graphs captured, clocks up), and reports ms/step.
func timeSteps(b *testing.B, gb *Backend, batch *engine.Batch) {
	for range 10 {
		if _, err := gb.Forward(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := gb.Forward(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/step")
}

// BenchmarkGPUDecodeBatch times a decode step of $TINYSERVE_GPU_DECODE_MODEL
// (default qwen2.5-0.5b-random, Qwen2.5-0.5B's shape, generated once) in
// $TINYSERVE_GPU_DECODE_DTYPE (default bfloat16, the checkpoint's own type:
// uploaded as it is) with CUDA graphs, as the tools run it, for each batch
// size of $TINYSERVE_GPU_DECODE_BATCHES (default 1,4,32), every sequence at
// position 128. Besides ms/step it reports, for reference, the bytes a step
// must read (every layer's weights, the final norm and the LM head once,
// and each sequence's keys and values) over the step's time: the effective
// bandwidth (an H200 reads at most about 4.8 TB/s).
func BenchmarkGPUDecodeBatch(b *testing.B) {
	gpuOrSkip(b) // before generating a 494M-parameter model
	name := envOr("TINYSERVE_GPU_DECODE_MODEL", model.BuiltinQwen05B)
	dt := envOr("TINYSERVE_GPU_DECODE_DTYPE", "bfloat16")
	var batches []int
	for _, f := range strings.Split(envOr("TINYSERVE_GPU_DECODE_BATCHES", "1,4,32"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("TINYSERVE_GPU_DECODE_BATCHES: %q is not a batch size", f)
		}
		batches = append(batches, n)
	}
	m, err := model.OpenWith(name, model.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	const prompt, blocksPer = 128, 16
	most := 0
	for _, n := range batches {
		most = max(most, n)
	}
	gb := newGPUOpts(b, m, Options{DType: dt, CUDAGraphs: true}, most*blocksPer)
	for _, n := range batches {
		b.Run(fmt.Sprintf("%s/%s/batch=%d", m.Name, dt, n), func(b *testing.B) {
			timeSteps(b, gb, decodeBatch(b, gb, m.Config.VocabSize, n, prompt, blocksPer))
			ms := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
			bytes := stepReadBytes(m, gb.dt.size, n, prompt+1)
			b.ReportMetric(float64(bytes)/1e6, "MB-read/step")
			b.ReportMetric(float64(bytes)/(ms*1e-3)/1e9, "GB/s")
		})
	}
}

// stepReadBytes is what a decode step of batch sequences at context ctx
// must read with elemSize-byte storage: every layer's parameters, the final
// norm and the LM head once, and each sequence's keys and values of every
// layer. The embedding (when untied) and learned positions count for
// nothing: a step reads a row of each per sequence.
func stepReadBytes(m *model.Model, elemSize, batch, ctx int) int64 {
	w := &m.Weights
	var n int
	add := func(ts ...tensor.Tensor) {
		for _, t := range ts {
			n += t.Len()
		}
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		add(l.AttnNorm.W, l.AttnNorm.B, l.QNorm, l.KNorm, l.O.W, l.O.B, l.MLPNorm.W, l.MLPNorm.B, l.Down.W, l.Down.B)
		for _, p := range append(append([]model.Linear{}, l.QKV...), l.Up...) {
			add(p.W, p.B)
		}
	}
	add(w.FinalNorm.W, w.FinalNorm.B, w.LMHead)
	return int64(n)*int64(elemSize) + int64(batch)*int64(ctx)*m.Config.KVBytesPerToken(elemSize)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// BenchmarkGPUPrefillChunk times the step a prefill_512_16 request spends
// most of its steps in at tiny-vLLM's 64-token step budget: one 64-token
// chunk of a prompt at positions 256..319 (float16, eager, no row sampled).
func BenchmarkGPUPrefillChunk(b *testing.B) {
	m := benchModel(b)
	gb := newGPUOpts(b, m, Options{DType: "float16"}, 64)
	timeSteps(b, gb, prefillChunkBatch(b, gb, m.Config.VocabSize, 256, 64, false))
}

// BenchmarkGPUMixedStep times a mixed step, eager and from a CUDA graph:
// 4 sequences decoding at position 128 and a 40-token chunk of a fifth
// prompt at positions 256..295, not sampled (44 token rows, run from the
// graph of 48 rows and 4 sampled rows), float16.
func BenchmarkGPUMixedStep(b *testing.B) {
	for _, graphs := range []bool{false, true} {
		name := "float16"
		if graphs {
			name += "-graphs"
		}
		b.Run(name, func(b *testing.B) {
			m := benchModel(b)
			gb := newGPUOpts(b, m, Options{DType: "float16", CUDAGraphs: graphs}, 5*64)
			timeSteps(b, gb, mixedBatch(b, gb, m.Config.VocabSize, 4, 128, 256, 40))
		})
	}
}

// BenchmarkGPUPrefillStep times the prefill step of a fresh prompt of
// each size in $TINYSERVE_GPU_PREFILL_TOKENS (default 64,512; at most 1,024),
// its last token sampled, one sequence, on the model and dtype of
// BenchmarkGPUDecodeBatch ($TINYSERVE_GPU_DECODE_MODEL,
// $TINYSERVE_GPU_DECODE_DTYPE), CUDA graphs on (for the steps the backend
// captures: since issue 31 item 3 every step of up to 512 rows, so 64 and
// 512 replay from graphs and 1,024 runs eagerly). It reports tokens/s
// beside ms/step.
func BenchmarkGPUPrefillStep(b *testing.B) {
	gpuOrSkip(b)
	name := envOr("TINYSERVE_GPU_DECODE_MODEL", model.BuiltinQwen05B)
	dt := envOr("TINYSERVE_GPU_DECODE_DTYPE", "bfloat16")
	var sizes []int
	for _, f := range strings.Split(envOr("TINYSERVE_GPU_PREFILL_TOKENS", "64,512"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			b.Fatalf("TINYSERVE_GPU_PREFILL_TOKENS: %q is not a prompt size of 1 to 1024", f)
		}
		sizes = append(sizes, n)
	}
	m, err := model.OpenWith(name, model.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	gb := newGPUOpts(b, m, Options{DType: dt, CUDAGraphs: true}, 64)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%s/%s/tokens=%d", m.Name, dt, n), func(b *testing.B) {
			timeSteps(b, gb, prefillChunkBatch(b, gb, m.Config.VocabSize, 0, n, true))
			ms := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(float64(n)/(ms*1e-3), "tokens/s")
		})
	}
}

// mixedBatch prefills seqs sequences of prompt made-up tokens and done
// tokens of one more on gb (64 blocks of 16 each) and returns the batch that
// decodes one token of each of the first and prefills the next chunk
// tokens of the last, unsampled.
func mixedBatch(tb testing.TB, gb *Backend, vocab, seqs, prompt, done, chunk int) *engine.Batch {
	tb.Helper()
	mgr, _ := kv.New((seqs+1)*64, 16)
	batch := &engine.Batch{}
	toks := func(i, n int) []int {
		t := make([]int, n)
		for j := range t {
			t[j] = (i*7919 + j*104729) % vocab
		}
		return t
	}
	for i := range seqs + 1 {
		id := kv.SeqID(i + 1)
		n := prompt
		if i == seqs {
			n = done
		}
		if ok, err := mgr.Allocate(id, n+max(1, chunk)); err != nil || !ok {
			tb.Fatal(ok, err)
		}
		pre := &engine.Batch{NumTokens: n, Seqs: []engine.SeqBatch{{ID: id, Tokens: toks(i, n), BlockTable: mgr.BlockTable(id), Sample: true}}}
		if _, err := gb.Forward(pre); err != nil {
			tb.Fatal(err)
		}
		s := engine.SeqBatch{ID: id, Tokens: []int{i + 1}, StartPos: n, BlockTable: mgr.BlockTable(id), Sample: true}
		if i == seqs {
			s = engine.SeqBatch{ID: id, Tokens: toks(i, done+chunk)[done:], StartPos: done, BlockTable: mgr.BlockTable(id)}
		}
		batch.Seqs = append(batch.Seqs, s)
		batch.NumTokens += len(s.Tokens)
	}
	return batch
}

// prefillChunkBatch prefills done made-up tokens of one sequence on gb
// (blocks of 16, at most 64 of them) and returns the batch that prefills
// its next chunk tokens, sampling the last one when sample is set (as a
// prompt's final chunk does).
func prefillChunkBatch(tb testing.TB, gb *Backend, vocab, done, chunk int, sample bool) *engine.Batch {
	tb.Helper()
	mgr, _ := kv.New(64, 16)
	id := kv.SeqID(1)
	if ok, err := mgr.Allocate(id, done+chunk); err != nil || !ok {
		tb.Fatal(ok, err)
	}
	toks := make([]int, done+chunk)
	for j := range toks {
		toks[j] = (j * 104729) % vocab
	}
	table := mgr.BlockTable(id)
	if done > 0 {
		pre := &engine.Batch{NumTokens: done, Seqs: []engine.SeqBatch{{ID: id, Tokens: toks[:done], BlockTable: table}}}
		if _, err := gb.Forward(pre); err != nil {
			tb.Fatal(err)
		}
	}
	return &engine.Batch{NumTokens: chunk, Seqs: []engine.SeqBatch{{ID: id, Tokens: toks[done:], StartPos: done, BlockTable: table, Sample: sample}}}
}

// decodeBatch prefills seqs sequences of prompt made-up tokens on gb and
// returns the batch that decodes one token of each: the step the per-step
// goal is about. Each sequence gets blocksPer blocks of 16.
func decodeBatch(tb testing.TB, gb *Backend, vocab, seqs, prompt, blocksPer int) *engine.Batch {
	tb.Helper()
	mgr, _ := kv.New(seqs*blocksPer, 16)
	batch := &engine.Batch{}
	for i := range seqs {
		id := kv.SeqID(i + 1)
		if ok, err := mgr.Allocate(id, prompt+1); err != nil || !ok {
			tb.Fatal(ok, err)
		}
		toks := make([]int, prompt)
		for j := range toks {
			toks[j] = (i*7919 + j*104729) % vocab
		}
		pre := &engine.Batch{NumTokens: prompt, Seqs: []engine.SeqBatch{{ID: id, Tokens: toks, BlockTable: mgr.BlockTable(id), Sample: true}}}
		if _, err := gb.Forward(pre); err != nil {
			tb.Fatal(err)
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{i + 1}, StartPos: prompt, BlockTable: mgr.BlockTable(id), Sample: true})
		batch.NumTokens++
	}
	return batch
}

// TestProfileGPUStep breaks the benchmark's decode step (GPT-2 124M shape
// unless TINYSERVE_GPU_BENCH_MODEL says otherwise, 4 sequences at position
// 128, float16 unless TINYSERVE_GPU_BENCH_DTYPE says otherwise, eager) and a
// 64-token prefill chunk down by kernel and GEMM, and logs the tables the
// device check keeps. It is not named TestGPU…: the device check runs it
// beside the benchmark, not with the correctness tests.
func TestProfileGPUStep(t *testing.T) {
	gpuOrSkip(t) // before building a model of 124M or 494M parameters
	name := os.Getenv("TINYSERVE_GPU_BENCH_MODEL")
	if name == "" {
		name = model.Builtin124M
	}
	dt := os.Getenv("TINYSERVE_GPU_BENCH_DTYPE")
	if dt == "" {
		dt = "float16"
	}
	m, err := model.OpenWith(name, model.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	checkStepProfile(t, newGPUOpts, m, dt, 20*time.Millisecond, 50, false)
	checkStepProfile(t, newGPUOpts, m, dt, 20*time.Millisecond, 50, true)
}

// gpuOrSkip skips tb where newGPUOpts would (no GPU or no libraries, unless
// TINYSERVE_CUDA_REQUIRE=1), before a test builds a large model only to
// skip.
func gpuOrSkip(tb testing.TB) {
	tb.Helper()
	newGPUOpts(tb, tinyModel(tb), Options{DType: "float32"}, 1)
}

// checkStepProfile profiles steps decode steps of 4 sequences, or with
// prefill set steps that prefill a 64-token chunk of one sequence at
// position 256 and sample its last row (GPT-2's sizes; the test models
// are shorter): every launch and GEMM of the step is accounted for, once
// per step, the profiled steps compute what unprofiled ones do, and the
// table is logged.
func checkStepProfile(t *testing.T, newDev newDevice, m *model.Model, dt string, hold time.Duration, steps int, prefill bool) {
	const seqs = 4
	prompt := min(128, m.Config.MaxPositions/2)
	gb := newDev(t, m, Options{DType: dt}, seqs*64)
	var batch *engine.Batch
	var what string
	if prefill {
		done, chunk := min(256, m.Config.MaxPositions/2), min(64, m.Config.MaxPositions/4)
		batch = prefillChunkBatch(t, gb, m.Config.VocabSize, done, chunk, true)
		what = fmt.Sprintf("prefill step, one %d-token chunk at position %d", chunk, done)
	} else {
		batch = decodeBatch(t, gb, m.Config.VocabSize, seqs, prompt, 64)
		what = fmt.Sprintf("decode step, %d sequences at position %d", seqs, prompt)
	}
	plain, err := gb.Forward(batch)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, len(plain))
	for i, r := range plain {
		want[i] = r.Argmax
	}
	p := newProfiler(gb, hold)
	gb.prof = p
	t.Cleanup(func() { gb.prof = nil; p.release() })
	for range steps {
		rows, err := gb.Forward(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if r.Argmax != want[i] {
				t.Fatalf("a profiled step's row %d is %d, unprofiled %d", i, r.Argmax, want[i])
			}
		}
		if err := p.collect(); err != nil {
			t.Fatal(err)
		}
	}
	c := &m.Config
	L, C, I := c.Layers, c.Hidden, c.Intermediate
	act, up := "bias+gelu", I
	if c.MLP == model.MLPGated {
		act, up = "silu·up", 2*I
	}
	att := "attention" // decode rows, unsplit at these contexts
	if prefill && flashHeadDim(c.HeadDim) {
		att = "attention (prefill tiles)"
	}
	perStep := map[string]int{
		"embed": 1, "norm": 2, "residual+norm": 2*L - 1, "residual": 1,
		"qkv bias+rope+KV write": L, att: L, act: L, "argmax": 1, "gemm LM head": 1,
		fmt.Sprintf("gemm %d→%d", C, c.QDim()+2*c.KVDim()): L, fmt.Sprintf("gemm %d→%d", c.QDim(), C): L,
		fmt.Sprintf("gemm %d→%d", C, up): L, fmt.Sprintf("gemm %d→%d", I, C): L,
	}
	got := map[string]int{}
	for l, n := range p.calls {
		got[l] = n / steps
	}
	if fmt.Sprint(got) != fmt.Sprint(perStep) {
		t.Errorf("launches and GEMMs per step %v, want %v", got, perStep)
	}
	if p.stepTime() <= 0 {
		t.Errorf("step time %v", p.stepTime())
	}
	var sb strings.Builder
	if err := p.write(&sb); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, %s, eager, mean of %d steps (%s):\n%s", what, dt, steps, m.Name, sb.String())
}
