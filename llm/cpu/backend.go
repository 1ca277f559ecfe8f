// Package cpu runs any model of llm/model on the CPU as an engine.Backend:
// a flattened batch of prefill chunks and decodes per step, attention read
// through the block tables from a paged KV cache preallocated for the whole
// pool, and the LM head only for the rows the engine samples.
//
// New repacks every weight matrix once into the panel layout of
// internal/f32 (an attention's q, k and v side by side as one matrix, a
// gated MLP's gate and up likewise, the LM head from the embedding's
// transpose when tied), in float32 or bfloat16, so that a decode step
// streams each weight exactly once through AVX-512 or AVX2+FMA kernels
// (chosen at start-up; portable Go elsewhere). Matmuls split across a
// worker pool by column panels, and by rows for long prefills; attention
// uses the same package's vector kernels. Arithmetic is float32 throughout:
// norms, softmax and rotary angles (computed in float64, then rounded)
// follow Hugging Face's modeling code, and the golden tests compare with
// PyTorch float64 references.
package cpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/model"
)

// DefaultKVCacheBytes is the KV cache budget when Options.KVCacheBytes is
// zero: 1 GiB, capped at what DefaultKVSeqs full-context sequences need.
const DefaultKVCacheBytes = 1 << 30

// DefaultKVSeqs caps the default KV budget: a small model does not need a
// whole GiB, only room for this many sequences at the full context length.
const DefaultKVSeqs = 64

// MaxThreads bounds Options.Threads: each thread keeps scratch buffers of
// the context's length, so a mistyped count would exhaust memory before
// running anything.
const MaxThreads = 1024

// Options configures a Backend. The zero value is ready to use.
type Options struct {
	// Threads is the number of goroutines a forward pass is split across.
	// Zero means runtime.GOMAXPROCS(0) at construction; 1 runs everything
	// on the engine's goroutine.
	Threads int
	// KVCacheBytes is the memory budget, in bytes, for the paged KV cache
	// (keys and values of every layer, float32). MaxKVBlocks reports how
	// many blocks fit. Zero means DefaultKVCacheBytes capped at
	// DefaultKVSeqs sequences of the model's full context length; an
	// explicit value is used as is. Negative is an error.
	KVCacheBytes int64
	// WeightDType is how the backend stores the matrix weights it streams
	// every step (attention, MLP and LM head): "" or "float32", or
	// "bfloat16", which halves the bytes a decode step reads; arithmetic
	// stays float32, so logits move by about the weights' 2⁻⁹ relative
	// rounding, and not at all for a bfloat16 checkpoint. Embeddings and
	// norms keep their checkpoint's values. Other values are an error.
	WeightDType string
}

// Backend runs a model on the CPU as an engine.Backend.
//
// Like every backend it is used from one goroutine (the engine's); Forward
// is not safe for concurrent use. It splits each step across a pool of
// goroutines created once by New; Close stops them.
type Backend struct {
	m       *model.Model
	cfg     model.Config
	opts    Options
	pool    *pool
	closed  bool
	threads int

	// The matrices repacked once for the f32 kernels (see packWeights);
	// the matmuls read only these, never the model's tensors.
	packed []packedLayer
	lmHead *f32.Packed
	// norms are the norm weights widened to float32 once.
	norms   []layerNorms
	final   normVecs
	invFreq []float64 // rotary inverse frequencies (nil without rotary)
	qkvW    int       // width of a row of qkv: QDim + 2·KVDim

	// Paged KV cache: kc and vc are [layer][block][kvhead][slot][headDim],
	// so one head's keys in one block are contiguous for the attention loop.
	kc, vc    []float32
	kvMem     [2]*f32.Buffer // the memory of kc and vc: kept alive with them
	numBlocks int
	blockSize int

	// Per-step buffers, grown (never shrunk) to the largest batch seen.
	rows    int       // capacity in rows of the buffers below
	h       []float32 // residual stream [rows, C]
	xn      []float32 // norm output [rows, C]
	qkv     []float32 // [rows, qkvW]
	att     []float32 // attention output [rows, QDim]
	fc      []float32 // MLP hidden [rows, Intermediate] (gated: [rows, 2·Intermediate])
	rowSeq  []int32   // batch index of each row's sequence
	rowPos  []int32   // position of each row
	ropeCS  []float32 // per row: HeadDim/2 cosines then HeadDim/2 sines
	sampled []int32   // rows that go through the final norm and the LM head
	hs      []float32 // gathered, normalised sampled rows [S, C]
	logits  []float32 // [S, V]
	// promptLogits holds the rows of a step with prompt logits (logitsFor).
	promptLogits []float32
	out          []engine.SampleRow
	headBest     []unitMax   // the LM head's per-unit row maxima (headTask.best)
	scores       [][]float32 // per worker attention scores, grown to the longest context seen
	valueSlice   [][]float32 // per worker, one head's weighted values of a later kBlock slice
	units        []attnUnit  // this step's attention units (see planAttention)
	blk          []blockScratch
	blkLen       int // positions blk is sized for

	// q8x holds a matmul's rows of x quantized for the integer Q8_0
	// kernels (see matmul), grown to the largest product seen.
	q8x f32.Q8Rows

	// Tasks are reused structs so that starting one allocates nothing.
	mm matmulTask
	qt quantTask
	at attnTask
	nt normTask
	pt prepTask
	ht headTask

	// Test hook (nil in production): it sees the residual stream after the
	// embedding (stage 0) and after each block (stage i+1), and the final
	// norm's output of the sampled rows (stage Layers+1).
	hook func(stage int, x []float32, rows int)
}

var _ engine.PromptLogitsBackend = (*Backend)(nil)

// New returns a backend running m. Call AllocateKV (the engine does, with
// the pool size it chose) before Forward, and Close when done. The model
// must stay open while the backend runs: embeddings are read from it.
func New(m *model.Model, opts Options) (*Backend, error) {
	if m == nil {
		return nil, errors.New("cpu: nil model")
	}
	if opts.Threads < 0 || opts.Threads > MaxThreads {
		return nil, fmt.Errorf("cpu: Options.Threads must be in [0, %d], got %d", MaxThreads, opts.Threads)
	}
	if opts.KVCacheBytes < 0 {
		return nil, fmt.Errorf("cpu: Options.KVCacheBytes must be non-negative, got %d", opts.KVCacheBytes)
	}
	var bf16 bool
	switch opts.WeightDType {
	case "", "float32":
	case "bfloat16":
		bf16 = true
	default:
		return nil, fmt.Errorf("cpu: Options.WeightDType must be \"float32\" or \"bfloat16\", got %q", opts.WeightDType)
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	cfg := m.Config
	threads := opts.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	b := &Backend{m: m, cfg: cfg, opts: opts, threads: threads, invFreq: cfg.InvFreq(), qkvW: cfg.QDim() + 2*cfg.KVDim()}
	b.packed, b.lmHead = packWeights(&m.Weights, &cfg, threads, bf16)
	b.norms, b.final = widenNorms(&m.Weights)
	b.pool = newPool(threads)
	b.scores = make([][]float32, threads)
	b.valueSlice = make([][]float32, threads)
	for i := range b.valueSlice {
		b.valueSlice[i] = make([]float32, cfg.HeadDim)
	}
	return b, nil
}

// Info describes the model, with Backend "cpu".
func (b *Backend) Info() llm.ModelInfo {
	info := b.m.Info()
	info.Backend = "cpu"
	return info
}

// Model is the model the backend runs.
func (b *Backend) Model() *model.Model { return b.m }

// KVBytesPerBlock is the memory one KV block of blockSize tokens takes:
// keys and values of every layer's KV heads, float32.
func (b *Backend) KVBytesPerBlock(blockSize int) int64 {
	return b.cfg.KVBytesPerToken(4) * int64(blockSize)
}

// MaxKVBlocks implements engine.Backend: how many blocks of blockSize
// tokens fit in the KV budget (Options.KVCacheBytes).
func (b *Backend) MaxKVBlocks(blockSize int) (int, error) {
	return maxKVBlocks(&b.cfg, b.opts.KVCacheBytes, blockSize)
}

// Threads is the number of goroutines a forward pass is split across:
// Options.Threads, or GOMAXPROCS when that is 0.
func (b *Backend) Threads() int { return b.threads }

// KVBudget is the KV cache budget in bytes that MaxKVBlocks divides into
// blocks of blockSize tokens, and where it comes from: Options.KVCacheBytes,
// or the default (DefaultKVCacheBytes, capped at DefaultKVSeqs sequences
// of the full context).
func (b *Backend) KVBudget(blockSize int) (bytes int64, why string) {
	if b.opts.KVCacheBytes != 0 {
		return b.opts.KVCacheBytes, "Options.KVCacheBytes (--kv-cache-bytes)"
	}
	budget := kvBudget(&b.cfg, 0, max(blockSize, 1))
	if budget < DefaultKVCacheBytes {
		return budget, fmt.Sprintf("the default: room for %d sequences of the full context (%d tokens), less than %d bytes", DefaultKVSeqs, b.cfg.MaxPositions, int64(DefaultKVCacheBytes))
	}
	return budget, fmt.Sprintf("the default: %d bytes", int64(DefaultKVCacheBytes))
}

// kvBudget applies the budget rules of Options.KVCacheBytes.
func kvBudget(c *model.Config, budget int64, blockSize int) int64 {
	if budget == 0 {
		per := c.KVBytesPerToken(4) * int64(blockSize)
		perSeq := per * int64((c.MaxPositions+blockSize-1)/blockSize)
		budget = min(DefaultKVCacheBytes, DefaultKVSeqs*perSeq)
	}
	return budget
}

// maxKVBlocks applies the budget rules of Options.KVCacheBytes.
func maxKVBlocks(c *model.Config, budget int64, blockSize int) (int, error) {
	if blockSize < 1 {
		return 0, fmt.Errorf("cpu: block size must be positive, got %d", blockSize)
	}
	per := c.KVBytesPerToken(4) * int64(blockSize)
	budget = kvBudget(c, budget, blockSize)
	n := budget / per
	if n < 1 {
		return 0, fmt.Errorf("cpu: KV cache budget of %d bytes is smaller than one block (%d bytes for %d tokens)", budget, per, blockSize)
	}
	return int(min(n, math.MaxInt32)), nil
}

// AllocateKV implements engine.Backend: it allocates the physical cache for
// exactly numBlocks blocks (replacing any earlier one). Go hands out fresh
// zeroed pages lazily, so untouched blocks cost address space, not RAM.
func (b *Backend) AllocateKV(numBlocks, blockSize int) error {
	if numBlocks < 1 || blockSize < 1 {
		return fmt.Errorf("cpu: AllocateKV needs positive numBlocks and blockSize, got %d and %d", numBlocks, blockSize)
	}
	n := int64(b.cfg.Layers) * int64(numBlocks) * int64(blockSize) * int64(b.cfg.KVDim())
	if n > math.MaxInt/4 || n > 1<<40 {
		return fmt.Errorf("cpu: KV cache of %d blocks x %d tokens is too large", numBlocks, blockSize)
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
func (b *Backend) Close() error {
	if !b.closed {
		b.closed = true
		b.pool.close()
	}
	return nil
}

// grow makes the per-step buffers hold at least rows rows and sampled
// sampled rows, and the attention scratch maxPos positions. Buffers only
// grow, so a steady state allocates nothing.
func (b *Backend) grow(rows, sampled, maxPos int) {
	c := &b.cfg
	if rows > b.rows {
		n := max(rows, 2*b.rows)
		b.rows = n
		b.h = make([]float32, n*c.Hidden)
		b.xn = make([]float32, n*c.Hidden)
		b.qkv = make([]float32, n*b.qkvW)
		b.att = make([]float32, n*c.QDim())
		b.fc = make([]float32, n*len(b.m.Weights.Layers[0].Up)*c.Intermediate)
		b.rowSeq = make([]int32, n)
		b.rowPos = make([]int32, n)
		if c.Rotary {
			b.ropeCS = make([]float32, n*c.HeadDim)
		}
		b.sampled = make([]int32, 0, n)
	}
	if sampled > len(b.out) {
		n := max(sampled, 2*len(b.out))
		b.hs = make([]float32, n*c.Hidden)
		b.out = make([]engine.SampleRow, n)
	}
	if maxPos > len(b.scores[0]) {
		// Sized to the longest context seen, not the model's (32k for
		// Qwen, 128k for Llama 3.1), rounded up so that growing contexts
		// reallocate rarely.
		n := min(max(maxPos, 2*len(b.scores[0]), 256), c.MaxPositions)
		for i := range b.scores {
			b.scores[i] = make([]float32, n)
		}
	}
}

// logitsFor returns the logits buffer of a step with sampled rows. The
// rows of prompt logits (one per prompt position, hundreds of megabytes at
// a real vocabulary for a long prompt) get a buffer of their own, reused
// by the steps with prompt logits that follow (an evaluation run) and let
// go at the first step without, so that what serving keeps stays the size
// of the sampled rows.
func (b *Backend) logitsFor(sampled int, promptRows bool) []float32 {
	need := sampled * b.cfg.VocabSize
	if promptRows {
		if need > len(b.promptLogits) {
			b.promptLogits = make([]float32, need)
		}
		return b.promptLogits[:need]
	}
	if b.promptLogits != nil {
		// The rows handed out last time may point into the buffer: forget
		// them too, or a stale row past this step's count would keep all
		// of it alive.
		clear(b.out)
		b.promptLogits = nil
		b.headBest = nil // sized to the prompt rows; head sizes it anew
	}
	if need > len(b.logits) {
		b.logits = make([]float32, max(need, 2*len(b.logits)))
	}
	return b.logits[:need]
}

// ReturnsPromptLogits implements engine.PromptLogitsBackend: a sequence
// with PromptLogits set gets a row of logits per token.
func (b *Backend) ReturnsPromptLogits() bool { return true }

// validate checks a batch against the model and the KV pool, so that bad
// input is an error rather than an index panic deep in a kernel. It
// returns the largest position of the batch plus one.
func (b *Backend) validate(batch *engine.Batch) (int, error) {
	if b.closed {
		return 0, errors.New("cpu: Forward on a closed backend")
	}
	if b.kc == nil {
		return 0, errors.New("cpu: Forward before AllocateKV")
	}
	total, maxEnd := 0, 0
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		if len(s.Tokens) == 0 {
			return 0, fmt.Errorf("cpu: batch seq %d (id %d) has no tokens", i, s.ID)
		}
		end := s.StartPos + len(s.Tokens)
		if s.StartPos < 0 || end > b.cfg.MaxPositions {
			return 0, fmt.Errorf("cpu: batch seq %d (id %d): positions [%d, %d) outside the context [0, %d)", i, s.ID, s.StartPos, end, b.cfg.MaxPositions)
		}
		maxEnd = max(maxEnd, end)
		if need := (end + b.blockSize - 1) / b.blockSize; len(s.BlockTable) < need {
			return 0, fmt.Errorf("cpu: batch seq %d (id %d): block table has %d blocks, positions up to %d need %d", i, s.ID, len(s.BlockTable), end, need)
		} else {
			for _, id := range s.BlockTable[:need] {
				if id < 0 || int(id) >= b.numBlocks {
					return 0, fmt.Errorf("cpu: batch seq %d (id %d): block id %d outside the pool [0, %d)", i, s.ID, id, b.numBlocks)
				}
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || t >= b.cfg.VocabSize {
				return 0, fmt.Errorf("cpu: batch seq %d (id %d): token id %d outside the vocabulary [0, %d)", i, s.ID, t, b.cfg.VocabSize)
			}
		}
		total += len(s.Tokens)
	}
	if total != batch.NumTokens {
		return 0, fmt.Errorf("cpu: batch NumTokens is %d, its sequences hold %d tokens", batch.NumTokens, total)
	}
	return maxEnd, nil
}
