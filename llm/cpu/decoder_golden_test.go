package cpu

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
)

// The Llama-family goldens (testdata/{qwen2,llama,qwen3}-tiny): random
// bfloat16 checkpoints with real vocabularies, GQA, Llama 3 rope scaling,
// Qwen2's biases and Qwen3's q/k norms and explicit head_dim, against
// PyTorch float64 references written from Hugging Face's modeling code.
// Each README gives the tolerance: logits and hidden vectors within 1e-4
// with float32 compute and float64 rotary angles; greedy and top-10 ids
// exact except across the near-ties it lists.
var decoderCheckpoints = []checkpoint{{"qwen2-tiny", 1e-4}, {"llama-tiny", 1e-4}, {"qwen3-tiny", 1e-4}}

// decoderBlocks holds every golden prompt with its greedy continuation at
// once: seven sequences of at most 2116 tokens, in blocks of 16.
const decoderBlocks = 7 * 133

// raceMaxPrompt is the longest prompt the Llama-family goldens run under
// the race detector, which slows the forward about twentyfold.
const raceMaxPrompt = 300

// checkTop10 compares the top-10 ids with the golden's, allowing two
// neighbours whose golden values differ by less than tol to come in either
// order (the READMEs list such pairs), and their values within tol.
func checkTop10(t testing.TB, d diffTracker, c *goldenCase, logits []float32, tol float64) {
	t.Helper()
	got := top10(logits)
	want := c.Top10.IDs
	for i := 0; i < len(want); i++ {
		if got[i] == want[i] {
			continue
		}
		swapped := i+1 < len(want) && got[i] == want[i+1] && got[i+1] == want[i] &&
			math.Abs(c.Top10.Values[i]-c.Top10.Values[i+1]) < tol
		if !swapped {
			t.Errorf("%s: top-10 ids %v, want %v", c.Name, got, want)
			break
		}
		i++
	}
	vals := make([]float32, len(want))
	for i, id := range want {
		vals[i] = logits[id]
	}
	checkVec(t, d, "top10 values", vals, c.Top10.Values, tol)
	probe := make([]float32, len(c.Probe.IDs))
	for i, id := range c.Probe.IDs {
		probe[i] = logits[id]
	}
	checkVec(t, d, "probe logits", probe, c.Probe.Values, tol)
	var st statsAcc
	st.add(logits, 0)
	st.check(t, d, c.Name+" last_logits_stats", c.LastStats, tol)
}

// decodeGreedy continues a prefilled sequence for the golden's greedy
// steps, feeding each chosen token back, and compares tokens exactly up to
// the first step whose golden margin is under tol (from there float32 may
// take the runner-up), and the chosen logits within tol.
func decodeGreedy(t *testing.T, d diffTracker, h *harness, c *goldenCase, id kv.SeqID, first int, firstLogits []float32, tol float64) {
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
			n = i + 1 // the tie step itself may differ
			break
		}
	}
	if !slices.Equal(got[:n-1], want[:n-1]) || (n == len(want) && got[n-1] != want[n-1]) {
		t.Errorf("%s: greedy tokens %v, want %v", c.Name, got, want)
		return
	}
	checkVec(t, d, "greedy chosen logits", chosen[:n], c.Greedy.ChosenLogits[:n], tol)
}

// TestDecoderGoldens prefills each golden prompt in one step, then decodes
// 16 greedy tokens, and compares the last position's logits, the hidden
// vectors of the last position (embedding, every block, final norm) and the
// greedy tokens with the float64 references.
func TestDecoderGoldens(t *testing.T) {
	for _, ck := range decoderCheckpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h := newHarness(t, m, decoderBlocks, 16, Options{})
			d := diffTracker{}
			C := m.Config.Hidden
			for i := range g.Cases {
				c := &g.Cases[i]
				if raceEnabled && len(c.InputIDs) > raceMaxPrompt {
					continue
				}
				id := kv.SeqID(i + 1)
				n := len(c.InputIDs)
				hidden := map[int][]float32{}
				h.b.hook = func(stage int, x []float32, rows int) {
					row := n - 1
					if stage == m.Config.Layers+1 {
						row = rows - 1
					}
					hidden[stage] = slices.Clone(x[row*C : (row+1)*C])
				}
				rows := h.step(part{id: id, tokens: c.InputIDs, sample: true})
				h.b.hook = nil
				checkTop10(t, d, c, rows[0].Logits, ck.tol)
				checkVec(t, d, "hidden embed", hidden[0], c.Hidden.Embed, ck.tol)
				for l, want := range c.Hidden.Blocks {
					checkVec(t, d, fmt.Sprintf("hidden block %d", l), hidden[l+1], want, ck.tol)
				}
				checkVec(t, d, "hidden final norm", hidden[m.Config.Layers+1], c.Hidden.FinalNorm, ck.tol)
				decodeGreedy(t, d, h, c, id, rows[0].Argmax, rows[0].Logits, ck.tol)
				if err := h.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			d.log(t)
		})
	}
}

// TestDecoderGoldenPositions prefills each prompt in chunks of 37 tokens
// with every row's logits returned, so each chunk attends through the
// block table to the keys earlier chunks wrote, and compares every
// position's max, argmax (where the golden margin allows) and top-1/top-2
// margin: a wrong causal mask, a wrong RoPE position or a wrong GQA mapping
// shows at positions the last row hides.
func TestDecoderGoldenPositions(t *testing.T) {
	for _, ck := range decoderCheckpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h := newHarness(t, m, decoderBlocks, 16, Options{Threads: 2})
			h.allRows = true
			d := diffTracker{}
			for i := range g.Cases {
				c := &g.Cases[i]
				if len(c.InputIDs) > raceMaxPrompt {
					continue // the long prompt's rows are 319 million logits
				}
				id := kv.SeqID(i + 1)
				ps := &c.PositionStats
				const chunk = 37
				for start := 0; start < len(c.InputIDs); start += chunk {
					toks := c.InputIDs[start:min(start+chunk, len(c.InputIDs))]
					rows := h.step(part{id: id, tokens: toks, start: start, sample: true})
					for j, r := range rows {
						p := start + j
						mx := float64(r.Logits[r.Argmax])
						d.note("position max", abs(mx-ps.Max[p]))
						if abs(mx-ps.Max[p]) > ck.tol {
							t.Errorf("%s position %d: max %.9g, want %.9g", c.Name, p, mx, ps.Max[p])
						}
						if ps.Margin[p] > ck.tol && r.Argmax != ps.Argmax[p] {
							t.Errorf("%s position %d: argmax %d, want %d (margin %.3g)", c.Name, p, r.Argmax, ps.Argmax[p], ps.Margin[p])
						}
						if r.Argmax == ps.Argmax[p] {
							margin := mx - secondLargest(r.Logits, r.Argmax)
							d.note("position margin", abs(margin-ps.Margin[p]))
							if abs(margin-ps.Margin[p]) > 2*ck.tol {
								t.Errorf("%s position %d: margin %.9g, want %.9g", c.Name, p, margin, ps.Margin[p])
							}
						}
					}
				}
				if err := h.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			d.log(t)
		})
	}
}

// TestDecoderBF16StorageIsExact: the checkpoints store bfloat16, so packing
// the matrices in bfloat16 rounds nothing, and the logits must equal those
// of float32 storage bit for bit.
func TestDecoderBF16StorageIsExact(t *testing.T) {
	for _, ck := range decoderCheckpoints {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h32 := newHarness(t, m, decoderBlocks, 16, Options{})
			h16 := newHarness(t, m, decoderBlocks, 16, Options{WeightDType: "bfloat16"})
			for i := range g.Cases {
				c := &g.Cases[i]
				if len(c.InputIDs) > 100 {
					continue
				}
				id := kv.SeqID(i + 1)
				want := h32.step(part{id: id, tokens: c.InputIDs, sample: true})[0]
				got := h16.step(part{id: id, tokens: c.InputIDs, sample: true})[0]
				if !slices.Equal(got.Logits, want.Logits) || got.Argmax != want.Argmax {
					t.Errorf("%s: bfloat16 storage changed the logits of a bfloat16 checkpoint", c.Name)
				}
			}
		})
	}
}
