package gpt2

import (
	"fmt"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// goldenBlocks is a pool large enough for all six golden prompts with their
// greedy continuations at once (each needs at most 1024/16 = 64 blocks).
const goldenBlocks = 6 * 64

// TestGoldenPrefill runs each golden prompt as one prefill chunk, then 16
// greedy decode steps, and compares the last-position logits, the hidden
// vectors and the greedy tokens with the PyTorch float64 golden.
func TestGoldenPrefill(t *testing.T) {
	for _, ck := range checkpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h := newHarness(t, m, goldenBlocks, 16, CPUOptions{})
			d := diffTracker{}
			for i := range g.Cases {
				c := &g.Cases[i]
				id := kv.SeqID(i + 1)
				// Capture the hidden vectors of the last prompt position.
				n := len(c.InputIDs)
				hidden := map[int][]float32{}
				h.b.hook = func(stage int, x []float32, rows int) {
					C := m.Config.NEmbd
					row := n - 1
					if stage == m.Config.NLayer+1 {
						row = rows - 1
					}
					hidden[stage] = append([]float32(nil), x[row*C:(row+1)*C]...)
				}
				rows := h.step(part{id: id, tokens: c.InputIDs, sample: true})
				h.b.hook = nil
				if len(rows) != 1 {
					t.Fatalf("%s: %d sample rows, want 1", c.Name, len(rows))
				}
				checkLast(t, d, c, rows[0].Logits, ck.tol)
				checkVec(t, d, "hidden embed", hidden[0], c.Hidden.Embed, ck.tol)
				for l, want := range c.Hidden.Blocks {
					checkVec(t, d, "hidden blocks", hidden[l+1], want, ck.tol)
				}
				checkVec(t, d, "hidden ln_f", hidden[m.Config.NLayer+1], c.Hidden.LnF, ck.tol)
				checkGreedy(t, d, h, c, id, rows[0].Argmax, rows[0].Logits, ck.tol)
				if err := h.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			d.log(t)
		})
	}
}

// checkGreedy continues a prefilled sequence for the golden's greedy steps
// (each chosen token fed back), checking tokens exactly and the chosen
// logits within tol. first and firstLogits are the prefill's result.
func checkGreedy(t *testing.T, d diffTracker, h *harness, c *goldenCase, id kv.SeqID, first int, firstLogits []float32, tol float64) {
	t.Helper()
	want := c.Greedy.Tokens
	got := []int{first}
	chosen := []float32{firstLogits[first]}
	pos := len(c.InputIDs)
	for len(got) < len(want) {
		rows := h.step(part{id: id, tokens: []int{got[len(got)-1]}, start: pos, sample: true})
		pos++
		got = append(got, rows[0].Argmax)
		chosen = append(chosen, rows[0].Logits[rows[0].Argmax])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: greedy tokens %v, want %v", c.Name, got, want)
		return
	}
	checkVec(t, d, "greedy chosen logits", chosen, c.Greedy.ChosenLogits, tol)
}
