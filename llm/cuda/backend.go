package cuda

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// DefaultGPUMemoryUtilization is the fraction of free GPU memory used for
// the KV cache when Options.GPUMemoryUtilization is zero (vLLM's default).
const DefaultGPUMemoryUtilization = 0.9

// activationReserve is device memory left out of the KV budget for the
// per-step buffers, cuBLAS's workspace and the module, so that the first
// large prefill after the pool is allocated does not run out.
const activationReserve = 512 << 20

// Options configures NewBackend. The zero value runs float16 on device 0
// with 90% of free memory for KV and the libraries found in the usual
// places.
type Options struct {
	// DType is the storage type of weights, KV cache and GEMM inputs:
	// "float16" (also "" and "auto"), "bfloat16" or "float32" (exact
	// comparisons with the CPU backend). Accumulation is float32 always.
	DType string
	// GPUMemoryUtilization is the fraction (0, 1] of the GPU's free memory,
	// measured after the weights are uploaded, that MaxKVBlocks may use
	// for the KV cache. Zero means DefaultGPUMemoryUtilization.
	GPUMemoryUtilization float64
	// NumBlocks, when positive, is the exact number of KV blocks
	// MaxKVBlocks reports, overriding the memory fraction.
	NumBlocks int
	// LibDir is searched first for libcuda, cuBLAS and NVRTC (callers pass
	// LibDirFromEnv(), i.e. $TINYSERVE_CUDA_LIB_DIR). Empty skips it.
	LibDir string
	// CacheDir holds compiled kernels. Empty means DefaultCacheDir().
	CacheDir string
	// Device is the ordinal of the GPU to use.
	Device int
	// Getenv reads LD_LIBRARY_PATH, PATH, VIRTUAL_ENV, CONDA_PREFIX and
	// HOME for the library search; nil means os.Getenv.
	Getenv func(string) string
	// Logger receives start-up and warning logs; nil discards them.
	Logger *slog.Logger
	// CUDAGraphs replays steps of up to 512 token rows from CUDA graphs,
	// saving the launch overhead of about 110 kernels and GEMMs per step
	// (GPT-2 124M): decode-only steps (every sequence decoding one token)
	// of up to 64 sequences at their exact size, and every other step
	// (mixed prefill chunks and decodes, prefills, prompt logits) padded to
	// a bucket of token rows (graph.go). Larger steps run eagerly.
	// tinyserve.Open turns it on unless Config.EnforceEager (docs/cuda.md).
	CUDAGraphs bool
}

// Backend runs a decoder of any architecture model.Config describes
// (GPT-2, Llama, Qwen2, Qwen3) on an NVIDIA GPU as an engine.Backend. It
// computes what llm/cpu's backend computes: a flattened batch of
// prefill chunks and decodes per step, K and V written to and read from a
// paged cache through the block tables, and the LM head for the sampled
// rows only. Per step it makes one host-to-device copy (the packed batch
// metadata) and one device-to-host copy (argmax ids, then the logits rows
// the engine asked for).
//
// Like every backend it is used from one goroutine; it is not safe for
// concurrent use. Each call pins its goroutine to an OS thread and makes
// the device's context current there, because CUDA contexts are per thread
// and Go moves goroutines between threads.
type Backend struct {
	m    *model.Model
	cfg  model.Config
	opts Options
	dt   dtype
	log  *slog.Logger

	drv  *Driver
	blas *CuBLAS
	rtc  *NVRTC

	dev        int32
	ctx        Context
	stream     Stream
	arch       int
	deviceName string
	mod        Module
	fn         kernels

	w           devWeights
	weights     DevicePtr
	weightBytes int // the size of the weights' allocation
	// dq is the Q8_0 prefill's scratch: room for dqElems weights in the
	// storage type, the largest Q8_0 projection group (q8.go); 0 without
	// Q8_0 matrices.
	dq      DevicePtr
	dqElems int
	blasWS  DevicePtr // cuBLAS's workspace (see setup)

	kc, vc    DevicePtr // [layer][block*blockSize+slot][KVHeads*HeadDim], storage type
	numBlocks int
	blockSize int

	// Per-step device buffers, grown (never shrunk) to the largest step.
	capRows, capSample int
	maxStepRows        int       // the most token rows a step has had: capSample's bound
	acts               DevicePtr // one allocation holding the buffers below
	x, h               DevicePtr // [rows][Hidden]: residual f32, norm out T
	q, att             DevicePtr // [rows][Heads*HeadDim]: queries f32, attention out T
	split              DevicePtr // split attention's partials, float32 (splitPartBytes)
	gemm               DevicePtr // [rows][widest projection group] float32 GEMM results
	act                DevicePtr // [rows][Intermediate] T, activated MLP hidden
	hs                 DevicePtr // [sample][Hidden] T, final norm of the sampled rows
	res                DevicePtr // results: argmax int32 [capSample], then logits f32 [capSample][V]
	resLogitsOff       int       // byte offset of the logits in res
	capMeta            int       // int32 elements of meta / metaHost
	meta               DevicePtr
	metaHost           unsafe.Pointer // pinned, capMeta int32s
	resHost            unsafe.Pointer // pinned, same layout as res
	resHostBytes       int

	// CUDA graphs of steps, by launched shape and block-table stride
	// (Options.CUDAGraphs, graph.go).
	graphs     map[graphKey]graphExec
	graphSeen  map[graphKey]bool // keys run once eagerly; the next is captured
	graphsOff  bool              // a capture failed: eager from then on
	graphClock uint64            // graph steps run: graphExec.used's clock

	// oldAttention, set only by tests, runs every row through the original
	// attention kernel, unsplit, as before flash_prefill and the splits.
	oldAttention bool

	// prof, set only by tests and benchmarks, times each launch of an
	// eager step (profile.go); nil otherwise.
	prof *profiler

	packed []int32
	bm     batchMeta
	rows   []engine.SampleRow
	args   kernelArgs
	closed bool
}

// kernels are the module's functions for the backend's dtype.
type kernels struct {
	embed, norm, addNorm, qkvStore, attention, biasAct, siluMul, residual, argmax Function
	attentionSplit, attentionCombine, flashPrefill                                Function
	hold                                                                          Function // the profiler's (profile.go)
	// The Q8_0 weights' kernels (q8.go): the embedding lookup, the decode
	// GEMV by rows per grid.y (q8GemvRows), and the prefill's dequantization.
	embedQ8, q8Dequant Function
	q8Gemv             [len(q8GemvRows)]Function
}

// NewBackend loads the CUDA libraries, compiles (or reads from the cache)
// the kernels for the GPU, and uploads m's weights in opts.DType. Without a
// driver, a GPU or one of the libraries it returns an error saying which
// and where it looked; it never panics. Call Close when done; the model
// stays owned by the caller.
func NewBackend(m *model.Model, opts Options) (*Backend, error) {
	if m == nil {
		return nil, errors.New("cuda: nil model")
	}
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	dt, err := parseDType(opts.DType)
	if err != nil {
		return nil, err
	}
	if u := opts.GPUMemoryUtilization; u < 0 || u > 1 || math.IsNaN(u) {
		return nil, fmt.Errorf("cuda: GPUMemoryUtilization %v is outside (0, 1]", u)
	}
	if opts.NumBlocks < 0 {
		return nil, fmt.Errorf("cuda: NumBlocks %d is negative", opts.NumBlocks)
	}
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := checkShape(&cfg, dt); err != nil {
		return nil, err
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	b := &Backend{m: m, cfg: cfg, opts: opts, dt: dt, log: log}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.start(); err != nil {
		b.release()
		return nil, err
	}
	return b, nil
}

// checkShape refuses, naming the limit, a model whose shape some launch of
// every step would refuse: better at start than at the first step.
func checkShape(c *model.Config, dt dtype) error {
	// Attention runs a block of at least HeadDim threads (at most 1024),
	// and qkv_store's rotation table holds HeadDim values.
	if hd := c.HeadDim; hd > 1024 {
		return fmt.Errorf("cuda: head_dim %d is over the 1024 the kernels take", hd)
	}
	// Attention runs one block per (row, head): the grid's y dimension is
	// the head count, at most 65535.
	if c.Heads > 65535 {
		return fmt.Errorf("cuda: %d attention heads, over the 65535 a grid dimension holds", c.Heads)
	}
	// Attention's shared memory (one tile of positions, whatever the
	// context length) must fit the 48 KiB, static and dynamic together, a
	// launch gets without opting in to more. Every head_dim up to 1024
	// does; the check keeps that true if the tile changes.
	if need := attentionShared(c.HeadDim, dt.size) + attentionStaticShared; need > 48<<10 {
		return fmt.Errorf("cuda: head_dim %d needs %d bytes of shared memory per attention block, over 48 KiB", c.HeadDim, need)
	}
	if flashHeadDim(c.HeadDim) && flashShared(c.HeadDim) > 48<<10 {
		return fmt.Errorf("cuda: head_dim %d needs %d bytes of shared memory per flash_prefill block, over 48 KiB", c.HeadDim, flashShared(c.HeadDim))
	}
	return nil
}

// start does NewBackend's device work; on error release undoes it.
func (b *Backend) start() error {
	dirs := SearchDirs(b.opts.LibDir, b.opts.Getenv)
	var err error
	// The driver must match the kernel module, so the one the system loader
	// picks (what every CUDA program loads) comes first, and the folders
	// only where it finds none; a folder given explicitly (LibDir, as the
	// emulator is) is searched first instead.
	var nf *NotFoundError
	if b.opts.LibDir == "" {
		b.drv, err = LoadSystemDriver()
	}
	if b.drv == nil && (err == nil || errors.As(err, &nf)) {
		b.drv, err = LoadDriver(dirs)
	}
	if err != nil {
		return err
	}
	// setup calls this once it knows the driver and the GPU (b.arch).
	return b.setup(func(drvVersion int) (*NVRTC, *CuBLAS, error) {
		rtcLib, blasLib := b.libraries(drvVersion)
		rtc, err := LoadNVRTC(rtcLib, dirs)
		if err != nil {
			return nil, nil, err
		}
		blas, err := LoadCuBLAS(blasLib, dirs)
		return rtc, blas, err
	})
}

// libraries are the NVRTC and cuBLAS files to look for under a driver of
// drvVersion and on b's GPU (b.arch).
func (b *Backend) libraries(drvVersion int) (nvrtc, cublas Library) {
	return LibNVRTC().ForDriver(drvVersion).ForArch(b.arch), LibCuBLAS().ForDriver(drvVersion).ForArch(b.arch)
}

// setup initialises the device with the loaded driver (b.drv) and the
// NVRTC and cuBLAS that load returns (called once a context is current,
// which cuBLAS's handle needs), compiles the kernels and uploads the
// weights. Tests call it with a driver and libraries of their own.
func (b *Backend) setup(load func(drvVersion int) (*NVRTC, *CuBLAS, error)) error {
	var err error
	if err := b.drv.Init(); err != nil {
		return fmt.Errorf("cuda backend: driver %s: %w", b.drv.Path, err)
	}
	n, err := b.drv.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("cuda backend: %w (the driver at %s sees none)", ErrNoDevice, b.drv.Path)
	}
	if b.opts.Device < 0 || b.opts.Device >= n {
		return fmt.Errorf("cuda backend: device %d does not exist (%d visible)", b.opts.Device, n)
	}
	if b.dev, err = b.drv.Device(b.opts.Device); err != nil {
		return err
	}
	major, err := b.drv.Attribute(b.dev, AttrComputeCapabilityMajor)
	if err != nil {
		return err
	}
	minor, err := b.drv.Attribute(b.dev, AttrComputeCapabilityMinor)
	if err != nil {
		return err
	}
	b.arch = major*10 + minor
	if b.dt == dtBFloat16 && b.arch < 80 {
		// cuBLAS refuses bfloat16 GEMMs before Ampere: say so at start
		// rather than fail the first step.
		return fmt.Errorf("cuda backend: --dtype bfloat16 needs compute capability 8.0 or newer; this GPU is %d.%d: use float16", major, minor)
	}
	b.deviceName, _ = b.drv.DeviceName(b.dev)
	if b.ctx, err = b.drv.PrimaryCtxRetain(b.dev); err != nil {
		return err
	}
	if err := b.drv.SetCurrent(b.ctx); err != nil {
		return err
	}
	if b.stream, err = b.drv.StreamCreate(); err != nil {
		return err
	}
	drvVersion, err := b.drv.Version()
	if err != nil {
		return err
	}
	if b.rtc, b.blas, err = load(drvVersion); err != nil {
		return err
	}
	if err := b.blas.SetStream(b.stream); err != nil {
		return err
	}
	// A workspace of our own, so that GEMMs captured into CUDA graphs reuse
	// one buffer: before CUDA 12.2, cuBLAS allocated a new workspace for
	// every graph captured. The sizes are NVIDIA's recommendation (32 MiB
	// for Hopper and newer, 4 MiB before).
	wsBytes := 4 << 20
	if b.arch >= 90 {
		wsBytes = 32 << 20
	}
	if b.blasWS, err = b.drv.MemAlloc(wsBytes); err != nil {
		return err
	}
	if ok, err := b.blas.SetWorkspace(b.blasWS, wsBytes); err != nil {
		return err
	} else if !ok {
		_ = b.drv.MemFree(b.blasWS) // unused: nothing was queued on it
		b.blasWS = 0
	}
	// The float32 mode exists for exact comparisons with the CPU backend:
	// no reduced precision anywhere in its GEMMs.
	if err := b.blas.SetPedantic(b.dt == dtFloat32); err != nil {
		return err
	}
	build, err := newKernelBuild(b.rtc, kernelSource, b.arch, b.opts.CacheDir, b.log)
	if err != nil {
		return err
	}
	img, err := build.image()
	if err != nil {
		return err
	}
	if b.mod, err = b.drv.ModuleLoad(img); err != nil {
		// A cached image the driver refuses (damaged, or written by a
		// process that lied about its compiler) is replaced by a fresh
		// compile, once.
		b.log.Warn("cuda: the driver refused the kernel image; recompiling", "err", err)
		build.dropCached()
		if img, err = build.compile(); err != nil {
			return err
		}
		if b.mod, err = b.drv.ModuleLoad(img); err != nil {
			return fmt.Errorf("cuda backend: loading the kernels: %w", err)
		}
	}
	sfx := b.dt.suffix
	for _, k := range []struct {
		f    *Function
		name string
	}{
		{&b.fn.embed, "embed" + sfx}, {&b.fn.norm, "norm" + sfx}, {&b.fn.addNorm, "add_norm" + sfx},
		{&b.fn.qkvStore, "qkv_store" + sfx}, {&b.fn.attention, "attention" + sfx},
		{&b.fn.attentionSplit, "attention_split" + sfx}, {&b.fn.attentionCombine, "attention_combine" + sfx},
		{&b.fn.flashPrefill, "flash_prefill" + sfx},
		{&b.fn.biasAct, "bias_act" + sfx}, {&b.fn.siluMul, "silu_mul" + sfx}, {&b.fn.residual, "residual" + sfx},
		{&b.fn.argmax, "argmax_rows"}, {&b.fn.hold, "hold_ns"},
		{&b.fn.embedQ8, "embed_q8" + sfx}, {&b.fn.q8Dequant, "q8_dequant" + sfx},
		{&b.fn.q8Gemv[0], fmt.Sprintf("q8_gemv%d%s", q8GemvRows[0], sfx)}, {&b.fn.q8Gemv[1], fmt.Sprintf("q8_gemv%d%s", q8GemvRows[1], sfx)},
		{&b.fn.q8Gemv[2], fmt.Sprintf("q8_gemv%d%s", q8GemvRows[2], sfx)}, {&b.fn.q8Gemv[3], fmt.Sprintf("q8_gemv%d%s", q8GemvRows[3], sfx)},
	} {
		if *k.f, err = b.drv.Function(b.mod, k.name); err != nil {
			return err
		}
	}
	if err := b.uploadWeights(); err != nil {
		return err
	}
	b.log.Info("cuda: backend ready", "device", b.deviceName, "arch", b.arch, "driver", drvVersion,
		"dtype", b.dt.name, "libcuda", b.drv.Path, "cublas", b.blas.Path, "nvrtc", b.rtc.Path)
	return nil
}

// enter pins the goroutine to its thread and makes the context current;
// the returned func undoes the pin.
func (b *Backend) enter() (func(), error) {
	if b.closed {
		return func() {}, errors.New("cuda: backend is closed")
	}
	runtime.LockOSThread()
	if err := b.drv.SetCurrent(b.ctx); err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	return runtime.UnlockOSThread, nil
}

// Info describes the model, with Backend "cuda".
func (b *Backend) Info() llm.ModelInfo {
	info := b.m.Info()
	info.Backend = "cuda"
	return info
}

// Device is the GPU's name and compute capability (e.g. 90 for sm_90).
func (b *Backend) Device() (name string, arch int) { return b.deviceName, b.arch }

// DType is the storage type in use: float16, bfloat16 or float32.
func (b *Backend) DType() string { return b.dt.name }

// Close frees the device memory, the kernels and the handles. The model
// stays open (the caller owns it). Forward fails after Close.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.drv != nil && b.ctx != 0 {
		_ = b.drv.SetCurrent(b.ctx)
	}
	err := b.release()
	b.closed = true
	return err
}

// release frees whatever start or later calls created, in reverse order.
func (b *Backend) release() error {
	if b.drv == nil {
		return nil
	}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if b.stream != 0 {
		keep(b.drv.StreamSync(b.stream))
	}
	b.dropGraphs()
	for _, p := range []DevicePtr{b.kc, b.vc, b.acts, b.meta, b.res, b.hs, b.weights, b.dq} {
		keep(b.drv.MemFree(p))
	}
	b.kc, b.vc, b.acts, b.meta, b.res, b.hs, b.weights, b.dq = 0, 0, 0, 0, 0, 0, 0, 0
	keep(b.drv.MemFreeHost(b.metaHost))
	keep(b.drv.MemFreeHost(b.resHost))
	b.metaHost, b.resHost = nil, nil
	if b.blas != nil {
		keep(b.blas.Close())
	}
	keep(b.drv.MemFree(b.blasWS))
	b.blasWS = 0
	if b.mod != 0 {
		keep(b.drv.ModuleUnload(b.mod))
		b.mod = 0
	}
	if b.stream != 0 {
		keep(b.drv.StreamDestroy(b.stream))
		b.stream = 0
	}
	if b.ctx != 0 {
		keep(b.drv.PrimaryCtxRelease(b.dev))
		b.ctx = 0
	}
	return errors.Join(errs...)
}
