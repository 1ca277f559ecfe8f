package gpt2

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
)

// DefaultKVCacheBytes is the KV cache budget when CPUOptions.KVCacheBytes is
// zero: 1 GiB, capped at what DefaultKVSeqs full-context sequences need.
const DefaultKVCacheBytes = 1 << 30

// DefaultKVSeqs caps the default KV budget: a small model does not need a
// whole GiB, only room for this many sequences at the full context length.
const DefaultKVSeqs = 64

// MaxThreads bounds CPUOptions.Threads: each thread keeps scratch buffers
// of the context's length, so a mistyped count would exhaust memory before
// running anything.
const MaxThreads = 1024

// CPUOptions configures a CPUBackend. The zero value is ready to use.
type CPUOptions struct {
	// Threads is the number of goroutines a forward pass is split across.
	// Zero means runtime.GOMAXPROCS(0) at construction; 1 runs everything
	// on the engine's goroutine.
	Threads int
	// KVCacheBytes is the memory budget, in bytes, for the paged KV cache
	// (keys and values of every layer). MaxKVBlocks reports how many blocks
	// fit. Zero means DefaultKVCacheBytes capped at DefaultKVSeqs sequences
	// of the model's full context length; an explicit value is used as is.
	// Negative is an error.
	KVCacheBytes int64
	// WeightDType is how the backend stores the matrix weights it streams
	// every step (attention, MLP and LM head): "" or "float32", or
	// "bfloat16", which halves the bytes a decode step reads; arithmetic
	// stays float32, so logits move by about the weights' 2⁻⁹ relative
	// rounding. Embeddings and norms stay float32. Other values are an
	// error.
	WeightDType string
}

// CPUBackend runs a GPT-2 Model on the CPU as an engine.Backend: a flattened
// batch of prefill chunks and decodes per step, attention read through the
// block tables from a paged KV cache preallocated for the whole pool, and
// the LM head only for the rows the engine samples.
//
// Like every backend it is used from one goroutine (the engine's); Forward
// is not safe for concurrent use. It splits each step across a pool of
// goroutines created once by NewCPUBackend; Close stops them.
type CPUBackend struct {
	m       *Model
	cfg     Config
	opts    CPUOptions
	pool    *pool
	closed  bool
	threads int

	// The matrices repacked once for the f32 kernels (see packWeights);
	// the matmuls read only these, never the model's original slices.
	packed []packedLayer
	lmHead *f32.Packed

	// Paged KV cache: kc and vc are [layer][block][head][slot][headDim], so
	// one head's keys in one block are contiguous for the attention loop.
	kc, vc    []float32
	kvMem     [2]*f32.Buffer // the memory of kc and vc: kept alive with them
	numBlocks int
	blockSize int

	// Per-step buffers, grown (never shrunk) to the largest batch seen.
	rows    int       // capacity in rows of the buffers below
	h       []float32 // residual stream [rows, C]
	xn      []float32 // LayerNorm output [rows, C]
	qkv     []float32 // [rows, 3C]
	att     []float32 // attention output [rows, C]
	fc      []float32 // MLP hidden [rows, NInner]
	rowSeq  []int32   // batch index of each row's sequence
	rowPos  []int32   // position of each row
	sampled []int32   // rows that go through ln_f and the LM head
	hs      []float32 // gathered, normalised sampled rows [S, C]
	logits  []float32 // [S, V]
	// promptLogits holds the rows of a step with prompt logits (logitsFor).
	promptLogits []float32
	out          []engine.SampleRow
	headBest     []unitMax   // the LM head's per-unit row maxima (headTask.best)
	scores       [][]float32 // per worker attention scores [NPositions]
	units        []attnUnit  // this step's attention units (see planAttention)
	blk          []blockScratch

	// Tasks are reused structs so that starting one allocates nothing.
	mm   matmulTask
	at   attnTask
	ln   lnTask
	head headTask

	// Test hook (nil in production): it sees the residual stream after the
	// embedding (stage 0) and after each block (stage i+1), and the ln_f
	// output of the sampled rows (stage NLayer+1).
	hook func(stage int, x []float32, rows int)
}

var _ engine.PromptLogitsBackend = (*CPUBackend)(nil)

// NewCPUBackend returns a backend running m. Call AllocateKV (the engine
// does, with the pool size it chose) before Forward, and Close when done.
func NewCPUBackend(m *Model, opts CPUOptions) (*CPUBackend, error) {
	if m == nil {
		return nil, errors.New("gpt2: nil model")
	}
	if opts.Threads < 0 || opts.Threads > MaxThreads {
		return nil, fmt.Errorf("gpt2: CPUOptions.Threads must be in [0, %d], got %d", MaxThreads, opts.Threads)
	}
	if opts.KVCacheBytes < 0 {
		return nil, fmt.Errorf("gpt2: CPUOptions.KVCacheBytes must be non-negative, got %d", opts.KVCacheBytes)
	}
	var bf16 bool
	switch opts.WeightDType {
	case "", "float32":
	case "bfloat16":
		bf16 = true
	default:
		return nil, fmt.Errorf("gpt2: CPUOptions.WeightDType must be \"float32\" or \"bfloat16\", got %q", opts.WeightDType)
	}
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	if err := m.checkWeights(); err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	b := &CPUBackend{m: m, cfg: cfg, opts: opts, threads: threads}
	b.packed, b.lmHead = packWeights(&m.Weights, cfg, threads, bf16)
	b.pool = newPool(threads)
	b.scores = make([][]float32, threads)
	for i := range b.scores {
		b.scores[i] = make([]float32, cfg.NPositions)
	}
	return b, nil
}

// Info describes the model, with Backend "cpu".
func (b *CPUBackend) Info() llm.ModelInfo {
	info := b.m.Info()
	info.Backend = "cpu"
	return info
}

// Model is the model the backend runs.
func (b *CPUBackend) Model() *Model { return b.m }

// KVBytesPerBlock is the memory one KV block of blockSize tokens takes:
// keys and values of every layer, float32.
func (b *CPUBackend) KVBytesPerBlock(blockSize int) int64 {
	return kvBytesPerBlock(b.cfg, blockSize)
}

func kvBytesPerBlock(c Config, blockSize int) int64 {
	return 2 * 4 * int64(c.NLayer) * int64(c.NEmbd) * int64(blockSize)
}

// MaxKVBlocks implements engine.Backend: how many blocks of blockSize
// tokens fit in the KV budget (CPUOptions.KVCacheBytes).
func (b *CPUBackend) MaxKVBlocks(blockSize int) (int, error) {
	return maxKVBlocks(b.cfg, b.opts.KVCacheBytes, blockSize)
}

// maxKVBlocks applies the budget rules of CPUOptions.KVCacheBytes.
func maxKVBlocks(c Config, budget int64, blockSize int) (int, error) {
	if blockSize < 1 {
		return 0, fmt.Errorf("gpt2: block size must be positive, got %d", blockSize)
	}
	per := kvBytesPerBlock(c, blockSize)
	if budget == 0 {
		perSeq := per * int64((c.NPositions+blockSize-1)/blockSize)
		budget = min(DefaultKVCacheBytes, DefaultKVSeqs*perSeq)
	}
	n := budget / per
	if n < 1 {
		return 0, fmt.Errorf("gpt2: KV cache budget of %d bytes is smaller than one block (%d bytes for %d tokens)", budget, per, blockSize)
	}
	return int(min(n, math.MaxInt32)), nil
}

// AllocateKV implements engine.Backend: it allocates the physical cache for
// exactly numBlocks blocks (replacing any earlier one). Go hands out fresh
// zeroed pages lazily, so untouched blocks cost address space, not RAM.
func (b *CPUBackend) AllocateKV(numBlocks, blockSize int) error {
	if numBlocks < 1 || blockSize < 1 {
		return fmt.Errorf("gpt2: AllocateKV needs positive numBlocks and blockSize, got %d and %d", numBlocks, blockSize)
	}
	n := int64(b.cfg.NLayer) * int64(numBlocks) * int64(blockSize) * int64(b.cfg.NEmbd)
	if n > math.MaxInt/4 || n > 1<<40 {
		return fmt.Errorf("gpt2: KV cache of %d blocks x %d tokens is too large", numBlocks, blockSize)
	}
	// Resident memory (huge pages where granted, every page touched now):
	// a step that enters fresh blocks must not pay page faults.
	b.kc, b.vc, b.kvMem = nil, nil, [2]*f32.Buffer{} // let the old cache go first
	b.kvMem = [2]*f32.Buffer{f32.NewBuffer(int(n)), f32.NewBuffer(int(n))}
	b.kc, b.vc = b.kvMem[0].Floats(), b.kvMem[1].Floats()
	b.numBlocks, b.blockSize = numBlocks, blockSize
	return nil
}

// Close stops the backend's worker goroutines. The model stays open (the
// caller owns it). Forward fails after Close.
func (b *CPUBackend) Close() error {
	if !b.closed {
		b.closed = true
		b.pool.close()
	}
	return nil
}

// grow makes the per-step buffers hold at least rows rows and sampled
// sampled rows. Buffers only grow, so a steady state allocates nothing.
func (b *CPUBackend) grow(rows, sampled int) {
	c := b.cfg
	if rows > b.rows {
		n := max(rows, 2*b.rows)
		b.rows = n
		b.h = make([]float32, n*c.NEmbd)
		b.xn = make([]float32, n*c.NEmbd)
		b.qkv = make([]float32, n*3*c.NEmbd)
		b.att = make([]float32, n*c.NEmbd)
		b.fc = make([]float32, n*c.NInner)
		b.rowSeq = make([]int32, n)
		b.rowPos = make([]int32, n)
		b.sampled = make([]int32, 0, n)
	}
	if sampled > len(b.out) {
		n := max(sampled, 2*len(b.out))
		b.hs = make([]float32, n*c.NEmbd)
		b.out = make([]engine.SampleRow, n)
	}
}

// logitsFor returns the logits buffer of a step with sampled rows. The
// rows of prompt logits (one per prompt position, hundreds of megabytes at
// GPT-2's vocabulary for a long prompt) get a buffer of their own, reused
// by the steps with prompt logits that follow (an evaluation run) and let
// go at the first step without, so that what serving keeps stays the size
// of the sampled rows.
func (b *CPUBackend) logitsFor(sampled int, promptRows bool) []float32 {
	need := sampled * b.cfg.VocabSize
	if promptRows {
		if need > len(b.promptLogits) {
			b.promptLogits = make([]float32, need)
		}
		return b.promptLogits[:need]
	}
	b.promptLogits = nil
	if need > len(b.logits) {
		b.logits = make([]float32, max(need, 2*len(b.logits)))
	}
	return b.logits[:need]
}

// ReturnsPromptLogits implements engine.PromptLogitsBackend: a sequence
// with PromptLogits set gets a row of logits per token.
func (b *CPUBackend) ReturnsPromptLogits() bool { return true }

// validate checks a batch against the model and the KV pool, so that bad
// input is an error rather than an index panic deep in a kernel.
func (b *CPUBackend) validate(batch *engine.Batch) error {
	if b.closed {
		return errors.New("gpt2: Forward on a closed backend")
	}
	if b.kc == nil {
		return errors.New("gpt2: Forward before AllocateKV")
	}
	total := 0
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		if len(s.Tokens) == 0 {
			return fmt.Errorf("gpt2: batch seq %d (id %d) has no tokens", i, s.ID)
		}
		end := s.StartPos + len(s.Tokens)
		if s.StartPos < 0 || end > b.cfg.NPositions {
			return fmt.Errorf("gpt2: batch seq %d (id %d): positions [%d, %d) outside the context [0, %d)", i, s.ID, s.StartPos, end, b.cfg.NPositions)
		}
		if need := (end + b.blockSize - 1) / b.blockSize; len(s.BlockTable) < need {
			return fmt.Errorf("gpt2: batch seq %d (id %d): block table has %d blocks, positions up to %d need %d", i, s.ID, len(s.BlockTable), end, need)
		} else {
			for _, id := range s.BlockTable[:need] {
				if id < 0 || int(id) >= b.numBlocks {
					return fmt.Errorf("gpt2: batch seq %d (id %d): block id %d outside the pool [0, %d)", i, s.ID, id, b.numBlocks)
				}
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || t >= b.cfg.VocabSize {
				return fmt.Errorf("gpt2: batch seq %d (id %d): token id %d outside the vocabulary [0, %d)", i, s.ID, t, b.cfg.VocabSize)
			}
		}
		total += len(s.Tokens)
	}
	if total != batch.NumTokens {
		return fmt.Errorf("gpt2: batch NumTokens is %d, its sequences hold %d tokens", batch.NumTokens, total)
	}
	return nil
}

// Forward implements engine.Backend. Every returned row has Argmax set (ties
// to the lowest id); Logits is set only when the sequence's NeedLogits or
// PromptLogits asked for it, so that a greedy request takes the engine's
// argmax path without a pass over the vocabulary. Rows and logits are
// reused by the next call.
func (b *CPUBackend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	if err := b.validate(batch); err != nil {
		return nil, err
	}
	c := b.cfg
	C, M := c.NEmbd, batch.NumTokens
	nSample, promptRows := 0, false
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		if s.PromptLogits {
			nSample += len(s.Tokens)
			promptRows = true
		} else if s.Sample {
			nSample++
		}
	}
	b.grow(M, nSample)
	if M == 0 {
		return b.out[:0], nil
	}
	w := &b.m.Weights
	// batch.Dropped needs no work: the backend keeps no per-sequence state
	// between steps (the KV lives in the engine's blocks, and everything a
	// step needs comes with the batch).

	// Embedding and row bookkeeping.
	b.sampled = b.sampled[:0]
	r := 0
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		for j, tok := range s.Tokens {
			pos := s.StartPos + j
			b.rowSeq[r], b.rowPos[r] = int32(i), int32(pos)
			dst := b.h[r*C : (r+1)*C]
			te := w.WTE[tok*C : (tok+1)*C]
			pe := w.WPE[pos*C : (pos+1)*C]
			for k := range dst {
				dst[k] = te[k] + pe[k]
			}
			if s.PromptLogits || (s.Sample && j == len(s.Tokens)-1) {
				b.sampled = append(b.sampled, int32(r))
			}
			r++
		}
	}
	if b.hook != nil {
		b.hook(0, b.h[:M*C], M)
	}

	b.planAttention(batch)
	for l := range c.NLayer {
		lw := &w.Layers[l]
		b.layerNorm(b.xn[:M*C], b.h[:M*C], lw.LN1W, lw.LN1B)
		pl := &b.packed[l]
		b.matmul(b.qkv, b.xn, pl.attn, lw.AttnB, M, mmStore)
		b.writeKV(l, batch, M)
		b.attention(l, batch)
		b.matmul(b.h, b.att, pl.attnProj, lw.AttnProjB, M, mmAdd)
		b.layerNorm(b.xn[:M*C], b.h[:M*C], lw.LN2W, lw.LN2B)
		mode := mmGeluTanh
		if c.Activation == GeluErf {
			mode = mmGeluErf
		}
		b.matmul(b.fc, b.xn, pl.fc, lw.FCB, M, mode)
		b.matmul(b.h, b.fc, pl.proj, lw.ProjB, M, mmAdd)
		if b.hook != nil {
			b.hook(l+1, b.h[:M*C], M)
		}
	}

	// Only the sampled rows go through ln_f and the LM head.
	S := len(b.sampled)
	for i, row := range b.sampled {
		layerNorm(b.hs[i*C:(i+1)*C], b.h[int(row)*C:(int(row)+1)*C], w.LNFW, w.LNFB, C, c.LayerNormEpsilon)
	}
	if b.hook != nil {
		b.hook(c.NLayer+1, b.hs[:S*C], S)
	}
	V := c.VocabSize
	logits := b.logitsFor(S, promptRows)
	headUnits := (V + headPanels*f32.PanelWidth - 1) / (headPanels * f32.PanelWidth)
	if n := headUnits * S; n > cap(b.headBest) {
		b.headBest = make([]unitMax, n)
	}
	b.head = headTask{x: b.hs[:S*C], w: b.lmHead, y: logits, rows: S, c: C, best: b.headBest[:headUnits*S]}
	b.pool.parallel(&b.head, headUnits, 1)
	out := b.out[:S]
	for i := range out {
		row := logits[i*V : (i+1)*V]
		out[i] = engine.SampleRow{Argmax: b.head.argmaxOf(i, headUnits)}
		if b.wantLogits(batch, int(b.sampled[i])) {
			out[i].Logits = row
		}
	}
	return out, nil
}

// wantLogits reports whether the sequence of batch row r asked for logits.
func (b *CPUBackend) wantLogits(batch *engine.Batch, r int) bool {
	s := &batch.Seqs[b.rowSeq[r]]
	return s.NeedLogits || s.PromptLogits
}

// lnRows is the rows per layer-norm unit: below two units a step's layer
// norm runs on the caller (a decode step's few rows take microseconds).
const lnRows = 16

// layerNorm normalises the rows of x into y across the pool.
func (b *CPUBackend) layerNorm(y, x, g, bias []float32) {
	C := b.cfg.NEmbd
	b.ln = lnTask{y: y, x: x, g: g, b: bias, c: C, eps: b.cfg.LayerNormEpsilon}
	b.pool.parallel(&b.ln, len(x)/C, lnRows)
}

// lnTask is layerNorm over units of rows.
type lnTask struct {
	y, x, g, b []float32
	c          int
	eps        float64
}

func (t *lnTask) run(_, lo, hi int) {
	layerNorm(t.y[lo*t.c:hi*t.c], t.x[lo*t.c:hi*t.c], t.g, t.b, t.c, t.eps)
}

// layerNorm normalises each row of x (width c) into y with the
// vectorised f32.LayerNorm (float32 sums in two passes over the centred
// row; within a few float32 ulps of a float64 computation).
func layerNorm(y, x, g, bias []float32, c int, eps float64) {
	for r := 0; r+c <= len(x); r += c {
		f32.LayerNorm(y[r:r+c], x[r:r+c], g, bias, eps)
	}
}
