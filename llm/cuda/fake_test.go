package cuda

import (
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/model"
)

// smallModel is a GPT-2 small enough for the fake GPU's Go emulation:
// vocabulary 300, width 32, 4 heads of 8, 2 layers, 128 positions.
func smallModel(t testing.TB, mutate func(*model.Config)) *model.Model {
	t.Helper()
	cfg := model.GPT2Config(300, 128, 32, 2, 4)
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := model.NewRandom("small", cfg, model.RandomOptions{Seed: 7, Std: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallLlama is a Llama-family model as small: vocabulary 300, width 32,
// 2 layers, RMSNorm, rotary positions (theta 10^4, 4096 positions), SwiGLU
// MLP of 64, with the choices of the architecture arch: Qwen2 (q/k/v
// biases, 4 query heads and 1 KV head of 8), Llama 3 (no biases, rope
// scaling that changes frequencies within the prompts, an untied LM head, 4
// query heads and 2 KV heads of 8), Llama with attention_bias and mlp_bias
// (biases on every projection), Qwen3 (per-head q/k norms, head_dim 16,
// not width/heads, 4 query heads and 2 KV heads).
func smallLlama(t testing.TB, arch string) *model.Model {
	t.Helper()
	c := model.Config{
		VocabSize: 300, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8, Intermediate: 64, MaxPositions: 4096,
		Norm: model.RMSNorm, NormEps: 1e-6, Rotary: true, RopeTheta: 1e4, MLP: model.MLPGated, Activation: model.SiLU,
		TiedEmbeddings: true, BOSTokenID: -1,
	}
	switch arch {
	case "qwen2":
		c.Arch, c.Architecture, c.KVHeads, c.QKVBias = model.ArchQwen2, "Qwen2ForCausalLM", 1, true
	case "llama3":
		c.Arch, c.Architecture, c.TiedEmbeddings = model.ArchLlama, "LlamaForCausalLM", false
		c.RopeScaling = model.Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 64}
	case "llama_biases":
		c.Arch, c.Architecture, c.QKVBias, c.OBias, c.MLPBias = model.ArchLlama, "LlamaForCausalLM", true, true, true
	case "qwen3":
		c.Arch, c.Architecture, c.HeadDim, c.QKNorm = model.ArchQwen3, "Qwen3ForCausalLM", 16, true
	default:
		t.Fatalf("smallLlama: unknown architecture %q", arch)
	}
	c.AttnScale = 1 / math.Sqrt(float64(c.HeadDim))
	m, err := model.NewRandom("small-"+arch, c, model.RandomOptions{Seed: 7, Std: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallLlamas are smallLlama's architectures.
var smallLlamas = []string{"qwen2", "llama3", "llama_biases", "qwen3"}

func smallPrompts(vocab int, lens ...int) [][]int {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([][]int, len(lens))
	for i, l := range lens {
		for range l {
			out[i] = append(out[i], r.IntN(vocab))
		}
	}
	return out
}

func cpuBackend(t testing.TB, m *model.Model, numBlocks int) *cpu.Backend {
	t.Helper()
	cb, err := cpu.New(m, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Close() })
	if err := cb.AllocateKV(numBlocks, 16); err != nil {
		t.Fatal(err)
	}
	return cb
}

// TestFakeGPUMatchesCPU runs the backend's real orchestration (metadata
// packing and copy, every launch with its arguments, the cuBLAS calls, the
// results copy and reordering) on the fake GPU, whose kernels and GEMMs are
// Go emulations, against the CPU backend on mixed batches: chunked
// prefills crossing block boundaries, decodes, rows with and without
// logits. In float32 the argmax must agree at every step and the logits
// closely; variants cover GPT-2's erf GELU and per-layer attention
// scaling, and every Llama-family choice (smallLlama): RMSNorm, RoPE with
// and without Llama 3 scaling, GQA, q/k/v, o and MLP biases or none, q/k
// norms, SwiGLU, an untied LM head.
func TestFakeGPUMatchesCPU(t *testing.T) {
	type variant struct {
		name  string
		model func(testing.TB) *model.Model
	}
	vs := []variant{
		{"gelu_new", func(t testing.TB) *model.Model { return smallModel(t, nil) }},
		{"gelu_erf", func(t testing.TB) *model.Model {
			return smallModel(t, func(c *model.Config) { c.Activation = model.GeluErf })
		}},
		{"inverse_layer_scaling", func(t testing.TB) *model.Model {
			return smallModel(t, func(c *model.Config) { c.ScaleAttnByInverseLayerIdx = true })
		}},
	}
	for _, arch := range smallLlamas {
		vs = append(vs, variant{arch, func(t testing.TB) *model.Model { return smallLlama(t, arch) }})
	}
	for i, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			if raceEnabled && i > 0 && v.name != "qwen3" {
				t.Skip("variants skipped under the race detector (slow emulation); GPT-2 and Qwen3 run")
			}
			m := v.model(t)
			const blocks = 40
			fb, g := newFakeBackend(t, m, Options{DType: "float32"}, blocks)
			cb := cpuBackend(t, m, blocks)
			prompts := smallPrompts(300, 1, 17, 40, 5, 33)
			worst := compareMixed(t, fb, cb, prompts, blocks, 7, 5)
			if worst > 1e-5 {
				t.Errorf("fake GPU vs CPU logits differ by %.3g", worst)
			}
			t.Logf("max |fake GPU - CPU| logit %.3g; %d kernel launches", worst, g.launches)
		})
	}
}

// TestFakeGPUHalf checks the float16 and bfloat16 paths' plumbing (storage
// sizes, conversions, GEMM data types) on the fake GPU: the argmax agrees
// with float32 where the float32 margin is clear, and logits stay within
// the GPU tests' tolerance relative to the largest logit.
func TestFakeGPUHalf(t *testing.T) {
	m := smallModel(t, nil)
	const blocks = 20
	ref, _ := newFakeBackend(t, m, Options{DType: "float32"}, blocks)
	rs := newStepper(t, ref, blocks)
	prompts := smallPrompts(300, 30, 9)
	var want [][]float32
	for i, p := range prompts {
		rows := rs.step(part{id: kvID(i), tokens: p, sample: true, needLogits: true})
		want = append(want, rows[0].Logits)
	}
	for _, dt := range []struct {
		name string
		rel  float64
	}{{"float16", tolFloat16Rel}, {"bfloat16", tolBFloat16Rel}} {
		t.Run(dt.name, func(t *testing.T) {
			hb, _ := newFakeBackend(t, m, Options{DType: dt.name}, blocks)
			if hb.KVBytesPerBlock(16) != ref.KVBytesPerBlock(16)/2 {
				t.Errorf("KV block %d bytes, want half of float32's %d", hb.KVBytesPerBlock(16), ref.KVBytesPerBlock(16))
			}
			hs := newStepper(t, hb, blocks)
			worst := 0.0
			for i, p := range prompts {
				rows := hs.step(part{id: kvID(i), tokens: p, sample: true, needLogits: true})
				scale := 0.0
				for _, v := range want[i] {
					scale = max(scale, abs64(float64(v)))
				}
				for v := range want[i] {
					worst = max(worst, abs64(float64(rows[0].Logits[v]-want[i][v]))/scale)
				}
			}
			if worst > dt.rel {
				t.Errorf("relative logit error %.3g over %.0e", worst, dt.rel)
			}
			t.Logf("max relative |%s - float32| on the fake GPU: %.3g", dt.name, worst)
		})
	}
}

// TestFakeGPUGraphs: with CUDA graphs on, decode-only steps are captured
// once per batch size (after one eager run) and replayed; the results equal
// an eager backend's exactly, a step that is not decode-only runs eagerly,
// and a reallocation of the step buffers drops the graphs.
func TestFakeGPUGraphs(t *testing.T) {
	m := smallModel(t, nil)
	const blocks = 40
	eager, _ := newFakeBackend(t, m, Options{DType: "float32"}, blocks)
	gb, g := newFakeBackend(t, m, Options{DType: "float32", CUDAGraphs: true}, blocks)
	es, gs := newStepper(t, eager, blocks), newStepper(t, gb, blocks)
	prompts := smallPrompts(300, 20, 3, 9)
	last := make([]int, len(prompts))
	pos := make([]int, len(prompts))
	for i, p := range prompts {
		pp := part{id: kvID(i), tokens: p, sample: true}
		er, gr := es.step(pp), gs.step(pp)
		if er[0].Argmax != gr[0].Argmax {
			t.Fatalf("prefill %d differs", i)
		}
		last[i], pos[i] = er[0].Argmax, len(p)
	}
	for step := range 12 {
		n := len(prompts)
		if step >= 6 {
			n-- // a sequence finished: a second batch size
		}
		var parts []part
		for i := range n {
			parts = append(parts, part{id: kvID(i), tokens: []int{last[i]}, start: pos[i], sample: true, needLogits: step%4 == 1})
		}
		before := g.launches
		er, gr := es.step(parts...), gs.step(parts...)
		replayed := g.launches == before
		if wantReplay := step%6 >= 2; replayed != wantReplay {
			t.Errorf("step %d: replayed=%v, want %v", step, replayed, wantReplay)
		}
		for i := range n {
			if er[i].Argmax != gr[i].Argmax {
				t.Fatalf("step %d seq %d: argmax %d eager, %d graph", step, i, er[i].Argmax, gr[i].Argmax)
			}
			for v := range er[i].Logits {
				if er[i].Logits[v] != gr[i].Logits[v] {
					t.Fatalf("step %d seq %d: logit %d differs", step, i, v)
				}
			}
			last[i] = er[i].Argmax
			pos[i]++
		}
	}
	if len(gb.graphs) != 2 || gb.graphsOff {
		t.Errorf("%d graphs (off=%v), want 2", len(gb.graphs), gb.graphsOff)
	}
	// A prefill of more rows than the buffers hold reallocates them.
	gs.step(part{id: kvID(9), tokens: smallPrompts(300, 100)[0], sample: true})
	if len(gb.graphs) != 0 || len(g.graphs) != 0 {
		t.Errorf("graphs survived a reallocation: %d (%d on the device)", len(gb.graphs), len(g.graphs))
	}
}

// TestFakeGPUSizing: MaxKVBlocks from NumBlocks or the memory fraction.
func TestFakeGPUSizing(t *testing.T) {
	m := smallModel(t, nil)
	b, g := newFakeBackend(t, m, Options{DType: "float16"}, 4)
	per := b.KVBytesPerBlock(16) // 2 layers * 2 * 16 * 32 * 2 bytes
	if per != 4096 {
		t.Fatalf("KVBytesPerBlock = %d, want 4096", per)
	}
	g.free = 2 << 30
	n, err := b.MaxKVBlocks(16)
	free := float64(2 << 30)
	want := int((int64(free*0.9) - activationReserve) / per)
	if err != nil || n != want {
		t.Errorf("MaxKVBlocks = %d, %v; want %d", n, err, want)
	}
	b.opts.GPUMemoryUtilization = 0.5
	g.free = 1 << 30
	if n, err := b.MaxKVBlocks(16); err == nil {
		t.Errorf("0.5 of 1 GiB less the 512 MiB reserve gave %d blocks, want an error", n)
	}
	b.opts.NumBlocks = 77
	if n, err := b.MaxKVBlocks(16); err != nil || n != 77 {
		t.Errorf("NumBlocks: %d, %v", n, err)
	}
	if _, err := b.MaxKVBlocks(0); err == nil {
		t.Error("block size 0 accepted")
	}
	// The kernels index cache slots with 32-bit ints: however much memory
	// is free, no pool has more.
	b.opts.NumBlocks, b.opts.GPUMemoryUtilization, g.free = 0, 1, 1<<62
	if n, err := b.MaxKVBlocks(16); err != nil || int64(n)*16 > math.MaxInt32 || n < math.MaxInt32/16-1 {
		t.Errorf("MaxKVBlocks with 4 EiB free: %d, %v; want the %d blocks 32-bit slots allow", n, err, math.MaxInt32/16)
	}
	if err := b.AllocateKV(math.MaxInt32/16+1, 16); err == nil || !strings.Contains(err.Error(), "slots") {
		t.Errorf("AllocateKV past 2^31 slots: %v", err)
	}
}

// TestFakeGPUErrors: bad batches are rejected before anything is queued,
// and a closed backend refuses work.
func TestFakeGPUErrors(t *testing.T) {
	m := smallModel(t, nil)
	b, g := newFakeBackend(t, m, Options{DType: "float32"}, 4)
	s := newStepper(t, b, 4)
	_ = s
	before := g.launches
	bad := []part{{id: 1, tokens: []int{300}, sample: true}}
	if _, err := b.Forward(batchOf(s, bad...)); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
	if g.launches != before {
		t.Error("a rejected batch launched kernels")
	}

	// A launch that fails in the middle of a step: Forward returns the
	// error only once the stream has drained, so the next step cannot
	// rewrite metadata that work queued before the failure still reads.
	syncs, launches := 0, 0 // syncs counts those after the failure
	sync, launch := b.drv.streamSync, b.drv.launchKernel
	b.drv.streamSync = func(st Stream) int32 {
		if launches >= 3 {
			syncs++
		}
		return sync(st)
	}
	b.drv.launchKernel = func(f Function, gx, gy, gz, bx, by, bz, shared uint32, st Stream, params, extra unsafe.Pointer) int32 {
		if launches++; launches == 3 {
			return 1 // CUDA_ERROR_INVALID_VALUE
		}
		return launch(f, gx, gy, gz, bx, by, bz, shared, st, params, extra)
	}
	if _, err := b.Forward(batchOf(s, part{id: 3, tokens: []int{1, 2}, sample: true})); err == nil {
		t.Error("a failed launch went unreported")
	}
	if syncs != 1 {
		t.Errorf("the stream was synchronised %d times after a failed launch, want 1", syncs)
	}
	b.drv.streamSync, b.drv.launchKernel = sync, launch

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Forward(batchOf(s, part{id: 2, tokens: []int{1}, sample: true})); err == nil {
		t.Error("Forward after Close succeeded")
	}
}

// TestFakeGPUBFloat16NeedsAmpere: before compute capability 8.0 cuBLAS
// refuses bfloat16 GEMMs, so the backend refuses the dtype at start.
func TestFakeGPUBFloat16NeedsAmpere(t *testing.T) {
	m := smallModel(t, nil)
	g := newFakeGPU(t)
	g.cc = [2]int32{7, 5}
	dt, err := parseDType("bfloat16")
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{m: m, cfg: m.Config, opts: Options{CacheDir: fakeCache(t)}, dt: dt, log: slog.New(slog.DiscardHandler), drv: g.driver()}
	err = b.setup(func(int) (*NVRTC, *CuBLAS, error) { return fakeNVRTC(), g.blas(), nil })
	b.release()
	if err == nil || !strings.Contains(err.Error(), "bfloat16 needs compute capability 8.0") || !strings.Contains(err.Error(), "7.5") {
		t.Errorf("bfloat16 on sm_75: error %v", err)
	}
}

// TestFakeGPURefusedCacheIsRecompiled: when the driver refuses a cached
// kernel image, the cache entry is dropped and the kernels recompiled
// (here the fake NVRTC cannot compile, so the error says so).
func TestFakeGPURefusedCacheIsRecompiled(t *testing.T) {
	m := smallModel(t, nil)
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := newFakeGPU(t)
	drv := g.driver()
	drv.moduleLoadData = func(*Module, unsafe.Pointer) int32 { return cudaErrorNoBinary }
	dir := fakeCache(t)
	b := &Backend{m: m, cfg: cfg, opts: Options{CacheDir: dir}, dt: dtFloat32, log: slog.New(slog.NewTextHandler(io.Discard, nil)), drv: drv}
	err := b.setup(func(int) (*NVRTC, *CuBLAS, error) { return fakeNVRTC(), g.blas(), nil })
	if rerr := b.release(); rerr != nil {
		t.Error(rerr)
	}
	if err == nil || !strings.Contains(err.Error(), "compiling the kernels") {
		t.Fatalf("error %v, want a recompile failure", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, CacheKey(KernelSource(), 90, fakeNVRTCVersion)+".cubin")); !os.IsNotExist(serr) {
		t.Errorf("the refused image is still cached (%v)", serr)
	}
	if len(g.allocs) != 0 {
		t.Errorf("%d allocations left", len(g.allocs))
	}
}

// TestFakeGPUCuBLASWorkspace: the backend gives cuBLAS a workspace of its
// own (32 MiB on the fake sm_90), so captured GEMMs need no allocation; a
// cuBLAS without cublasSetWorkspace gets none, and nothing leaks (the
// cleanup checks every allocation is freed).
func TestFakeGPUCuBLASWorkspace(t *testing.T) {
	m := smallModel(t, nil)
	_, g := newFakeBackend(t, m, Options{DType: "float16"}, 4)
	if g.workspace == 0 {
		t.Fatal("no cublasSetWorkspace call")
	}
	for _, a := range g.allocs {
		if a.base == g.workspace && len(a.data) != 32<<20 {
			t.Errorf("workspace of %d bytes, want 32 MiB", len(a.data))
		}
	}

	g2 := newFakeGPU(t)
	blas := g2.blas()
	blas.setWorkspace = nil
	cfg := m.Config
	dt, _ := parseDType("float16")
	b := &Backend{m: m, cfg: cfg, opts: Options{DType: "float16", CacheDir: fakeCache(t)}, dt: dt, log: slog.New(slog.NewTextHandler(io.Discard, nil)), drv: g2.driver()}
	if err := b.setup(func(int) (*NVRTC, *CuBLAS, error) { return fakeNVRTC(), blas, nil }); err != nil {
		t.Fatal(err)
	}
	if b.blasWS != 0 {
		t.Error("a workspace was kept for a cuBLAS that cannot use it")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(g2.allocs) != 0 {
		t.Errorf("%d allocations left after Close", len(g2.allocs))
	}
}

// TestFakeGPULaunchesPerStep pins the kernel launches of a step that
// samples: embedding, the first LayerNorm, five per layer (QKV bias and
// cache write, attention, residual + LayerNorm twice, bias + GELU; the
// last layer's second residual stands alone), the final LayerNorm and the
// argmax, 4 + 5L; and the GEMMs, 4 per layer and the LM head. A step that
// samples nothing skips the last three.
func TestFakeGPULaunchesPerStep(t *testing.T) {
	m := smallModel(t, nil)
	L := m.Config.Layers
	b, g := newFakeBackend(t, m, Options{DType: "float32"}, 8)
	s := newStepper(t, b, 8)
	gemms := 0
	inner := g.blas()
	blas := *inner
	blas.gemmEx = func(h uintptr, ta, tb int32, mm, n, k int32, alpha unsafe.Pointer, A DevicePtr, atype int32, lda int32, B DevicePtr, btype int32, ldb int32, beta unsafe.Pointer, Cp DevicePtr, ctype int32, ldc int32, compute int32, algo int32) int32 {
		gemms++
		return inner.gemmEx(h, ta, tb, mm, n, k, alpha, A, atype, lda, B, btype, ldb, beta, Cp, ctype, ldc, compute, algo)
	}
	blas.handle, blas.compute = b.blas.handle, b.blas.compute
	b.blas = &blas
	prompt := smallPrompts(300, 20)[0]
	before := g.launches
	s.step(part{id: kvID(0), tokens: prompt[:10], sample: false})
	if got, want := g.launches-before, 1+1+5*L; got != want || gemms != 4*L {
		t.Errorf("step without sampling: %d launches and %d GEMMs, want %d and %d", got, gemms, want, 4*L)
	}
	before, gemms = g.launches, 0
	s.step(part{id: kvID(0), tokens: prompt[10:], start: 10, sample: true})
	if got, want := g.launches-before, 4+5*L; got != want || gemms != 4*L+1 {
		t.Errorf("sampling step: %d launches and %d GEMMs, want %d and %d", got, gemms, want, 4*L+1)
	}
}

// TestFakeGPUProfileCountsOnlyWholeSteps: a step that fails part-way, or
// before the profiler began it, is an error to collect and adds nothing;
// with CUDA graphs on, profiled steps run eagerly, one begin each.
func TestFakeGPUProfileCountsOnlyWholeSteps(t *testing.T) {
	m := smallModel(t, nil)
	b, _ := newFakeBackend(t, m, Options{DType: "float32", CUDAGraphs: true}, 4*64)
	batch := decodeBatch(t, b, m.Config.VocabSize, 4, 32, 64)
	p := newProfiler(b, 0)
	b.prof = p
	defer func() { b.prof = nil; p.release() }()
	for range 3 { // graphs would be captured from the second step on
		if _, err := b.Forward(batch); err != nil {
			t.Fatal(err)
		}
		if err := p.collect(); err != nil {
			t.Fatal(err)
		}
	}
	if p.steps != 3 || p.calls["embed"] != 3 {
		t.Fatalf("3 steps: steps %d, embed launches %d", p.steps, p.calls["embed"])
	}
	launch := b.drv.launchKernel
	k := 0
	b.drv.launchKernel = func(f Function, gx, gy, gz, bx, by, bz, shared uint32, s Stream, params, extra unsafe.Pointer) int32 {
		if k++; k == 5 {
			return 1 // CUDA_ERROR_INVALID_VALUE
		}
		return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra)
	}
	if _, err := b.Forward(batch); err == nil {
		t.Fatal("the step did not fail")
	}
	b.drv.launchKernel = launch
	if err := p.collect(); err == nil || p.steps != 3 {
		t.Errorf("after a failed step: collect %v, steps %d", err, p.steps)
	}
	copyIn := b.drv.memcpyHtoD
	b.drv.memcpyHtoD = func(DevicePtr, unsafe.Pointer, uint64, Stream) int32 { return 1 }
	if _, err := b.Forward(batch); err == nil {
		t.Fatal("the step did not fail")
	}
	b.drv.memcpyHtoD = copyIn
	if err := p.collect(); err == nil || p.steps != 3 {
		t.Errorf("after a step that failed before it began: collect %v, steps %d", err, p.steps)
	}
	if err := p.collect(); err == nil {
		t.Error("collect without a step succeeded")
	}
}

// TestGraphStride: a graph step's block tables are packed with the next
// power of two of blocks from 16 on, capped at the full context, so that a
// graph serves every step until the longest context doubles.
func TestGraphStride(t *testing.T) {
	for _, c := range []struct{ need, maxStride, want int }{
		{1, 2048, 16}, {16, 2048, 16}, {17, 2048, 32}, {300, 2048, 512}, {2048, 2048, 2048}, {5, 8, 8}, {1500, 1600, 1600},
	} {
		if got := graphStride(c.need, c.maxStride); got != c.want {
			t.Errorf("graphStride(%d, %d) = %d, want %d", c.need, c.maxStride, got, c.want)
		}
	}
}

// TestFakeGPUGraphsAcrossStrides: a decode graph's block-table stride
// covers the longest context to the next power of two; when a context
// outgrows it, the next steps pack a wider stride, run once eagerly and are
// captured anew, and every step still equals an eager backend's.
func TestFakeGPUGraphsAcrossStrides(t *testing.T) {
	m := smallLlama(t, "qwen3")
	const blocks = 20
	eager, _ := newFakeBackend(t, m, Options{DType: "float32"}, blocks)
	gb, _ := newFakeBackend(t, m, Options{DType: "float32", CUDAGraphs: true}, blocks)
	es, gs := newStepper(t, eager, blocks), newStepper(t, gb, blocks)
	prompt := smallPrompts(300, 250)[0]
	p := part{id: kvID(0), tokens: prompt, sample: true}
	last, pos := es.step(p)[0].Argmax, len(prompt)
	gs.step(p)
	for range 10 { // positions 250..259: 16 blocks, then 17
		d := part{id: kvID(0), tokens: []int{last}, start: pos, sample: true, needLogits: true}
		er, gr := es.step(d), gs.step(d)
		if er[0].Argmax != gr[0].Argmax || !slices.Equal(er[0].Logits, gr[0].Logits) {
			t.Fatalf("position %d: graph step differs from eager", pos)
		}
		last, pos = er[0].Argmax, pos+1
	}
	keys := slices.Collect(maps.Keys(gb.graphs))
	slices.SortFunc(keys, func(a, b graphKey) int { return a.stride - b.stride })
	if want := []graphKey{{1, 1, 16, false}, {1, 1, 32, false}}; !slices.Equal(keys, want) || gb.graphsOff {
		t.Errorf("graphs %v (off=%v), want %v", keys, gb.graphsOff, want)
	}
}
