package cuda

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// TestGraphBuckets: every step of up to maxGraphTokens rows has a bucket
// holding it, past 16 rows no more than a third of a bucket's rows are
// padding, the
// buckets up to q8GemvMaxRows are exactly the steps up to it (so a padded
// Q8_0 product takes the path its step takes), and larger steps have none.
func TestGraphBuckets(t *testing.T) {
	if maxGraphTokens != 512 || !slices.IsSorted(graphBuckets[:]) {
		t.Fatalf("buckets %v, max %d", graphBuckets, maxGraphTokens)
	}
	for n := 0; n <= maxGraphTokens; n++ {
		b, ok := graphBucket(n)
		if !ok || b < n || (n > 16 && b-n > b/3) || (n <= q8GemvMaxRows) != (b <= q8GemvMaxRows) {
			t.Errorf("graphBucket(%d) = %d, %v", n, b, ok)
		}
	}
	if b, ok := graphBucket(0); b != 0 || !ok {
		t.Errorf("graphBucket(0) = %d, %v", b, ok)
	}
	if _, ok := graphBucket(maxGraphTokens + 1); ok {
		t.Errorf("graphBucket(%d) has a bucket", maxGraphTokens+1)
	}
}

// TestGraphShape: a decode-only step of up to maxGraphBatch sequences keeps
// its size; any other step of up to maxGraphTokens rows is padded to the
// buckets, its sampled rows (prompt logits included) too; a larger step,
// a profiled one or one with graphs off has no graph.
func TestGraphShape(t *testing.T) {
	b := &Backend{opts: Options{CUDAGraphs: true}, cfg: model.Config{MaxPositions: 4096}, blockSize: 16}
	seq := func(n, start int, sample, promptLogits bool) engine.SeqBatch {
		return engine.SeqBatch{Tokens: make([]int, n), StartPos: start, Sample: sample, PromptLogits: promptLogits}
	}
	decodes := func(k, start int) []engine.SeqBatch {
		var s []engine.SeqBatch
		for range k {
			s = append(s, seq(1, start, true, false))
		}
		return s
	}
	cases := []struct {
		name string
		seqs []engine.SeqBatch
		want graphKey
		ok   bool
	}{
		{"decode 3", decodes(3, 10), graphKey{3, 3, 16, false}, true},
		{"decode 64 at 300", decodes(64, 300), graphKey{64, 64, 32, false}, true},
		{"decode 65", decodes(65, 0), graphKey{96, 96, 16, true}, true},
		{"prefill 20 unsampled", []engine.SeqBatch{seq(20, 0, false, false)}, graphKey{24, 0, 16, true}, true},
		{"prefill 20 sampled", []engine.SeqBatch{seq(20, 0, true, false)}, graphKey{24, 1, 16, true}, true},
		{"mixed", append(decodes(5, 40), seq(12, 0, true, false)), graphKey{24, 8, 16, true}, true},
		{"prompt logits", append(decodes(2, 40), seq(30, 0, false, true)), graphKey{32, 32, 16, true}, true},
		{"decode with a prompt-logits row", []engine.SeqBatch{seq(1, 5, true, true)}, graphKey{1, 1, 16, true}, true},
		{"prefill 512", []engine.SeqBatch{seq(512, 0, true, false)}, graphKey{512, 1, 32, true}, true},
		{"prefill 513", []engine.SeqBatch{seq(513, 0, true, false)}, graphKey{}, false},
	}
	for _, c := range cases {
		got, ok := b.graphShape(&engine.Batch{Seqs: c.seqs})
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
	b.opts.CUDAGraphs = false
	if _, ok := b.graphShape(&engine.Batch{Seqs: decodes(2, 0)}); ok {
		t.Error("a graph shape with graphs off")
	}
}

// graphSchedule is the steps checkStepGraphsMatchEager runs: each entry
// feeds a sequence (1-based, of graphPrompts) the next n tokens of its
// prompt, or with n 0 decodes one token. A chunk that ends its prompt
// samples. Sequences 5 and 7 ask for prompt logits. Several steps share a
// graph key with different row counts (eager, captured, replayed), others
// fall in other buckets.
var (
	graphPrompts      = []int{70, 9, 11, 50, 13, 6, 30}
	graphPromptLogits = map[int]bool{5: true, 7: true}
	graphSchedule     = [][][2]int{
		{{1, 17}},                         // N 17, R 0: key (24, 0)
		{{1, 20}},                         // N 20: (24, 0) captured
		{{1, 23}},                         // N 23: (24, 0) replayed
		{{1, 10}},                         // N 10, R 1: (16, 1), seq 1's prompt ends
		{{2, 9}},                          // N 9: (16, 1) captured
		{{3, 11}},                         // N 11: (16, 1) replayed
		{{1, 0}, {2, 0}, {3, 0}, {4, 14}}, // N 17, R 3: (24, 4)
		{{1, 0}, {2, 0}, {3, 0}, {4, 18}}, // N 21: (24, 4) captured
		{{1, 0}, {2, 0}, {3, 0}, {4, 18}}, // N 21, R 4 (seq 4 ends): (24, 4) replayed
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}},  // decode-only: (4, 4) exact
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 13}},                // N 17, R 4 + 13 prompt rows: (24, 24)
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {6, 6}},                 // N 10, R 5: (16, 8)
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {6, 0}, {7, 10}},        // N 15, R 5 + 10: (16, 16)
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {6, 0}, {7, 9}},         // N 14: (16, 16) captured
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {6, 0}, {7, 11}},        // N 16, R 16 (seq 7 ends): (16, 16) replayed
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}}, // decode-only: (7, 7)
		{{2, 0}, {3, 0}, {5, 0}},                                 // decode-only: (3, 3)
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}}, // (7, 7) captured
		{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}}, // (7, 7) replayed
	}
	// graphScheduleReplays are the shapes (rows, sampled rows, 1 for a
	// padded shape) the schedule replays; the stride is the model's.
	graphScheduleReplays = [][3]int{{24, 0, 1}, {16, 1, 1}, {24, 4, 1}, {16, 16, 1}, {7, 7, 0}}
)

// checkStepGraphsMatchEager runs graphSchedule on an eager backend and on
// one with CUDA graphs, and compares every step: the rows returned (the
// same count, no padding row among them), their argmax, their logits, and
// the KV cache of every position of every sequence so far, within tol
// (relative to the value where it is over 1; 0: bit for bit). A padding row that wrote a real sequence's KV, or reached
// a real row's result, makes it fail at that step or a later one.
func checkStepGraphsMatchEager(t *testing.T, newDev newDevice, m *model.Model, dtype string, tol float64) {
	const blocks = 64
	eager := newDev(t, m, Options{DType: dtype}, blocks)
	gb := newDev(t, m, Options{DType: dtype, CUDAGraphs: true}, blocks)
	es, gs := newStepper(t, eager, blocks), newStepper(t, gb, blocks)
	prompts := smallPrompts(m.Config.VocabSize, graphPrompts...)
	done := make([]int, len(prompts))
	last := make([]int, len(prompts))
	replayed := map[graphKey]int{}
	worst, worstKV := 0.0, 0.0
	for si, st := range graphSchedule {
		var parts []part
		for _, e := range st {
			i, n := e[0]-1, e[1]
			p := part{id: kvID(i), start: done[i]}
			if n == 0 {
				p.tokens, p.sample, p.needLogits = []int{last[i]}, true, si%2 == 0
			} else {
				p.tokens = prompts[i][done[i] : done[i]+n]
				p.sample = done[i]+n == len(prompts[i])
				p.promptLogits = graphPromptLogits[i+1]
			}
			parts = append(parts, p)
		}
		key, ok := gb.graphShape(batchOf(gs, parts...))
		if !ok {
			t.Fatalf("step %d: no graph shape", si)
		}
		if _, ok := gb.graphs[key]; ok {
			replayed[key]++
		}
		er, gr := es.step(parts...), gs.step(parts...)
		if len(er) != len(gr) {
			t.Fatalf("step %d (key %v): %d rows eager, %d with graphs", si, key, len(er), len(gr))
		}
		for k := range er {
			if er[k].Argmax != gr[k].Argmax || len(er[k].Logits) != len(gr[k].Logits) {
				t.Fatalf("step %d (key %v) row %d: argmax %d eager, %d with graphs (%d and %d logits)", si, key, k, er[k].Argmax, gr[k].Argmax, len(er[k].Logits), len(gr[k].Logits))
			}
			for v := range er[k].Logits {
				d := math.Abs(float64(er[k].Logits[v]-gr[k].Logits[v])) / max(1, math.Abs(float64(er[k].Logits[v])))
				if d > tol || math.IsNaN(float64(gr[k].Logits[v])) {
					t.Fatalf("step %d (key %v) row %d: logit %d is %g eager, %g with graphs", si, key, k, v, er[k].Logits[v], gr[k].Logits[v])
				}
				worst = max(worst, d)
			}
		}
		// The sampled token of each sequence: the last of its rows.
		r := 0
		for _, p := range parts {
			nr, _ := resultRows(&engine.SeqBatch{Tokens: p.tokens, Sample: p.sample, PromptLogits: p.promptLogits})
			r += nr
			if p.sample {
				last[int(p.id)-1] = er[r-1].Argmax
			}
			done[int(p.id)-1] += len(p.tokens)
		}
		if r != len(er) {
			t.Fatalf("step %d: %d rows, want %d", si, len(er), r)
		}
		d := compareKV(t, eager, gb, es, gs, done, tol)
		if d < 0 {
			t.Fatalf("step %d (key %v): the KV caches differ", si, key)
		}
		worstKV = max(worstKV, d)
	}
	for _, rs := range graphScheduleReplays {
		k := graphKey{rs[0], rs[1], graphStride(1, (m.Config.MaxPositions+15)/16), rs[2] == 1}
		if replayed[k] == 0 {
			t.Errorf("key %v never replayed (replays %v)", k, replayed)
		}
	}
	if gb.graphsOff {
		t.Error("graphs turned off")
	}
	t.Logf("%s: %d graphs %v; max |graph - eager| logit %.3g, KV %.3g", dtype, len(gb.graphs), slices.SortedFunc(maps.Keys(gb.graphs), cmpKey), worst, worstKV)
}

func cmpKey(a, b graphKey) int {
	if a.rows != b.rows {
		return a.rows - b.rows
	}
	if a.sample != b.sample {
		return a.sample - b.sample
	}
	return a.stride - b.stride
}

// compareKV compares the K and V of every written position (done[i] of
// sequence i, through each stepper's block tables) of two backends' caches:
// the largest difference, or -1 (after reporting the first) where one is
// over tol or the bytes differ with tol 0.
func compareKV(t *testing.T, a, b *Backend, sa, sb *stepper, done []int, tol float64) float64 {
	t.Helper()
	ka, va := readCache(t, a)
	kb, vb := readCache(t, b)
	c := a.cfg
	row := c.KVDim() * a.dt.size
	layer := a.numBlocks * a.blockSize * row
	worst := 0.0
	for i, n := range done {
		ta, tb := sa.kv.BlockTable(kvID(i)), sb.kv.BlockTable(kvID(i))
		for p := range n {
			oa := int(ta[p/a.blockSize])*a.blockSize + p%a.blockSize
			ob := int(tb[p/b.blockSize])*b.blockSize + p%b.blockSize
			for l := range c.Layers {
				for _, kv := range [][2][]byte{{ka, kb}, {va, vb}} {
					x := kv[0][l*layer+oa*row : l*layer+(oa+1)*row]
					y := kv[1][l*layer+ob*row : l*layer+(ob+1)*row]
					if tol == 0 {
						if !bytes.Equal(x, y) {
							t.Errorf("seq %d position %d layer %d: KV differs", i+1, p, l)
							return -1
						}
						continue
					}
					for e := 0; e < len(x); e += a.dt.size {
						xv := float64(storedValue(x[e:], a.dt))
						d := math.Abs(xv-float64(storedValue(y[e:], a.dt))) / max(1, math.Abs(xv))
						if d > tol || math.IsNaN(d) {
							t.Errorf("seq %d position %d layer %d: KV differs by %g", i+1, p, l, d)
							return -1
						}
						worst = max(worst, d)
					}
				}
			}
		}
	}
	return worst
}

// storedValue reads one element in the storage type dt.
func storedValue(b []byte, dt dtype) float32 {
	switch dt.size {
	case 4:
		return math.Float32frombits(le32(b))
	}
	h := uint16(b[0]) | uint16(b[1])<<8
	if dt == dtBFloat16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	return f16ToF32(h)
}

// readCache copies a backend's whole K and V caches to the host.
func readCache(t *testing.T, b *Backend) (k, v []byte) {
	t.Helper()
	done, err := b.enter()
	defer done()
	if err != nil {
		t.Fatal(err)
	}
	n := b.cfg.Layers * b.numBlocks * b.blockSize * b.cfg.KVDim() * b.dt.size
	host, err := b.drv.MemAllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.drv.MemFreeHost(host) }()
	read := func(p DevicePtr) []byte {
		if err := b.drv.CopyDtoH(host, p, n, b.stream); err != nil {
			t.Fatal(err)
		}
		if err := b.drv.StreamSync(b.stream); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(unsafe.Slice((*byte)(host), n))
	}
	return read(b.kc), read(b.vc)
}

// TestFakeGPUStepGraphs: mixed, prefill-only, chunked-prefill and
// prompt-logits steps replayed from padded graphs equal eager steps bit for
// bit, results and KV cache, in float32 and float16, on GPT-2 and Qwen3
// (rotary positions, q/k norms, GQA), and on Qwen3 with Q8_0 weights
// (under the race detector GPT-2 in float32 only).
func TestFakeGPUStepGraphs(t *testing.T) {
	fake := func(t testing.TB, m *model.Model, opts Options, numBlocks int) *Backend {
		b, _ := newFakeBackend(t, m, opts, numBlocks)
		return b
	}
	for _, c := range graphTestCases {
		if raceEnabled && c != [2]string{"gpt2", "float32"} {
			continue // the Go around the kernels is the same for every case
		}
		t.Run(c[0]+"/"+c[1], func(t *testing.T) {
			checkStepGraphsMatchEager(t, fake, graphTestModel(t, c[0]), c[1], 0)
		})
	}
}

// TestEmuStepGraphs is TestFakeGPUStepGraphs on the kernels' CUDA C (not
// under the race detector, where TestFakeGPUStepGraphs runs GPT-2 in
// float32 only).
func TestEmuStepGraphs(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector TestFakeGPUStepGraphs checks the Go around the kernels; the kernels' arithmetic is checked without it")
	}
	for _, c := range graphTestCases {
		t.Run(c[0]+"/"+c[1], func(t *testing.T) {
			checkStepGraphsMatchEager(t, newEmuBackend, graphTestModel(t, c[0]), c[1], 0)
		})
	}
}

// TestGPUStepGraphs is TestFakeGPUStepGraphs on a GPU. There an eager step
// of N rows and its graph, launched for the bucket's rows, may differ in
// the last bits (cuBLAS may choose another algorithm for another row
// count), so results and KV are compared within 1e-5 (float32) or 1%
// (float16) of the value, argmax exactly, and the largest difference is
// logged.
func TestGPUStepGraphs(t *testing.T) {
	for _, c := range graphTestCases {
		t.Run(c[0]+"/"+c[1], func(t *testing.T) {
			tol := 1e-5
			if c[1] == "float16" {
				tol = 1e-2
			}
			checkStepGraphsMatchEager(t, newGPUOpts, graphTestModel(t, c[0]), c[1], tol)
		})
	}
}

// graphTestModel is smallModel (GPT-2), smallLlama("qwen3"), or that
// Qwen3 quantized to Q8_0 ("qwen3-q8_0": its products through q8_gemv up
// to 16 rows, dequantized and cuBLAS past that, both inside graphs).
func graphTestModel(t testing.TB, arch string) *model.Model {
	switch arch {
	case "gpt2":
		return smallModel(t, nil)
	case "qwen3-q8_0":
		return quantized(t, smallLlama(t, "qwen3"))
	}
	return smallLlama(t, arch)
}

// graphTestCases are the models and storage types the step-graph checks
// run: GPT-2 and Qwen3 in float32 and float16, and the Q8_0 Qwen3 in
// float32.
var graphTestCases = [][2]string{
	{"gpt2", "float32"}, {"gpt2", "float16"}, {"qwen3", "float32"}, {"qwen3", "float16"}, {"qwen3-q8_0", "float32"},
}

// TestFakeGPUGraphEviction: with room for two graphs, a third key evicts
// the one launched least recently, and every step still equals eager.
func TestFakeGPUGraphEviction(t *testing.T) {
	defer func(n int) { maxGraphs = n }(maxGraphs)
	maxGraphs = 2
	m := smallModel(t, nil)
	const blocks = 40
	eager, _ := newFakeBackend(t, m, Options{DType: "float32"}, blocks)
	gb, g := newFakeBackend(t, m, Options{DType: "float32", CUDAGraphs: true}, blocks)
	es, gs := newStepper(t, eager, blocks), newStepper(t, gb, blocks)
	prompts := smallPrompts(300, 40, 40, 40)
	// Three unsampled chunks of sequence i per round: keys (2, 0), (8, 0),
	// (24, 0), in that order, three rounds (eager, capture, replay).
	sizes := []int{2, 7, 20}
	done := make([]int, 3)
	for round := range 3 {
		for i, n := range sizes {
			p := part{id: kvID(i), tokens: prompts[i][done[i] : done[i]+n], start: done[i]}
			before := g.launches
			er, gr := es.step(p), gs.step(p)
			if len(er) != 0 || len(gr) != 0 {
				t.Fatalf("unsampled chunk returned rows")
			}
			if round == 2 && i == 2 && g.launches == before {
				t.Error("the third key replayed, though its graph was evicted")
			}
			done[i] += n
		}
		if len(gb.graphs) > 2 {
			t.Fatalf("round %d: %d graphs, over the 2 allowed", round, len(gb.graphs))
		}
	}
	if d := compareKV(t, eager, gb, es, gs, done, 0); d < 0 {
		t.Fatal("KV differs")
	}
	if len(g.graphs) != len(gb.graphs) {
		t.Errorf("%d graphs on the device, %d kept", len(g.graphs), len(gb.graphs))
	}
}

// TestGPUGraphMemory logs the device memory CUDA graphs take on a GPU
// (docs/cuda.md, Bounds): 32 graphs (decode steps of 1 to 32 sequences) of
// a 12-layer model, whose step is 113 launches as GPT-2 124M's, measured
// with cuMemGetInfo before and after their capture, the step buffers grown
// beforehand. It checks only that they were captured.
func TestGPUGraphMemory(t *testing.T) { checkGraphMemory(t, newGPUOpts) }

func checkGraphMemory(t *testing.T, newDev newDevice) {
	const seqs, blocks = 32, 1024
	m := smallModel(t, func(c *model.Config) { c.Layers, c.MaxPositions = 12, 512 })
	gb := newDev(t, m, Options{DType: "float16", CUDAGraphs: true}, blocks)
	s := newStepper(t, gb, blocks)
	// One prefill step of every sequence grows the buffers past what the
	// decode steps need, so that no growth drops a graph.
	var parts []part
	for i := range seqs {
		parts = append(parts, part{id: kvID(i), tokens: []int{1, 2}, sample: true})
	}
	s.step(parts...)
	pos := make([]int, seqs)
	for i := range pos {
		pos[i] = 2
	}
	decode := func(n int) {
		var parts []part
		for i := range n {
			parts = append(parts, part{id: kvID(i), tokens: []int{3}, start: pos[i], sample: true})
			pos[i]++
		}
		s.step(parts...)
	}
	free := func() uint64 {
		done, err := gb.enter()
		defer done()
		if err != nil {
			t.Fatal(err)
		}
		if err := gb.drv.StreamSync(gb.stream); err != nil {
			t.Fatal(err)
		}
		f, _, err := gb.drv.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for n := 1; n <= seqs; n++ {
		decode(n) // run eagerly once: cuBLAS's per-shape setup before the measurement
	}
	before := free()
	for n := 1; n <= seqs; n++ {
		decode(n) // captured
	}
	after := free()
	if len(gb.graphs) != seqs || gb.graphsOff {
		t.Fatalf("%d graphs (off=%v), want %d", len(gb.graphs), gb.graphsOff, seqs)
	}
	used := float64(int64(before)-int64(after)) / (1 << 20)
	t.Logf("graph memory: %d graphs of %d launches took %.1f MiB of device memory (%.1f KiB a graph)", len(gb.graphs), 9*m.Config.Layers+5, used, used*1024/float64(len(gb.graphs)))
}
