package cpu

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// TestGoldenPrefill runs each golden prompt as one prefill chunk, then 16
// greedy decode steps, and compares the last-position logits, the hidden
// vectors and the greedy tokens with the PyTorch float64 golden.
func TestGoldenPrefill(t *testing.T) {
	for _, ck := range checkpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h := newHarness(t, m, blocksFor(g), 16, Options{})
			d := diffTracker{}
			for i := range g.Cases {
				c := &g.Cases[i]
				if raceEnabled && len(c.InputIDs) > raceMaxPrompt {
					continue
				}
				id := kv.SeqID(i + 1)
				// Capture the hidden vectors of the last prompt position.
				n := len(c.InputIDs)
				hidden := map[int][]float32{}
				h.b.hook = func(stage int, x []float32, rows int) {
					C := m.Config.Hidden
					row := n - 1
					if stage == m.Config.Layers+1 {
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
				checkVec(t, d, "hidden final norm", hidden[m.Config.Layers+1], c.finalNorm(), ck.tol)
				checkGreedy(t, d, h, c, id, rows[0].Argmax, rows[0].Logits, ck.tol)
				if err := h.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			d.log(t)
		})
	}
}

// checkGreedy continues a prefilled sequence for the golden's greedy
// steps, feeding each chosen token back, and compares tokens exactly up to
// the first step whose golden margin (top-1 minus top-2, where the golden
// gives it) is under tol: from there float32 may take the runner-up. The
// chosen logits are compared within tol. first and firstLogits are the
// prefill's result.
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
	n := len(want)
	for i, m := range c.Greedy.Margins {
		if m < tol {
			n = i + 1 // the near-tie step itself may differ
			break
		}
	}
	if !slices.Equal(got[:n-1], want[:n-1]) || (n == len(want) && got[n-1] != want[n-1]) {
		t.Errorf("%s: greedy tokens %v, want %v", c.Name, got, want)
		return
	}
	checkVec(t, d, "greedy chosen logits", chosen[:n], c.Greedy.ChosenLogits[:n], tol)
}

// TestGoldenPositionStats computes the logits of every prompt position
// (prefill in chunks, every row sampled) and compares the per-position sum,
// max, argmax and top-1/top-2 margin, which catch mask and position bugs the
// last row hides, plus the all-position statistics of one prompt. Prompts
// over 300 tokens are checked by the other tests only (the Llama family's
// 2,100-token one is 319 million logits); under the race detector only
// those up to 128 tokens are checked.
func TestGoldenPositionStats(t *testing.T) {
	for _, ck := range checkpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h := newHarness(t, m, blocksFor(g), 16, Options{})
			h.allRows = true
			d := diffTracker{}
			V := m.Config.VocabSize
			for i := range g.Cases {
				c := &g.Cases[i]
				if raceEnabled && len(c.InputIDs) > 128 || ck.name[:4] != "gpt2" && len(c.InputIDs) > 300 {
					continue
				}
				id := kv.SeqID(i + 1)
				ps := &c.PositionStats
				var all statsAcc
				const chunk = 64
				for start := 0; start < len(c.InputIDs); start += chunk {
					toks := c.InputIDs[start:min(start+chunk, len(c.InputIDs))]
					rows := h.step(part{id: id, tokens: toks, start: start, sample: true})
					if len(rows) != len(toks) {
						t.Fatalf("%s: %d rows, want %d", c.Name, len(rows), len(toks))
					}
					for j, r := range rows {
						p := start + j
						var st statsAcc
						st.add(r.Logits, 0)
						if c.Name == ck.allStats {
							all.add(r.Logits, p*V)
						}
						// The sum of a vocabulary of logits: relative to the
						// sum of their absolute values, as for the *_stats
						// sums.
						sumErr := abs(st.sum-ps.Sum[p]) / st.sumAbs
						d.note("position sum (rel)", sumErr)
						if sumErr > statsRel {
							t.Errorf("%s position %d: sum %.9g, want %.9g", c.Name, p, st.sum, ps.Sum[p])
						}
						d.note("position max", abs(st.max-ps.Max[p]))
						if abs(st.max-ps.Max[p]) > ck.tol {
							t.Errorf("%s position %d: max %.9g, want %.9g", c.Name, p, st.max, ps.Max[p])
						}
						if ps.Margin[p] > ck.tol && r.Argmax != ps.Argmax[p] {
							t.Errorf("%s position %d: argmax %d, want %d (margin %.3g)", c.Name, p, r.Argmax, ps.Argmax[p], ps.Margin[p])
						}
						if r.Argmax == ps.Argmax[p] {
							margin := float64(r.Logits[r.Argmax]) - secondLargest(r.Logits, r.Argmax)
							d.note("position margin", abs(margin-ps.Margin[p]))
							if abs(margin-ps.Margin[p]) > 2*ck.tol {
								t.Errorf("%s position %d: margin %.9g, want %.9g", c.Name, p, margin, ps.Margin[p])
							}
						}
					}
				}
				if c.Name == ck.allStats {
					all.check(t, d, c.Name+" all_logits_stats", c.AllStats, ck.tol)
				}
				if err := h.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			d.log(t)
		})
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// secondLargest is the largest value other than x[skip].
func secondLargest(x []float32, skip int) float64 {
	best := float32(-1e30)
	for i, v := range x {
		if i != skip && v > best {
			best = v
		}
	}
	return float64(best)
}

// TestGoldenChunked prefills every prompt in chunks of 7 tokens (the KV of
// earlier chunks read back through the block table), then decodes greedily.
func TestGoldenChunked(t *testing.T) {
	for _, ck := range checkpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h := newHarness(t, m, blocksFor(g), 16, Options{})
			d := diffTracker{}
			for i := range g.Cases {
				c := &g.Cases[i]
				if raceEnabled && len(c.InputIDs) > raceMaxPrompt {
					continue
				}
				id := kv.SeqID(i + 1)
				var last []float32
				var first int
				for start := 0; start < len(c.InputIDs); start += 7 {
					end := min(start+7, len(c.InputIDs))
					rows := h.step(part{id: id, tokens: c.InputIDs[start:end], start: start, sample: end == len(c.InputIDs)})
					if end < len(c.InputIDs) && len(rows) != 0 {
						t.Fatalf("%s: a chunk that does not end the prompt returned %d rows", c.Name, len(rows))
					}
					if end == len(c.InputIDs) {
						last, first = rows[0].Logits, rows[0].Argmax
					}
				}
				checkLast(t, d, c, last, ck.tol)
				checkGreedy(t, d, h, c, id, first, last, ck.tol)
				if err := h.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			d.log(t)
		})
	}
}

// TestGoldenBatched runs all the prompts in one step (GPT-2: 1478 rows, the
// 1009-token prompt among them; the Llama family: 2,651 rows), then decodes
// them all together (GPT-2's longest up to exactly its 1024 positions):
// batch composition must change neither values nor tokens. The block pool is just big enough, and blocks
// come from a pool already churned by an earlier sequence, so ids are not
// in order.
func TestGoldenBatched(t *testing.T) {
	for _, ck := range checkpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			if raceEnabled && ck.name[:4] != "gpt2" {
				t.Skip("the 2,100-token prompt under the race detector: TestGoldenPrefill covers the rest")
			}
			need := 0
			for _, c := range g.Cases {
				need += (len(c.InputIDs) + len(c.Greedy.Tokens) - 1 + 15) / 16
			}
			h := newHarness(t, m, need+3, 16, Options{Threads: 3})
			// Churn: a throwaway sequence takes and frees some blocks so
			// that the real ones get a non-contiguous mix of ids.
			h.step(part{id: 99, tokens: g.Cases[2].InputIDs, sample: true})
			if err := h.kv.Free(99); err != nil {
				t.Fatal(err)
			}
			d := diffTracker{}
			var parts []part
			for i := range g.Cases {
				parts = append(parts, part{id: kv.SeqID(i + 1), tokens: g.Cases[i].InputIDs, sample: true})
			}
			rows := h.step(parts...)
			if len(rows) != len(g.Cases) {
				t.Fatalf("%d rows, want %d", len(rows), len(g.Cases))
			}
			got := make([][]int, len(g.Cases))
			chosen := make([][]float32, len(g.Cases))
			for i := range g.Cases {
				checkLast(t, d, &g.Cases[i], rows[i].Logits, ck.tol)
				got[i] = []int{rows[i].Argmax}
				chosen[i] = []float32{rows[i].Logits[rows[i].Argmax]}
			}
			for step := 1; step < 16; step++ {
				parts = parts[:0]
				for i, c := range g.Cases {
					parts = append(parts, part{id: kv.SeqID(i + 1), tokens: []int{got[i][step-1]}, start: len(c.InputIDs) + step - 1, sample: true})
				}
				rows := h.step(parts...)
				for i := range rows {
					got[i] = append(got[i], rows[i].Argmax)
					chosen[i] = append(chosen[i], rows[i].Logits[rows[i].Argmax])
				}
			}
			for i, c := range g.Cases {
				if len(c.Greedy.Margins) > 0 && slices.Min(c.Greedy.Margins) < ck.tol {
					t.Fatalf("%s: a near-tie in the golden's greedy steps: compare up to it", c.Name)
				}
				if fmt.Sprint(got[i]) != fmt.Sprint(c.Greedy.Tokens) {
					t.Errorf("%s: batched greedy tokens %v, want %v", c.Name, got[i], c.Greedy.Tokens)
					continue
				}
				checkVec(t, d, "greedy chosen logits", chosen[i], c.Greedy.ChosenLogits, ck.tol)
			}
			if l := len(g.Cases[5].InputIDs) + 15; m.Config.MaxPositions == 1024 && l != 1024 {
				t.Errorf("longest case reaches %d positions, want 1024", l)
			}
			d.log(t)
		})
	}
}
