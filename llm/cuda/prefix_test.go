package cuda

import (
	"math"
	"testing"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/engine/enginetest"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// TestGPUEnginePrefixCaching: the engine with prefix caching on the GPU
// (float32) continues each golden prompt with the golden's greedy tokens,
// and then the prompt extended by half of them, whose first whole blocks
// (decode blocks included) come from the cache, with the other half.
func TestGPUEnginePrefixCaching(t *testing.T) { checkEnginePrefixCaching(t, newGPUOpts) }

// TestEmuEnginePrefixCaching is TestGPUEnginePrefixCaching on the emulated
// kernels.
func TestEmuEnginePrefixCaching(t *testing.T) { checkEnginePrefixCaching(t, newEmuBackend) }

func checkEnginePrefixCaching(t *testing.T, newDev newDevice) {
	m, cases := loadGoldenCases(t, hotFixture(t))
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	b := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
	e, err := engine.New(b, tok, m.Info(), engine.Config{NumBlocks: goldenBlocks, PrefixCaching: true, MaxNumBatchedTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	golden := make([]enginetest.GoldenCase, len(cases))
	for i, c := range cases {
		golden[i] = enginetest.GoldenCase{Name: c.Name, Prompt: c.InputIDs, Greedy: c.Greedy.Tokens}
	}
	reused := enginetest.CheckPrefixCachingGolden(t, e, golden, 16)
	t.Logf("%d prompt tokens came from the prefix cache", reused)
}

// TestGPUSharedBlocksWithinOneStep: one step holds a sequence computing a
// golden prompt and, after it in the batch, one that shares the prompt's
// whole blocks and starts after them, reading K and V the same step writes
// (the qkv kernel writes every row's before attention runs). Both last rows
// must give the golden's top-10 logits (float32).
func TestGPUSharedBlocksWithinOneStep(t *testing.T) { checkSharedBlocksWithinOneStep(t, newGPUOpts) }

// TestEmuSharedBlocksWithinOneStep is TestGPUSharedBlocksWithinOneStep on
// the emulated kernels.
func TestEmuSharedBlocksWithinOneStep(t *testing.T) {
	checkSharedBlocksWithinOneStep(t, newEmuBackend)
}

func checkSharedBlocksWithinOneStep(t *testing.T, newDev newDevice) {
	const tol, blockSize = 5e-5, 16
	m, cases := loadGoldenCases(t, hotFixture(t))
	b := newDev(t, m, Options{DType: "float32"}, goldenBlocks)
	if err := b.AllocateKV(goldenBlocks, blockSize); err != nil {
		t.Fatal(err)
	}
	mgr, err := kv.New(goldenBlocks, blockSize, kv.WithPrefixCaching())
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for i, c := range cases {
		x, y := kv.SeqID(2*i+1), kv.SeqID(2*i+2)
		batch, start := enginetest.SharedPrefixBatch(t, mgr, x, y, c.InputIDs)
		shared += start
		rows, err := b.Forward(batch)
		if err != nil {
			t.Fatal(err)
		}
		for r, row := range rows {
			for j, tok := range c.Top10.IDs {
				if d := math.Abs(float64(row.Logits[tok]) - c.Top10.Values[j]); d > tol {
					t.Errorf("%s row %d: logit[%d] = %.9g, golden %.9g", c.Name, r, tok, row.Logits[tok], c.Top10.Values[j])
				}
			}
		}
		for _, id := range []kv.SeqID{x, y} {
			if err := mgr.Free(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if shared == 0 {
		t.Fatal("no prompt shared a block: the test exercises nothing")
	}
}
