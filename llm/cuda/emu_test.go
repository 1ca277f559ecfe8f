package cuda

// The host emulator: kernels/decoder.cu itself, compiled by g++ against a
// small CUDA shim (testdata/emu) and run on the fake GPU with real memory.
// Where the Go emulation in fakegpu_test.go checks the backend's plumbing
// against the kernels' documented semantics, this runs the CUDA C source:
// its indexing, block-table paging, causal masking, reductions, barriers
// and the conversions it writes by hand. The GEMMs stay emulated (a plain
// C++ loop in emu.cc); nothing here says how fast a GPU runs, and libm's
// expf/tanhf/erff may differ from CUDA's in the last bits.
//
// It needs a C++ compiler (g++, or $CXX) and linux/amd64; elsewhere the
// tests skip and say so.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// cudaEmu is one build of the emulator: emu.cc with a kernel source.
type cudaEmu struct {
	// kernelArgs returns the number of parameters of kernel name, or -1
	// when the module has none of that name.
	kernelArgs func(name string) int32
	launchC    func(name string, gx, gy, gz, bx, by, bz, shared uint32, args unsafe.Pointer, nargs, reverse int32, err *byte, errLen int32) int32
	// gemm is cublasGemmEx's computation (column-major, float64 sums
	// unless setGemmOrder says otherwise).
	gemm func(ta, tb, m, n, k int32, alpha float32, A uintptr, atype, lda int32, B uintptr, btype, ldb int32, beta float32, C uintptr, ctype, ldc int32)
	// setGemmOrder sets how gemm sums: one of the emuGemm constants.
	setGemmOrder func(order int32)
}

// The emulator's GEMM summation orders (emu_api.h's TS_EMU_GEMM_*).
const (
	emuGemmFloat64 int32 = iota
	emuGemmFloat32
	emuGemmFloat32SplitK
)

// errNoEmulator marks the reasons to skip: no compiler or another platform.
var errNoEmulator = errors.New("no host emulator for the CUDA kernels")

// compileEmu compiles emu.cc with kernel source src (registering the
// kernels named), and the driver, cuBLAS and NVRTC entry points when
// withDriver is set, into a shared library in dir and returns its path.
// defines are extra -D macros (driver.cc's variants).
func compileEmu(dir, src string, names []string, withDriver bool, defines ...string) (string, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return "", fmt.Errorf("%w on %s/%s (its fiber switch is x86-64 assembly)", errNoEmulator, runtime.GOOS, runtime.GOARCH)
	}
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	path, err := exec.LookPath(cxx)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoEmulator, err)
	}
	shim, err := filepath.Abs(filepath.Join("testdata", "emu"))
	if err != nil {
		return "", err
	}
	var inc strings.Builder
	for _, n := range names {
		fmt.Fprintf(&inc, "TS_EMU_KERNEL(%s)\n", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.inc"), []byte(inc.String()), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, kernelFile), []byte(src), 0o644); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libtinyserve_cuda_emu.so")
	args := []string{"-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I" + dir, "-I" + shim, "-o", lib, filepath.Join(shim, "emu.cc")}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	if withDriver {
		for _, f := range []string{"driver.cc", "blas.cc", "nvrtc.cc"} {
			args = append(args, filepath.Join(shim, f))
		}
	}
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling the CUDA emulator: %v\n%s", err, out)
	}
	return lib, nil
}

// buildEmu compiles the emulator for src and names and opens it.
func buildEmu(src string, names []string) (*cudaEmu, error) {
	dir, err := os.MkdirTemp("", "tinyserve-cuda-emu")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // an opened library stays mapped
	lib, err := compileEmu(dir, src, names, false)
	if err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	e := &cudaEmu{}
	purego.RegisterLibFunc(&e.kernelArgs, h, "ts_emu_kernel_args")
	purego.RegisterLibFunc(&e.launchC, h, "ts_emu_launch")
	purego.RegisterLibFunc(&e.gemm, h, "ts_emu_gemm")
	purego.RegisterLibFunc(&e.setGemmOrder, h, "ts_emu_set_gemm_order")
	return e, nil
}

var (
	emuOnce sync.Once
	emuLib  *cudaEmu
	emuErr  error
)

// loadEmu returns the emulator of the embedded kernels, built once per test
// binary, or skips the test where it cannot be built.
func loadEmu(t testing.TB) *cudaEmu {
	t.Helper()
	emuOnce.Do(func() { emuLib, emuErr = buildEmu(KernelSource(), kernelNames()) })
	if errors.Is(emuErr, errNoEmulator) {
		t.Skipf("%v", emuErr)
	}
	if emuErr != nil {
		t.Fatal(emuErr)
	}
	return emuLib
}

// launch runs kernel name over grid now; args are the parameter values,
// one 8-byte slot each as cuLaunchKernel reads them. args holds no Go
// pointers and the call keeps none, so passing it is safe.
func (e *cudaEmu) launch(name string, grid, block [3]uint32, shared uint32, args []uint64, reverse bool) error {
	var msg [256]byte
	rev := int32(0)
	if reverse {
		rev = 1
	}
	if e.launchC(name, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared,
		unsafe.Pointer(&args[0]), int32(len(args)), rev, &msg[0], int32(len(msg))) != 0 {
		n := slices.Index(msg[:], 0)
		return fmt.Errorf("emulated %s: %s", name, msg[:max(n, 0)])
	}
	return nil
}

// allocMapped gives the emulator real device memory: an anonymous mapping
// whose data ends (within 16 bytes, keeping 16-byte alignment) at a
// PROT_NONE page, so that a kernel running past the end of a buffer
// crashes the test instead of reading a neighbour.
func (g *fakeGPU) allocMapped(n int) DevicePtr {
	page := os.Getpagesize()
	size := align(max(n, 1), page)
	m, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		g.t.Fatalf("mmap %d bytes: %v", size+page, err)
	}
	if err := syscall.Mprotect(m[size:], syscall.PROT_NONE); err != nil {
		g.t.Fatalf("guard page: %v", err)
	}
	// Poisoned as the emulated libcuda's cuMemAlloc_v2 poisons its memory
	// (testdata/emu/driver.cc): a GPU's allocations are not zeroed.
	for i := range m[:size] {
		m[i] = 0xff
	}
	start := (size - n) &^ 15
	a := &fakeAlloc{base: DevicePtr(uintptr(unsafe.Pointer(&m[0])) + uintptr(start)), data: m[start : start+n : start+n], mapping: m}
	i := sort.Search(len(g.allocs), func(i int) bool { return g.allocs[i].base > a.base })
	g.allocs = slices.Insert(g.allocs, i, a)
	return a.base
}

func (g *fakeGPU) unmap(a *fakeAlloc) {
	if a.mapping != nil {
		if err := syscall.Munmap(a.mapping); err != nil {
			g.t.Error(err)
		}
	}
}

// newEmuBackend is a newDevice on the emulator.
func newEmuBackend(t testing.TB, m *model.Model, opts Options, numBlocks int) *Backend {
	t.Helper()
	b, _ := newEmuBackendOrder(t, m, opts, numBlocks, false)
	return b
}

func newEmuBackendOrder(t testing.TB, m *model.Model, opts Options, numBlocks int, reverse bool) (*Backend, *fakeGPU) {
	t.Helper()
	g := newFakeGPU(t)
	g.emu, g.reverse = loadEmu(t), reverse
	return fakeBackendOn(t, g, m, opts, numBlocks), g
}

// The GPU correctness tests of gpu_test.go, on the emulated kernels: the
// goldens' top-10 logits and 16 greedy tokens in float32, mixed batches
// against the CPU backend, half-precision top-10, and graph replay against
// eager steps.

// emuLimits are the golden prompts the emulated checks take (the GPU's take
// them all): those of up to 300 tokens, two attention tiles, since the
// emulator runs each CUDA thread as a fiber; the longest prompts run in
// TestEmuGoldenGreedyFloat32 and TestEmuDecoderGoldens only. Under the
// race detector, which checks the Go around the kernels and nothing of the
// C kernels' arithmetic, prompts of up to 33 tokens of one checkpoint per
// family: every kernel still runs in every storage type there
// (TestEmuThreadOrder, TestEmuDecoderHalfTop10), the numerical checks at
// full length run without it.
func emuLimits() goldenLimits {
	if raceEnabled {
		return goldenLimits{maxPrompt: 33, checkpoints: []string{"gpt2-tiny-hot", "qwen3-tiny"}}
	}
	return goldenLimits{maxPrompt: 300}
}

// TestEmuGoldenGreedyFloat32 takes every GPT-2 golden prompt, the 1,009
// tokens of gpt2-tiny's longest included, unless under the race detector.
func TestEmuGoldenGreedyFloat32(t *testing.T) {
	lim := allGoldens
	if raceEnabled {
		lim = emuLimits()
	}
	checkGoldenGreedyFloat32(t, newEmuBackend, lim)
}
func TestEmuMixedBatchesMatchCPU(t *testing.T) {
	checkMixedBatchesMatchCPU(t, newEmuBackend, emuLimits())
}
func TestEmuHalfTop10(t *testing.T)            { checkHalfTop10(t, newEmuBackend, emuLimits()) }
func TestEmuGraphsMatchEager(t *testing.T)     { checkGraphsMatchEager(t, newEmuBackend) }
func TestEmuPromptLogitsMatchCPU(t *testing.T) { checkPromptLogitsMatchCPU(t, newEmuBackend) }

// TestEmuGemmOrders: the three summation orders of the emulator's GEMM
// give the three answers they should to a sum that cancels, so that
// TestEmuFloat32Sums runs in the orders it names.
func TestEmuGemmOrders(t *testing.T) {
	e := loadEmu(t)
	defer e.setGemmOrder(emuGemmFloat64)
	a := []float32{1e8, 1, -1e8, 1} // op(A) is 1×4
	b := []float32{1, 1, 1, 1}
	for _, c := range []struct {
		order int32
		want  float32
	}{
		{emuGemmFloat64, 2},       // exact
		{emuGemmFloat32, 1},       // 1e8+1 rounds to 1e8
		{emuGemmFloat32SplitK, 0}, // slices of one, added last to first: (1-1e8)+1 rounds to -1e8
	} {
		e.setGemmOrder(c.order)
		out := []float32{-7}
		e.gemm(0, 0, 1, 1, 4, 1, uintptr(unsafe.Pointer(&a[0])), 0, 1, uintptr(unsafe.Pointer(&b[0])), 0, 4, 0, uintptr(unsafe.Pointer(&out[0])), 0, 1)
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
		if out[0] != c.want {
			t.Errorf("order %d: sum %g, want %g", c.order, out[0], c.want)
		}
	}
}

// TestEmuFloat32Sums runs the float32 correctness checks with the
// emulator's GEMMs summing in float32, as a GPU's do, in two orders unlike
// the CPU backend's (sequential fused multiply-adds, and split-K): the
// goldens' tolerances and greedy tokens must hold for a GPU's rounding,
// not only for the exact sums the other emulator tests use. It takes the
// GPT-2 checkpoint with the tighter margins (gpt2-tiny-hot) and llama-tiny,
// prompts of up to 300 tokens.
func TestEmuFloat32Sums(t *testing.T) {
	if raceEnabled {
		t.Skip("rounding, not concurrency: the race detector adds nothing here; runs without it")
	}
	e := loadEmu(t)
	lim := goldenLimits{maxPrompt: 300, checkpoints: []string{"gpt2-tiny-hot", "llama-tiny"}}
	for _, order := range []struct {
		name  string
		order int32
	}{{"fma", emuGemmFloat32}, {"split_k", emuGemmFloat32SplitK}} {
		t.Run(order.name, func(t *testing.T) {
			e.setGemmOrder(order.order)
			defer e.setGemmOrder(emuGemmFloat64)
			t.Run("golden", func(t *testing.T) { checkGoldenGreedyFloat32(t, newEmuBackend, lim) })
			t.Run("mixed", func(t *testing.T) { checkMixedBatchesMatchCPU(t, newEmuBackend, lim) })
			t.Run("prompt_logits", func(t *testing.T) { checkPromptLogitsMatchCPU(t, newEmuBackend) })
			t.Run("decoder_golden", func(t *testing.T) { checkDecoderGoldens(t, newEmuBackend, lim) })
		})
	}
}

// TestEmuThreadOrder runs the same mixed batches with each block's threads
// (and the blocks) in forward and in reverse order, for every storage type,
// on a GPT-2 and on a Qwen3 (whose launches take every other path of the
// kernels but the biases): the logits must be bit-identical. A kernel that reads what another
// thread writes without a barrier between them, or that depends on block
// order, gives different results in the two orders.
func TestEmuThreadOrder(t *testing.T) {
	const blocks = 40
	prompts := smallPrompts(300, 1, 17, 40, 5, 33)
	for _, arch := range []string{"gpt2", "qwen3"} {
		m := smallModel(t, nil)
		if arch != "gpt2" {
			m = smallLlama(t, arch)
		}
		for _, dt := range []string{"float32", "float16", "bfloat16"} {
			t.Run(arch+"/"+dt, func(t *testing.T) {
				fwd, _ := newEmuBackendOrder(t, m, Options{DType: dt}, blocks, false)
				rev, _ := newEmuBackendOrder(t, m, Options{DType: dt}, blocks, true)
				if worst := compareMixed(t, fwd, rev, prompts, blocks, 7, 5); worst != 0 {
					t.Errorf("forward and reverse thread order differ by %.3g", worst)
				}
			})
		}
	}
}

// TestEmuMatchesGoEmulation: the CUDA C and the Go emulation of its
// documented semantics (fakegpu_test.go) agree on every returned logit,
// for each storage type and GELU form, and for every Llama-family variant.
func TestEmuMatchesGoEmulation(t *testing.T) {
	type variant struct {
		name, dt string
		model    func(testing.TB) *model.Model
		tol      float64
	}
	gpt2 := func(erf bool) func(testing.TB) *model.Model {
		return func(t testing.TB) *model.Model {
			return smallModel(t, func(c *model.Config) {
				if erf {
					c.Activation = model.GeluErf
				}
			})
		}
	}
	vs := []variant{
		{"gpt2", "float32", gpt2(false), 1e-5}, {"gpt2_erf", "float32", gpt2(true), 1e-5},
		{"gpt2", "float16", gpt2(false), 2e-3}, {"gpt2", "bfloat16", gpt2(false), 1e-2},
	}
	for _, arch := range smallLlamas {
		vs = append(vs, variant{arch, "float32", func(t testing.TB) *model.Model { return smallLlama(t, arch) }, 1e-5})
	}
	vs = append(vs, variant{"qwen3", "bfloat16", func(t testing.TB) *model.Model { return smallLlama(t, "qwen3") }, 2e-2})
	for _, v := range vs {
		t.Run(v.name+"/"+v.dt, func(t *testing.T) {
			if raceEnabled && v.dt != "float32" {
				t.Skip("half types skipped under the race detector (slow Go emulation); float32 runs")
			}
			m := v.model(t)
			const blocks = 40
			emu := newEmuBackend(t, m, Options{DType: v.dt}, blocks)
			goEmu, _ := newFakeBackend(t, m, Options{DType: v.dt}, blocks)
			worst := compareMixed(t, emu, goEmu, smallPrompts(300, 1, 17, 40, 5, 33), blocks, 7, 5)
			if worst > v.tol {
				t.Errorf("emulated CUDA C vs Go emulation: logits differ by %.3g (tolerance %.0e)", worst, v.tol)
			}
			t.Logf("max |CUDA C - Go emulation| logit: %.3g", worst)
		})
	}
}

// TestEmuOddHeadDims runs the attention kernel with head sizes whose D*G is
// not a whole number of warps (D = 40 and 24: 120 threads before rounding)
// or exceeds 128 (D = 160), one whose rows are not whole 16-byte packs
// (D = 18, loaded element by element), against the CPU backend in float32.
// Before the block was rounded up to whole warps, the kernel's full-warp
// shuffles read lanes that did not exist.
func TestEmuOddHeadDims(t *testing.T) {
	for _, shape := range []struct{ embd, heads int }{{80, 2}, {48, 2}, {160, 1}, {36, 2}} {
		t.Run(fmt.Sprintf("C=%d,D=%d", shape.embd, shape.embd/shape.heads), func(t *testing.T) {
			m := smallModel(t, func(c *model.Config) {
				*c = model.GPT2Config(c.VocabSize, c.MaxPositions, shape.embd, c.Layers, shape.heads)
			})
			const blocks = 40
			emu := newEmuBackend(t, m, Options{DType: "float32"}, blocks)
			cb := cpuBackend(t, m, blocks)
			worst := compareMixed(t, emu, cb, smallPrompts(300, 1, 17, 40, 5), blocks, 7, 4)
			if worst > 1e-4 {
				t.Errorf("emulated CUDA C vs CPU: logits differ by %.3g (tolerance 1e-4)", worst)
			}
			t.Logf("max |CUDA C - CPU| logit: %.3g", worst)
		})
	}
}

// TestEmuCatchesMissingBarrier checks the emulator itself: with the
// barrier after the attention kernel's query load removed, threads read
// the query before the threads that load it have run (shared memory starts
// as NaN), and the logits go wrong; likewise flash_prefill without the
// barrier between its scores and its softmax. If this passed unnoticed,
// the emulator's verdicts on barriers would mean nothing.
func TestEmuCatchesMissingBarrier(t *testing.T) {
	loadEmu(t) // skips where there is no compiler
	for _, c := range []struct {
		kernel, barrier, without string
		old                      bool // run every row through the original kernel
	}{
		{"attention", "__syncthreads();\n  int L = D / W;", "int L = D / W;", true},
		{"flash_prefill", "__syncthreads();\n    // Online softmax", "// Online softmax", false},
	} {
		t.Run(c.kernel, func(t *testing.T) {
			if raceEnabled && !c.old {
				t.Skip("another emulator build: runs without the race detector, which adds nothing to it")
			}
			src := KernelSource()
			if strings.Count(src, c.barrier) != 1 {
				t.Fatalf("the %s kernel's barrier is not where this test expects it", c.kernel)
			}
			broken, err := buildEmu(strings.Replace(src, c.barrier, c.without, 1), kernelNames())
			if err != nil {
				t.Fatal(err)
			}
			m := smallModel(t, nil)
			const blocks = 8
			g := newFakeGPU(t)
			g.emu = broken
			b := fakeBackendOn(t, g, m, Options{DType: "float32"}, blocks)
			b.oldAttention = c.old
			ref := cpuBackend(t, m, blocks)
			prompt := smallPrompts(300, 20)[0]
			got := newStepper(t, b, blocks).step(part{id: kvID(0), tokens: prompt, sample: true, needLogits: true})
			want := newStepper(t, ref, blocks).step(part{id: kvID(0), tokens: prompt, sample: true, needLogits: true})
			if g.byName[c.kernel+"_f32"] == 0 {
				t.Fatalf("%s did not run: %v", c.kernel, g.byName)
			}
			worst := 0.0
			for v := range want[0].Logits {
				d := abs64(float64(got[0].Logits[v] - want[0].Logits[v]))
				if d != d { // NaN
					d = 1e9
				}
				worst = max(worst, d)
			}
			if worst < 1e-3 {
				t.Errorf("without the barrier the logits still match the CPU's (worst %.3g): the emulator does not expose missing barriers", worst)
			}
			t.Logf("without the barrier: max |logit - CPU| %.3g", worst)
		})
	}
}

// TestEmuDeadlockAndShapes: a kernel whose warps split between a shuffle
// and __syncthreads is reported as a deadlock, and launches the hardware
// would refuse are refused.
func TestEmuDeadlockAndShapes(t *testing.T) {
	loadEmu(t)
	src := KernelSource() + `
extern "C" __global__ void split_warp(float* x) {
  float v = x[threadIdx.x];
  if (threadIdx.x & 1) v = __shfl_xor_sync(0xffffffffu, v, 2);
  __syncthreads();
  x[threadIdx.x] = v;
}
`
	e, err := buildEmu(src, append(kernelNames(), "split_warp"))
	if err != nil {
		t.Fatal(err)
	}
	g := newFakeGPU(t)
	g.emu = e
	x := g.alloc(64 * 4)
	defer g.freePtr(x)
	args := []uint64{uint64(x)}
	err = e.launch("split_warp", [3]uint32{1, 1, 1}, [3]uint32{64, 1, 1}, 0, args, false)
	if err == nil || !strings.Contains(err.Error(), "deadlock") {
		t.Errorf("split warp: %v, want a deadlock", err)
	}
	for _, c := range []struct {
		name   string
		block  uint32
		shared uint32
		args   []uint64
		want   string
	}{
		{"split_warp", 2048, 0, args, "launch shape"},
		{"split_warp", 64, 64 << 10, args, "shared memory"},
		{"split_warp", 64, 0, []uint64{1, 2}, "arguments"},
		{"no_such_kernel", 64, 0, args, "no kernel"},
	} {
		err := e.launch(c.name, [3]uint32{1, 1, 1}, [3]uint32{c.block, 1, 1}, c.shared, c.args, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s block %d shared %d: %v, want an error about %q", c.name, c.block, c.shared, err, c.want)
		}
	}
	if e.kernelArgs("attention_f16") != 14 || e.kernelArgs("no_such_kernel") != -1 {
		t.Errorf("kernel argument counts: attention_f16 %d, no_such_kernel %d", e.kernelArgs("attention_f16"), e.kernelArgs("no_such_kernel"))
	}
}

// TestEmuEnginePromptLogprobs runs the whole engine over the emulated GPU
// and over the CPU backend: a scoring request (MaxTokens 0) in 16-token
// chunks must give the same prompt log-probabilities, alternatives and
// values, on both.
func TestEmuEnginePromptLogprobs(t *testing.T) {
	m, cases := loadGoldenCases(t, "gpt2-tiny-hot")
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	prompt := cases[2].InputIDs
	score := func(be engine.Backend) []llm.TokenLogprob {
		e, err := engine.New(be, tok, m.Info(), engine.Config{MaxNumBatchedTokens: 16, NumBlocks: goldenBlocks, Seed: new(uint64(1))})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		n := 3
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt, Params: llm.SamplingParams{PromptLogprobs: &n}})
		if err != nil {
			t.Fatal(err)
		}
		var out []llm.TokenLogprob
		for ev := range ch {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			out = append(out, ev.PromptLogprobs...)
		}
		return out
	}
	gpu := score(newEmuBackend(t, m, Options{DType: "float32"}, goldenBlocks))
	cpu := score(cpuBackend(t, m, goldenBlocks))
	if len(gpu) != len(prompt)-1 || len(cpu) != len(gpu) {
		t.Fatalf("%d and %d prompt logprobs for %d tokens", len(gpu), len(cpu), len(prompt))
	}
	worst := 0.0
	for k := range gpu {
		g, c := gpu[k], cpu[k]
		if g.ID != c.ID || len(g.Top) != len(c.Top) {
			t.Fatalf("position %d: %+v vs CPU %+v", k, g, c)
		}
		worst = max(worst, math.Abs(float64(g.Logprob-c.Logprob)))
		for j := range g.Top {
			if g.Top[j].ID != c.Top[j].ID {
				t.Errorf("position %d alternative %d: %d vs CPU %d", k, j, g.Top[j].ID, c.Top[j].ID)
			}
			worst = max(worst, math.Abs(float64(g.Top[j].Logprob-c.Top[j].Logprob)))
		}
	}
	if worst > 1e-5 {
		t.Errorf("max |device - CPU| over prompt logprobs %.3g, over 1e-5", worst)
	}
	t.Logf("max |device float32 - CPU| over prompt logprobs: %.3g", worst)
}

// TestEmuResultBuffersBounded: the results buffers, which a step with
// prompt logits needs a row of per token and which are kept, grow by
// doubling only up to the most token rows a step has had, not to twice
// the step budget.
func TestEmuResultBuffersBounded(t *testing.T) {
	m, cases := loadGoldenCases(t, "gpt2-tiny")
	b := newEmuBackend(t, m, Options{DType: "float32"}, goldenBlocks)
	s := newStepper(t, b, goldenBlocks)
	p := cases[2].InputIDs
	s.step(part{id: 1, tokens: p[:9], promptLogits: true})
	s.step(part{id: 1, tokens: p[9:19], start: 9, promptLogits: true})
	if b.capSample != 10 {
		t.Errorf("after steps of 9 and 10 prompt-logit rows: room for %d result rows, want 10", b.capSample)
	}
}

// TestEmuArgmaxEdgeRows: the device argmax agrees with the CPU backend's
// rule on rows a softmax never makes but a model can: the largest logit
// at -MaxFloat32, infinities, NaNs (never chosen) and ties (the lowest id).
func TestEmuArgmaxEdgeRows(t *testing.T) {
	e := loadEmu(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	rows := []struct {
		logits []float32
		want   int32
	}{
		{[]float32{-inf, -math.MaxFloat32, -inf, -inf}, 1},
		{[]float32{nan, -inf, 5, 5}, 2},
		{[]float32{1, inf, nan, inf}, 1},
		{[]float32{-inf, -inf, -inf, -inf}, 0},
		{[]float32{nan, nan, nan, nan}, 0},
	}
	const V = 4
	g := newFakeGPU(t)
	g.emu = e
	logits, out := g.alloc(len(rows)*V*4), g.alloc(len(rows)*4)
	defer g.freePtr(logits)
	defer g.freePtr(out)
	in := unsafe.Slice((*float32)(unsafe.Pointer(&g.bytes(logits, len(rows)*V*4)[0])), len(rows)*V)
	for r, row := range rows {
		copy(in[r*V:], row.logits)
	}
	if err := e.launch("argmax_rows", [3]uint32{uint32(len(rows)), 1, 1}, [3]uint32{32, 1, 1}, 0, []uint64{uint64(out), uint64(logits), V}, false); err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice((*int32)(unsafe.Pointer(&g.bytes(out, len(rows)*4)[0])), len(rows))
	for r, row := range rows {
		if got[r] != row.want {
			t.Errorf("row %v: argmax %d, want %d", row.logits, got[r], row.want)
		}
	}
}

// TestEmuStepProfile runs the device check's step profile on the emulated
// kernels: the accounting of every launch and GEMM, and profiled steps
// equal to plain ones. (Its times are the emulator's.)
func TestEmuStepProfile(t *testing.T) {
	checkStepProfile(t, newEmuBackend, smallModel(t, nil), "float16", time.Millisecond, 3, false)
	checkStepProfile(t, newEmuBackend, smallModel(t, nil), "float16", time.Millisecond, 2, true)
}

// TestFakeGPUStepProfile: the same accounting on the fake GPU, whose
// events stamp the host's clock.
func TestFakeGPUStepProfile(t *testing.T) {
	checkStepProfile(t, func(t testing.TB, m *model.Model, opts Options, numBlocks int) *Backend {
		b, _ := newFakeBackend(t, m, opts, numBlocks)
		return b
	}, smallModel(t, nil), "float32", 0, 3, true)
}
