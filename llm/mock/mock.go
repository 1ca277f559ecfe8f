// Package mock is a deterministic backend for tests and benchmarks: the next
// token is a pure function of the sequence's tokens so far (its prompt and
// position), computed through the same paged KV path as a real model, with
// fault injection and an optional latency model that makes it behave like a
// device. Its tokenizer is byte-level (256 bytes plus <|endoftext|>).
package mock

import (
	"errors"
	"fmt"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
)

// Latency models a device: each Forward sleeps
// PerStep + PerPrefillToken*(prefill tokens) + PerDecodeSeq*(decoding sequences).
type Latency struct {
	PerStep         time.Duration
	PerPrefillToken time.Duration
	PerDecodeSeq    time.Duration
}

// Config sets up a mock backend. The zero value is a fast, fault-free mock
// that never emits EOS.
type Config struct {
	// EOSEvery, when positive, makes the mock emit <|endoftext|> wherever
	// its hash of the context is divisible by EOSEvery (about one token in
	// EOSEvery). 0 means never.
	EOSEvery uint64
	// KVBlocks is how many KV blocks the mock can hold; 0 means 4096.
	KVBlocks int
	// FailAtStep makes the Nth Forward call (1-based) return an error; 0
	// means never.
	FailAtStep int
	// PanicAtStep makes the Nth Forward call panic; 0 means never.
	PanicAtStep int
	// Latency is the simulated device time of each step.
	Latency Latency
	// Sleep waits out the latency; nil means time.Sleep.
	Sleep func(time.Duration)
}

// ErrInjected is the error FailAtStep returns.
var ErrInjected = errors.New("mock: injected failure")

// vocabSize is 256 bytes plus <|endoftext|>.
const vocabSize = 257

// alphabet is what the mock writes: lower-case letters and spaces, so
// output is readable and stop strings can be tested.
const alphabet = "abcdefghijklmnopqrstuvwxyz     "

// Backend is the mock engine.Backend. Its "KV cache" holds, for each
// position, a rolling hash of the sequence up to it; the next token is
// derived from the hash at the last position, read through the block table.
// A wrong block table or position therefore changes the output.
type Backend struct {
	cfg       Config
	blockSize int
	cache     []uint64 // [block*blockSize + slot]
	steps     int
	rows      []engine.SampleRow
	logits    []float32
	// promptSized is whether a step's prompt rows sized logits (dropped
	// at the next step without).
	promptSized bool
}

// NewBackend returns a mock backend.
func NewBackend(cfg Config) *Backend {
	if cfg.KVBlocks == 0 {
		cfg.KVBlocks = 4096
	}
	if cfg.Sleep == nil {
		cfg.Sleep = time.Sleep
	}
	return &Backend{cfg: cfg}
}

// Info describes the mock model for engine.New.
func Info() llm.ModelInfo {
	return llm.ModelInfo{ID: "mock", MaxModelLen: 4096, VocabSize: vocabSize, EOSTokenID: EOSTokenID, Backend: "mock"}
}

// NewEngine builds an engine on a new mock backend with the byte tokenizer.
func NewEngine(cfg Config, ecfg engine.Config) (*engine.Engine, error) {
	return engine.New(NewBackend(cfg), NewTokenizer(), Info(), ecfg)
}

// MaxKVBlocks implements engine.Backend.
func (b *Backend) MaxKVBlocks(blockSize int) (int, error) { return b.cfg.KVBlocks, nil }

// AllocateKV implements engine.Backend.
func (b *Backend) AllocateKV(numBlocks, blockSize int) error {
	if numBlocks < 1 || blockSize < 1 {
		return fmt.Errorf("mock: bad KV shape %d x %d", numBlocks, blockSize)
	}
	b.blockSize = blockSize
	b.cache = make([]uint64, numBlocks*blockSize)
	return nil
}

// mix folds one token into the rolling hash (a SplitMix64 round).
func mix(h uint64, tok int) uint64 {
	h += 0x9e3779b97f4a7c15 ^ uint64(tok)*0xff51afd7ed558ccd
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
	h = (h ^ (h >> 27)) * 0x94d049bb133111eb
	return h ^ (h >> 31)
}

// NextToken is the token the mock produces after a context whose rolling
// hash is h; exported so tests can predict outputs.
func (b *Backend) NextToken(h uint64) int {
	if b.cfg.EOSEvery > 0 && (h>>8)%b.cfg.EOSEvery == 0 {
		return EOSTokenID
	}
	return int(alphabet[h%uint64(len(alphabet))])
}

// Expected returns the tokens the mock generates greedily after prompt,
// ignoring EOS, computed without any KV cache: the reference the paged path
// must match.
func Expected(cfg Config, prompt []int, n int) []int {
	b := &Backend{cfg: cfg}
	var h uint64
	for _, t := range prompt {
		h = mix(h, t)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = b.NextToken(h)
		h = mix(h, out[i])
	}
	return out
}

// Forward implements engine.Backend.
func (b *Backend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	b.steps++
	if b.steps == b.cfg.FailAtStep {
		return nil, fmt.Errorf("%w at step %d", ErrInjected, b.steps)
	}
	if b.steps == b.cfg.PanicAtStep {
		panic(fmt.Sprintf("mock: injected panic at step %d", b.steps))
	}
	// Size the logits buffer once per step: rows handed out must not move.
	numRows, promptRows := 0, false
	for i := range batch.Seqs {
		if batch.Seqs[i].PromptLogits {
			numRows += len(batch.Seqs[i].Tokens)
			promptRows = true
		} else if batch.Seqs[i].Sample {
			numRows++
		}
	}
	need := numRows * vocabSize
	if !promptRows && b.promptSized {
		// A step with prompt logits grew the buffer to its prompt rows:
		// let that go, rows handed out included, as the real backends do.
		clear(b.rows[:cap(b.rows)])
		b.logits = nil
	}
	b.rows = b.rows[:0]
	if len(b.logits) < need {
		b.logits = make([]float32, need)
		b.promptSized = promptRows
	}
	var prefill, decode int
	for i := range batch.Seqs {
		s := &batch.Seqs[i]
		if s.Sample && len(s.Tokens) == 1 {
			decode++
		} else {
			prefill += len(s.Tokens)
		}
		var h uint64
		if s.StartPos > 0 {
			slot, err := b.slot(s, s.StartPos-1)
			if err != nil {
				return nil, err
			}
			h = b.cache[slot]
		}
		for k, tok := range s.Tokens {
			h = mix(h, tok)
			slot, err := b.slot(s, s.StartPos+k)
			if err != nil {
				return nil, err
			}
			b.cache[slot] = h
			if s.PromptLogits {
				b.rows = append(b.rows, b.row(h, true, len(b.rows)))
			}
		}
		if s.Sample && !s.PromptLogits {
			b.rows = append(b.rows, b.row(h, s.NeedLogits, len(b.rows)))
		}
	}
	if l := b.cfg.Latency; l != (Latency{}) {
		b.cfg.Sleep(l.PerStep + time.Duration(prefill)*l.PerPrefillToken + time.Duration(decode)*l.PerDecodeSeq)
	}
	return b.rows, nil
}

var _ engine.PromptLogitsBackend = (*Backend)(nil)

// ReturnsPromptLogits implements engine.PromptLogitsBackend: the row of
// each position is the one a sample after it would get.
func (b *Backend) ReturnsPromptLogits() bool { return true }

// slot maps a position to its cache index through the block table.
func (b *Backend) slot(s *engine.SeqBatch, pos int) (int, error) {
	blk := pos / b.blockSize
	if blk >= len(s.BlockTable) {
		return 0, fmt.Errorf("mock: seq %d position %d beyond its %d blocks", s.ID, pos, len(s.BlockTable))
	}
	id := int(s.BlockTable[blk])
	if id < 0 || (id+1)*b.blockSize > len(b.cache) {
		return 0, fmt.Errorf("mock: seq %d block id %d outside the pool", s.ID, id)
	}
	return id*b.blockSize + pos%b.blockSize, nil
}

// row builds a sampled row: the argmax always, and deterministic logits in
// which the mock's token leads by a wide margin when asked.
func (b *Backend) row(h uint64, needLogits bool, k int) engine.SampleRow {
	next := b.NextToken(h)
	if !needLogits {
		return engine.SampleRow{Argmax: next}
	}
	row := b.logits[k*vocabSize : (k+1)*vocabSize]
	x := h
	for i := range row {
		x = mix(x, i)
		row[i] = float32(x%1000) / 250 // in [0, 4)
	}
	row[next] = 8
	return engine.SampleRow{Logits: row, Argmax: next}
}
