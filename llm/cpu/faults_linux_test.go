//go:build linux && !race

package cpu

import (
	"syscall"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
)

// minorFaults is the process's minor page faults so far.
func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// TestSteadyStateAllocationsNoPageFaults checks the other half of a steady
// state: decode steps that write into fresh KV blocks do not fault pages
// in, because AllocateKV made the whole cache resident. Eight sequences
// decode 128 positions each, writing 2 MiB of keys and values into blocks
// never touched before; a cache left to fault on first touch takes about
// 2,000 faults here (4 KiB pages), a resident one none (the allowance is
// for the runtime's own heap growth).
func TestSteadyStateAllocationsNoPageFaults(t *testing.T) {
	m := randomModel(t, "faults", gpt2Config(300, 256, 256, 4, 4), 5, 0.1)
	const seqs, steps, blockSize = 8, 128, 16
	h := newHarness(t, m, seqs*steps/blockSize, blockSize, Options{})
	var batch engine.Batch
	for i := range seqs {
		id := kv.SeqID(i + 1)
		if ok, _ := h.kv.Allocate(id, steps); !ok {
			t.Fatal("allocate")
		}
		batch.Seqs = append(batch.Seqs, engine.SeqBatch{ID: id, Tokens: []int{i}, BlockTable: h.kv.BlockTable(id), Sample: true})
	}
	batch.NumTokens = seqs
	step := func(pos int) {
		for i := range batch.Seqs {
			batch.Seqs[i].StartPos = pos
		}
		if _, err := h.b.Forward(&batch); err != nil {
			t.Fatal(err)
		}
	}
	step(0) // grows the per-step buffers
	before := minorFaults(t)
	for pos := 1; pos < steps; pos++ {
		step(pos)
	}
	n := minorFaults(t) - before
	if n > 100 {
		t.Errorf("%d decode steps into fresh KV blocks took %d page faults, want none", steps-1, n)
	}
	t.Logf("%d decode steps into fresh KV blocks: %d page faults", steps-1, n)
}
