package cpu

import (
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine/enginetest"
	"github.com/tinyserve/tinyserve/llm/kv"
)

// TestSharedBlocksWithinOneStep: with prefix caching a step may hold a
// sequence that computes a prompt and, later in the batch, one that shares
// the prompt's whole blocks and starts after them, reading K and V that the
// same forward pass writes. Both last rows must match PyTorch's golden.
func TestSharedBlocksWithinOneStep(t *testing.T) {
	for _, ck := range checkpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			const blockSize = 16
			h := newHarness(t, m, 2*blocksFor(g), blockSize, Options{})
			mgr, err := kv.New(2*blocksFor(g), blockSize, kv.WithPrefixCaching())
			if err != nil {
				t.Fatal(err)
			}
			d := diffTracker{}
			shared := 0
			for i := range g.Cases {
				c := &g.Cases[i]
				a, b := kv.SeqID(2*i+1), kv.SeqID(2*i+2)
				batch, start := enginetest.SharedPrefixBatch(t, mgr, a, b, c.InputIDs)
				shared += start
				rows, err := h.b.Forward(batch)
				if err != nil {
					t.Fatal(err)
				}
				checkLast(t, d, c, rows[0].Logits, ck.tol)
				checkLast(t, d, c, rows[1].Logits, ck.tol)
				for _, id := range []kv.SeqID{a, b} {
					if err := mgr.Free(id); err != nil {
						t.Fatal(err)
					}
				}
			}
			if shared == 0 {
				t.Fatal("no prompt shared a block: the test exercises nothing")
			}
			d.log(t)
		})
	}
}
