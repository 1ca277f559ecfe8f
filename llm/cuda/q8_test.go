package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// newQ8Device builds a backend on a fake GPU (Go emulation or the host
// emulator of the CUDA C) and returns the GPU too, whose launch counts
// tell which kernels ran.
type newQ8Device func(t testing.TB, m *model.Model, opts Options, numBlocks int) (*Backend, *fakeGPU)

func fakeQ8Device(t testing.TB, m *model.Model, opts Options, numBlocks int) (*Backend, *fakeGPU) {
	return newFakeBackend(t, m, opts, numBlocks)
}

func emuQ8Device(t testing.TB, m *model.Model, opts Options, numBlocks int) (*Backend, *fakeGPU) {
	return newEmuBackendOrder(t, m, opts, numBlocks, false)
}

// gpuQ8Device is a backend on the real GPU (skipping without one), whose
// launches are not counted.
func gpuQ8Device(t testing.TB, m *model.Model, opts Options, numBlocks int) (*Backend, *fakeGPU) {
	return newGPUOpts(t, m, opts, numBlocks), nil
}

// q8Models are the small models the Q8_0 checks quantize: a GPT-2 (learned
// positions, biases, Conv1D weights turned out×in, tied head) and a Qwen3
// (gated MLP, q/k norms, tied head), and a Llama 3 for an untied Q8_0 head.
var q8Models = []struct {
	name  string
	model func(testing.TB) *model.Model
}{
	{"gpt2", func(t testing.TB) *model.Model { return smallModel(t, nil) }},
	{"qwen3", func(t testing.TB) *model.Model { return smallLlama(t, "qwen3") }},
	{"llama3", func(t testing.TB) *model.Model { return smallLlama(t, "llama3") }},
}

func quantized(t testing.TB, m *model.Model) *model.Model {
	t.Helper()
	if err := m.Quantize(model.QuantQ8_0); err != nil {
		t.Fatal(err)
	}
	return m
}

// q8Tolerance is the Q8_0 checks' bound for a storage type: absolute in
// float32, relative to the row's largest logit in the half types (the GPU
// tests' tolerances). In float32 the device dequantizes the weights and
// keeps the activations in float32: 1e-5 where the CPU backend's Q8_0
// kernels do the same, cpuQ8ActTol where they round the activations to 16
// bits per block of 32 for integer products (AVX2 or AVX-512BW;
// f32.Q8Rows), which moves these logits by up to about 0.0012.
func q8Tolerance(dt string) (tol float64, relative bool) {
	switch dt {
	case "float16":
		return tolFloat16Rel, true
	case "bfloat16":
		return tolBFloat16Rel, true
	}
	if f32.NewPackedQ8(32, 32).UsesQ8Rows() {
		return cpuQ8ActTol, false
	}
	return 1e-5, false
}

// nearTie reports whether the CPU's logits put a and b within tol of each
// other: two paths that differ by tol may then pick either. Without logits
// there is no margin to read, and no tie is allowed.
func nearTie(logits []float32, a, b int, tol float64) bool {
	return logits != nil && math.Abs(float64(logits[a]-logits[b])) <= tol
}

// cpuQ8ActTol is the float32 bound where the CPU backend's Q8_0 products
// round the activations to 16 bits (about three times the largest
// difference seen on the small models).
const cpuQ8ActTol = 4e-3

// q8Decodes are the decode batch sizes the checks run: every row tile of
// q8_gemv (1, 2, 4, 8), sizes between tiles, two tiles (16, the most rows
// the GEMV takes), and past it (20: the dequantize-and-GEMM path).
var q8Decodes = []int{1, 2, 3, 5, 8, 12, 16, 20}

// checkQ8MatchesCPU runs a Q8_0 model on the device and on the CPU
// backend's Q8_0 path: a 40-token
// prefill with prompt logits (the dequantized path, the LM head in
// slices), a step prefilling 19 more sequences (3 tokens each), then
// decode steps of each q8Decodes size, every row's logits compared. It
// returns the worst difference (relative in the half types) and fails the
// test past q8Tolerance or on a different argmax in float32.
func checkQ8MatchesCPU(t *testing.T, newDev newQ8Device, m *model.Model, dt string) float64 {
	t.Helper()
	const blocks = 64
	b, g := newDev(t, m, Options{DType: dt}, blocks)
	cb := cpuBackend(t, m, blocks)
	ds, cs := newStepper(t, b, blocks), newStepper(t, cb, blocks)
	tol, rel := q8Tolerance(dt)
	worst := 0.0
	compare := func(what string, got, want []engine.SampleRow) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, CPU %d", what, len(got), len(want))
		}
		for r := range want {
			if dt == "float32" && got[r].Argmax != want[r].Argmax && !nearTie(want[r].Logits, got[r].Argmax, want[r].Argmax, 2*tol) {
				t.Errorf("%s row %d: argmax %d, CPU %d", what, r, got[r].Argmax, want[r].Argmax)
			}
			if want[r].Logits == nil {
				continue
			}
			scale := 1.0
			if rel {
				scale = 0
				for _, v := range want[r].Logits {
					scale = max(scale, math.Abs(float64(v)))
				}
			}
			for v := range want[r].Logits {
				worst = max(worst, math.Abs(float64(got[r].Logits[v]-want[r].Logits[v]))/scale)
			}
		}
	}
	V := m.Config.VocabSize
	prompts := smallPrompts(V, 40, 3)
	p := part{id: 1, tokens: prompts[0], sample: true, needLogits: true, promptLogits: true}
	got, want := ds.step(p), cs.step(p)
	compare("40-token prefill", got, want)
	const seqs = 20
	last, pos := make([]int, seqs), make([]int, seqs)
	last[0], pos[0] = want[len(want)-1].Argmax, len(prompts[0])
	var parts []part
	for i := 1; i < seqs; i++ {
		toks := smallPrompts(V, 3+i)[0][i:]
		parts = append(parts, part{id: kv.SeqID(i + 1), tokens: toks, sample: true, needLogits: true})
		pos[i] = len(toks)
	}
	got, want = ds.step(parts...), cs.step(parts...)
	compare("19 prefills", got, want)
	for i := 1; i < seqs; i++ {
		last[i] = want[i-1].Argmax
	}
	for _, n := range q8Decodes {
		parts = parts[:0]
		for i := range n {
			parts = append(parts, part{id: kv.SeqID(i + 1), tokens: []int{last[i]}, start: pos[i], sample: true, needLogits: true})
		}
		got, want = ds.step(parts...), cs.step(parts...)
		compare(fmt.Sprintf("decode of %d", n), got, want)
		for i := range n {
			last[i] = want[i].Argmax
			pos[i]++
		}
	}
	if worst > tol {
		t.Errorf("%s: device vs CPU logits differ by %.3g on Q8_0 weights (tolerance %.0e%s)", dt, worst, tol, map[bool]string{true: " of the largest logit"}[rel])
	}
	if g == nil {
		return worst // a real GPU: its launches are not counted
	}
	// Every path ran: the GEMV's four row tiles, the dequantization, the
	// 8-bit embedding lookup, and never the float table's.
	sfx := b.dt.suffix
	for _, k := range []string{"q8_gemv1", "q8_gemv2", "q8_gemv4", "q8_gemv8", "q8_dequant", "embed_q8"} {
		if g.byName[k+sfx] == 0 {
			t.Errorf("%s never ran", k+sfx)
		}
	}
	if g.byName["embed"+sfx] != 0 {
		t.Errorf("the float embedding ran %d times with a Q8_0 table", g.byName["embed"+sfx])
	}
	return worst
}

// TestFakeGPUQ8_0 runs models quantized to Q8_0 (Model.Quantize: every
// matrix and the tied embedding, or the untied head) on the fake GPU, the
// weights kept 8-bit on the device, against the CPU backend's Q8_0 path:
// in float32 within q8Tolerance, in float16/bfloat16 within the GPU tests'
// relative tolerances, at decode batches of 1 to 20 rows and a prefill.
func TestFakeGPUQ8_0(t *testing.T) {
	for _, v := range q8Models {
		for _, dt := range []string{"float32", "float16", "bfloat16"} {
			t.Run(v.name+"/"+dt, func(t *testing.T) {
				if raceEnabled && (dt != "float32" || v.name == "gpt2") {
					t.Skip("under the race detector (slow Go emulation) only qwen3 and llama3 in float32; all run without it")
				}
				worst := checkQ8MatchesCPU(t, fakeQ8Device, quantized(t, v.model(t)), dt)
				t.Logf("max |fake GPU - CPU| logit on Q8_0 weights: %.3g", worst)
			})
		}
	}
	// A scratch smaller than the LM head: the head's prefill product runs
	// in slices (here 128, 128 and 44 vocabulary rows).
	t.Run("lm_head_slices", func(t *testing.T) {
		defer func(n int) { q8ScratchRows = n }(q8ScratchRows)
		q8ScratchRows = 64
		m := quantized(t, smallLlama(t, "llama3"))
		b, _ := newFakeBackend(t, m, Options{DType: "float32"}, 4)
		if rows := b.dqElems / m.Config.Hidden; rows >= m.Config.VocabSize {
			t.Fatalf("scratch holds %d rows of the %d-row head", rows, m.Config.VocabSize)
		}
		worst := checkQ8MatchesCPU(t, fakeQ8Device, m, "float32")
		t.Logf("max |fake GPU - CPU| logit with the head in slices: %.3g", worst)
	})
}

// TestFakeGPUQ8_0Memory: the device holds the Q8_0 bytes, not float16
// ones: the weights' allocation of a Q8_0 model is about 1.0625/2 of the
// float16 model's, the quants and scales on the device are the blocks'
// own, and the prefill's scratch is one projection group.
func TestFakeGPUQ8_0Memory(t *testing.T) {
	cfg := model.Config{
		Arch: model.ArchQwen2, Architecture: "Qwen2ForCausalLM",
		VocabSize: 2048, Hidden: 256, Layers: 2, Heads: 8, KVHeads: 2, HeadDim: 32, Intermediate: 768, MaxPositions: 256,
		Norm: model.RMSNorm, NormEps: 1e-6, Rotary: true, RopeTheta: 1e4, MLP: model.MLPGated, Activation: model.SiLU,
		TiedEmbeddings: true, QKVBias: true, BOSTokenID: -1, AttnScale: 1 / math.Sqrt(32),
	}
	newModel := func() *model.Model {
		m, err := model.NewRandom("q8mem", cfg, model.RandomOptions{Seed: 3, Std: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fm := newModel()
	f16, _ := newFakeBackend(t, fm, Options{DType: "float16"}, 4)
	qm := quantized(t, newModel())
	q8, g := newFakeBackend(t, qm, Options{DType: "float16"}, 4)
	if !q8.Q8_0() || f16.Q8_0() {
		t.Fatalf("Q8_0(): %v for the Q8_0 model, %v for the float16 one", q8.Q8_0(), f16.Q8_0())
	}
	ratio := float64(q8.WeightBytes()) / float64(f16.WeightBytes())
	t.Logf("weights on the device: float16 %d bytes, Q8_0 %d bytes (%.3f of float16's; 1.0625/2 = 0.531), Q8_0 prefill scratch %d bytes",
		f16.WeightBytes(), q8.WeightBytes(), ratio, q8.DequantScratchBytes())
	if ratio > 0.56 || ratio < 0.5 {
		t.Errorf("Q8_0 weights take %.3f of float16's device memory, want about 0.53", ratio)
	}
	// The largest group (gate and up), or a slice of the head if larger.
	scratch := 2 * max(2*cfg.Intermediate*cfg.Hidden, min(cfg.VocabSize, q8ScratchRows)*cfg.Hidden)
	if q8.DequantScratchBytes() != scratch || f16.DequantScratchBytes() != 0 {
		t.Errorf("dequantization scratch %d bytes (float16 model %d), want one matrix's %d", q8.DequantScratchBytes(), f16.DequantScratchBytes(), scratch)
	}
	// The device's quants and scales are the blocks' own bytes, the group's
	// matrices stacked: layer 1's q, k and v, and the token table.
	check := func(name string, q, s DevicePtr, parts ...tensor.Tensor) {
		t.Helper()
		var blocks []byte
		for _, p := range parts {
			blocks = append(blocks, p.Q8_0Blocks()...)
		}
		nb := len(blocks) / tensor.Q8_0BlockBytes
		quants, scales := g.bytes(q, nb*32), g.bytes(s, nb*2)
		for k := range nb {
			blk := blocks[k*tensor.Q8_0BlockBytes:]
			if scales[2*k] != blk[0] || scales[2*k+1] != blk[1] || string(quants[32*k:32*k+32]) != string(blk[2:34]) {
				t.Fatalf("%s: block %d on the device differs from the model's", name, k)
			}
		}
	}
	l := &qm.Weights.Layers[1]
	dl := &q8.w.layers[1]
	check("layer 1 q/k/v", dl.qkv.w, dl.qkv.scales, l.QKV[0].W, l.QKV[1].W, l.QKV[2].W)
	check("token table", q8.w.embed, q8.w.embedScales, qm.Weights.Embed)
	if q8.w.lmHead != q8.w.embed || q8.w.lmHeadScales != q8.w.embedScales {
		t.Error("the tied Q8_0 LM head is not the token table")
	}
}

// TestFakeGPUQ8_0Graphs: decode steps replayed from CUDA graphs equal eager
// ones on Q8_0 weights, at batch sizes through the GEMV (4, 3) and past it
// (20: dequantize and GEMM inside the graph).
func TestFakeGPUQ8_0Graphs(t *testing.T) {
	checkQ8Graphs(t, fakeQ8Device, "float32")
}

// checkQ8Graphs compares a graph backend with an eager one on a quantized
// Qwen3, decoding batches of 4, 3 and 20 sequences.
func checkQ8Graphs(t *testing.T, newDev newQ8Device, dt string) {
	m := quantized(t, smallLlama(t, "qwen3"))
	const blocks = 64
	eager, _ := newDev(t, m, Options{DType: dt}, blocks)
	gb, g := newDev(t, m, Options{DType: dt, CUDAGraphs: true}, blocks)
	es, gs := newStepper(t, eager, blocks), newStepper(t, gb, blocks)
	const seqs = 20
	last, pos := make([]int, seqs), make([]int, seqs)
	for i := range seqs {
		p := part{id: kvID(i), tokens: smallPrompts(300, 2+i%7)[0], sample: true}
		er, gr := es.step(p), gs.step(p)
		if er[0].Argmax != gr[0].Argmax {
			t.Fatalf("prefill %d: argmax %d vs %d", i, er[0].Argmax, gr[0].Argmax)
		}
		last[i], pos[i] = er[0].Argmax, len(p.tokens)
	}
	before := 0
	if g != nil {
		before = g.byName["q8_gemv4"+gb.dt.suffix]
	}
	worst := 0.0
	for step := range 12 {
		n := []int{4, 3, 20}[step%3]
		var parts []part
		for i := range n {
			parts = append(parts, part{id: kvID(i), tokens: []int{last[i]}, start: pos[i], sample: true, needLogits: true})
		}
		er, gr := es.step(parts...), gs.step(parts...)
		for i := range n {
			if er[i].Argmax != gr[i].Argmax {
				t.Fatalf("step %d seq %d: eager argmax %d, graph %d", step, i, er[i].Argmax, gr[i].Argmax)
			}
			for v := range er[i].Logits {
				worst = max(worst, math.Abs(float64(er[i].Logits[v]-gr[i].Logits[v])))
			}
			last[i] = er[i].Argmax
			pos[i]++
		}
	}
	if gb.graphsOff || len(gb.graphs) != 3 {
		t.Errorf("graphs off=%v, %d captured; want 3 sizes captured", gb.graphsOff, len(gb.graphs))
	}
	if g != nil && g.byName["q8_gemv4"+gb.dt.suffix] == before {
		t.Error("no q8_gemv4 launch was captured")
	}
	if worst != 0 {
		t.Errorf("graph vs eager logits differ by %.3g on Q8_0 weights", worst)
	}
}

// q8Reference is out[r][n] = Σ_k d·q·x in float64 for the test matrices of
// the kernel checks below.
func q8Reference(quants []int8, scales []uint16, x []float32, M, K, N int) []float64 {
	out := make([]float64, M*N)
	for r := range M {
		for n := range N {
			var acc float64
			for k := range K {
				w := float64(f16ToF32(scales[(n*K+k)/32])) * float64(quants[n*K+k])
				acc += w * float64(x[r*K+k])
			}
			out[r*N+n] = acc
		}
	}
	return out
}

// TestEmuQ8Gemv runs the CUDA C q8_gemv on the host emulator for shapes the
// small models do not reach: K of 1,056 (66 chunks: three warps, the last
// partly idle) and 4,128 (258 chunks: 256 threads, two of them taking a
// second chunk), N of 13 (a block with outputs past N) and every M from 1
// to 16 through each row tile, in float32 against a float64 reference, in
// both thread orders; and q8_dequant, exactly.
func TestEmuQ8Gemv(t *testing.T) {
	if raceEnabled {
		t.Skip("the CUDA C's arithmetic alone: the race detector adds nothing here; runs without it")
	}
	for _, K := range []int{1056, 4128} {
		t.Run(fmt.Sprint("K=", K), func(t *testing.T) { checkEmuQ8Gemv(t, K) })
	}
}

func checkEmuQ8Gemv(t *testing.T, K int) {
	e := loadEmu(t)
	const N = 13
	r := rand.New(rand.NewPCG(5, uint64(K)))
	quants := make([]int8, N*K)
	scales := make([]uint16, N*K/32)
	for i := range quants {
		quants[i] = int8(r.IntN(256) - 128)
	}
	for i := range scales {
		scales[i] = f32ToF16(float32(r.Float64()*0.02 + 0.001))
	}
	g := newFakeGPU(t)
	g.emu = e
	dq, ds := g.alloc(len(quants)), g.alloc(2*len(scales))
	defer g.freePtr(dq)
	defer g.freePtr(ds)
	copy(g.bytes(dq, len(quants)), unsafe.Slice((*byte)(unsafe.Pointer(&quants[0])), len(quants)))
	copy(g.bytes(ds, 2*len(scales)), unsafe.Slice((*byte)(unsafe.Pointer(&scales[0])), 2*len(scales)))
	for M := 1; M <= q8GemvMaxRows; M++ {
		x := make([]float32, M*K)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		want := q8Reference(quants, scales, x, M, K, N)
		in, out := g.alloc(4*len(x)), g.alloc(4*M*N)
		copy(g.bytes(in, 4*len(x)), unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)))
		k, grid, block := q8GemvLaunch(M, K, N)
		R := q8GemvRows[k]
		for _, rev := range []bool{false, true} {
			args := []uint64{uint64(out), uint64(in), uint64(dq), uint64(ds), uint64(M), uint64(K), N}
			if err := e.launch(fmt.Sprintf("q8_gemv%d_f32", R), grid, block, 0, args, rev); err != nil {
				t.Fatal(err)
			}
			got := unsafe.Slice((*float32)(unsafe.Pointer(&g.bytes(out, 4*M*N)[0])), M*N)
			for i := range want {
				if d := math.Abs(float64(got[i]) - want[i]); d > 1e-4*max(1, math.Abs(want[i])) {
					t.Fatalf("M=%d (tile %d, block %d, reverse %v): out[%d] = %g, want %g", M, R, block[0], rev, i, got[i], want[i])
				}
			}
		}
		g.freePtr(in)
		g.freePtr(out)
	}
	// q8_dequant over the same matrix: exact (every int8, -128 included).
	out := g.alloc(4 * N * K)
	defer g.freePtr(out)
	if err := e.launch("q8_dequant_f32", [3]uint32{3, 1, 1}, [3]uint32{256, 1, 1}, 0, []uint64{uint64(out), uint64(dq), uint64(ds), uint64(N * K / 16)}, false); err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice((*float32)(unsafe.Pointer(&g.bytes(out, 4*N*K)[0])), N*K)
	for i := range got {
		if want := f16ToF32(scales[i/32]) * float32(quants[i]); got[i] != want {
			t.Fatalf("dequantized weight %d: %g, want %g", i, got[i], want)
		}
	}
}

// TestEmuQ8_0 runs the Q8_0 checks on the CUDA C: the quantized GPT-2,
// Qwen3 and Llama 3 against the CPU backend in every storage type, and
// graph replays against eager steps. Under the race detector, which
// checks the Go around the kernels, only the Qwen3 in float32 and
// bfloat16 (every Q8_0 kernel still runs).
func TestEmuQ8_0(t *testing.T) {
	for _, v := range q8Models {
		for _, dt := range []string{"float32", "float16", "bfloat16"} {
			t.Run(v.name+"/"+dt, func(t *testing.T) {
				if raceEnabled && (v.name != "qwen3" || dt == "float16") {
					t.Skip("under the race detector only qwen3 in float32 and bfloat16; all run without it")
				}
				worst := checkQ8MatchesCPU(t, emuQ8Device, quantized(t, v.model(t)), dt)
				t.Logf("max |CUDA C - CPU| logit on Q8_0 weights: %.3g", worst)
			})
		}
	}
	t.Run("graphs", func(t *testing.T) { checkQ8Graphs(t, emuQ8Device, "bfloat16") })
}

// TestEmuQ8_0ThreadOrder: the Q8_0 kernels give bit-identical logits with
// each block's threads (and the blocks) in forward and reverse order.
func TestEmuQ8_0ThreadOrder(t *testing.T) {
	m := quantized(t, smallLlama(t, "qwen3"))
	const blocks = 40
	for _, dt := range []string{"float32", "bfloat16"} {
		t.Run(dt, func(t *testing.T) {
			if raceEnabled && dt != "float32" {
				t.Skip("float32 only under the race detector; both run without it")
			}
			fwd, _ := newEmuBackendOrder(t, m, Options{DType: dt}, blocks, false)
			rev, _ := newEmuBackendOrder(t, m, Options{DType: dt}, blocks, true)
			if worst := compareMixed(t, fwd, rev, smallPrompts(300, 1, 17, 40, 5, 33), blocks, 7, 5); worst != 0 {
				t.Errorf("forward and reverse thread order differ by %.3g", worst)
			}
		})
	}
}

// TestGPUQ8_0 runs the Q8_0 checks on a GPU (the device check runs every
// TestGPU test): the small quantized models against the CPU backend in
// every storage type, graph replays, and the built-in qwen2.5-0.5b-random
// quantized to Q8_0 against the CPU backend's Q8_0 path in float32 (decode
// rows through q8_gemv, 16-token prefill chunks through the dequantized
// GEMMs, the 151,936-row LM head in slices).
func TestGPUQ8_0(t *testing.T) {
	gpuOrSkip(t)
	for _, v := range q8Models {
		for _, dt := range []string{"float32", "float16", "bfloat16"} {
			t.Run(v.name+"/"+dt, func(t *testing.T) {
				worst := checkQ8MatchesCPU(t, gpuQ8Device, quantized(t, v.model(t)), dt)
				t.Logf("max |device - CPU| logit on Q8_0 weights: %.3g", worst)
			})
		}
	}
	t.Run("graphs", func(t *testing.T) { checkQ8Graphs(t, gpuQ8Device, "bfloat16") })
	t.Run("qwen2.5-0.5b", func(t *testing.T) {
		m, err := model.Builtin(model.BuiltinQwen05B)
		if err != nil {
			t.Fatal(err)
		}
		m = quantized(t, m)
		const blocks = 16
		gb := newGPUOpts(t, m, Options{DType: "float32"}, blocks)
		cb := cpuBackend(t, m, blocks)
		worst := compareMixed(t, gb, cb, smallPrompts(m.Config.VocabSize, 40, 7), blocks, 16, 3)
		tol, _ := q8Tolerance("float32")
		tol = max(tol, decoderTol)
		if worst > tol {
			t.Errorf("max |device - CPU| logit %.3g over %.0e on Q8_0 weights", worst, tol)
		}
		t.Logf("qwen2.5-0.5b-random Q8_0: weights %d MiB on the device, scratch %d MiB; max |device float32 - CPU| logit %.3g",
			gb.WeightBytes()>>20, gb.DequantScratchBytes()>>20, worst)
	})
}
