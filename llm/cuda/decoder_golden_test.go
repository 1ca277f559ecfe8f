package cuda

// The Llama-family goldens (testdata/{qwen2,llama,qwen3}-tiny): random
// bfloat16 checkpoints with real vocabularies, grouped-query attention,
// Llama 3 rope scaling, Qwen2's q/k/v biases, Qwen3's q/k norms and
// explicit head_dim, against float64 references written from Hugging
// Face's modeling code. Each README gives the tolerance for a float32
// implementation with float64 rotary angles: logits within 1e-4, greedy
// ids exact up to the first step whose golden margin is under that, top-10
// ids exact but for neighbours closer than it. The checks run on the GPU
// (TestGPUDecoder*) and on the emulated kernels (TestEmuDecoder*).

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// decoderCheckpoints are the Llama-family fixtures.
var decoderCheckpoints = []string{"qwen2-tiny", "llama-tiny", "qwen3-tiny"}

// decoders are the Llama-family checkpoints the limits take.
func (l goldenLimits) decoders() []string {
	var out []string
	for _, name := range decoderCheckpoints {
		if l.takes(name) {
			out = append(out, name)
		}
	}
	return out
}

// decoderTol is the READMEs' float32 logit tolerance.
const decoderTol = 1e-4

// decoderBlocks holds one golden prompt with its greedy continuation (at
// most 2,116 tokens) and, for the mixed batches, the prompts up to 300
// tokens at once, in blocks of 16.
const decoderBlocks = 160

func TestGPUDecoderGoldens(t *testing.T) { checkDecoderGoldens(t, newGPUOpts, allGoldens) }
func TestGPUDecoderHalfTop10(t *testing.T) {
	checkDecoderHalfTop10(t, newGPUOpts, allGoldens)
}
func TestGPUDecoderMixedBatchesMatchCPU(t *testing.T) {
	checkDecoderMixedBatches(t, newGPUOpts, allGoldens)
}

// TestGPUDecoderGraphsMatchEager is TestGPUGraphsMatchEager on Qwen3
// (GQA, q/k norms, RoPE): graph replays equal eager steps.
func TestGPUDecoderGraphsMatchEager(t *testing.T) {
	checkGraphsMatchEagerOn(t, newGPUOpts, "qwen3-tiny")
}

// TestEmuDecoderGoldens runs the goldens on the emulated kernels: every
// prompt of llama-tiny, the 2,100-token one included (long-context RoPE
// with Llama 3 scaling, attention over nine tiles), and the prompts of up
// to 300 tokens of the others (emuLimits).
func TestEmuDecoderGoldens(t *testing.T) {
	if raceEnabled {
		checkDecoderGoldens(t, newEmuBackend, emuLimits())
		return
	}
	checkDecoderGoldens(t, newEmuBackend, goldenLimits{maxPrompt: math.MaxInt, checkpoints: []string{"llama-tiny"}})
	checkDecoderGoldens(t, newEmuBackend, goldenLimits{maxPrompt: emuLimits().maxPrompt, checkpoints: []string{"qwen2-tiny", "qwen3-tiny"}})
}

func TestEmuDecoderHalfTop10(t *testing.T) {
	checkDecoderHalfTop10(t, newEmuBackend, emuLimits())
}
func TestEmuDecoderMixedBatchesMatchCPU(t *testing.T) {
	checkDecoderMixedBatches(t, newEmuBackend, emuLimits())
}
func TestEmuDecoderGraphsMatchEager(t *testing.T) {
	checkGraphsMatchEagerOn(t, newEmuBackend, "qwen3-tiny")
}

// checkDecoderGoldens: in float32, each golden prompt prefilled in one
// step gives the golden's top-10 ids and logits, and decoding with the
// device argmax only (no logits copied back) the golden's greedy tokens.
func checkDecoderGoldens(t *testing.T, newDev newDevice, lim goldenLimits) {
	for _, name := range lim.decoders() {
		t.Run(name, func(t *testing.T) {
			m, cases := loadGoldenCases(t, name)
			b := newDev(t, m, Options{DType: "float32"}, decoderBlocks)
			s := newStepper(t, b, decoderBlocks)
			worst, ran, longest := 0.0, 0, 0
			for i, c := range cases {
				if len(c.InputIDs) > lim.maxPrompt {
					continue
				}
				ran, longest = ran+1, max(longest, len(c.InputIDs))
				id := kv.SeqID(i + 1)
				rows := s.step(part{id: id, tokens: c.InputIDs, sample: true, needLogits: true})
				worst = max(worst, checkDecoderTop10(t, &c, rows[0].Logits))
				got := []int{rows[0].Argmax}
				pos := len(c.InputIDs)
				for len(got) < len(c.Greedy.Tokens) {
					r := s.step(part{id: id, tokens: []int{got[len(got)-1]}, start: pos, sample: true})
					if r[0].Logits != nil {
						t.Fatalf("%s: logits returned for a greedy row", c.Name)
					}
					got = append(got, r[0].Argmax)
					pos++
				}
				checkDecoderGreedy(t, &c, got)
				if err := s.kv.Free(id); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d prompts (up to %d tokens): max |device float32 - golden| over top-10 logits %.3g (tolerance %.0e)", ran, longest, worst, decoderTol)
		})
	}
}

// checkDecoderTop10 compares the logits' top 10 with the golden's: the ids
// in order, except that neighbours whose golden values differ by less than
// the tolerance may come in either order (the READMEs list such pairs), and
// the logits at the golden's ids within the tolerance. It returns the
// largest difference.
func checkDecoderTop10(t *testing.T, c *goldenCase, logits []float32) float64 {
	t.Helper()
	got := topK(logits, len(c.Top10.IDs))
	want := c.Top10.IDs
	for i := 0; i < len(want); i++ {
		if got[i] == want[i] {
			continue
		}
		swapped := i+1 < len(want) && got[i] == want[i+1] && got[i+1] == want[i] &&
			math.Abs(c.Top10.Values[i]-c.Top10.Values[i+1]) < decoderTol
		if !swapped {
			t.Errorf("%s: top-10 ids %v, golden %v", c.Name, got, want)
			break
		}
		i++
	}
	worst := 0.0
	for j, tok := range want {
		d := math.Abs(float64(logits[tok]) - c.Top10.Values[j])
		worst = max(worst, d)
		if d > decoderTol {
			t.Errorf("%s: logit[%d] = %.9g, golden %.9g", c.Name, tok, logits[tok], c.Top10.Values[j])
		}
	}
	return worst
}

// checkDecoderGreedy compares greedy tokens exactly up to the first step
// whose golden margin is under the tolerance (there a float32
// implementation may take the runner-up, and from there on diverge).
func checkDecoderGreedy(t *testing.T, c *goldenCase, got []int) {
	t.Helper()
	want := c.Greedy.Tokens
	n := len(want)
	for i, m := range c.Greedy.Margins {
		if m < decoderTol {
			n = i + 1 // the tie step itself may differ
			break
		}
	}
	if !slices.Equal(got[:n-1], want[:n-1]) || (n == len(want) && got[n-1] != want[n-1]) {
		t.Errorf("%s: greedy tokens %v, golden %v", c.Name, got, want)
	}
}

// topK is the ids of the k largest values, largest first, ties to the
// lowest id.
func topK(v []float32, k int) []int {
	var ids []int
	for i, x := range v {
		j := len(ids)
		for j > 0 && x > v[ids[j-1]] {
			j--
		}
		if j < k {
			ids = slices.Insert(ids, j, i)
			if len(ids) > k {
				ids = ids[:k]
			}
		}
	}
	return ids
}

// checkDecoderHalfTop10: in float16 and bfloat16 the logits at the
// golden's top-10 ids of the last prompt position are within the GPT-2
// tests' tolerances of the golden values, relative to the row's largest
// |logit|. The checkpoints store bfloat16, so in bfloat16 the weights are
// exact and only the activations, the KV cache and the GEMM inputs are
// rounded.
func checkDecoderHalfTop10(t *testing.T, newDev newDevice, lim goldenLimits) {
	for _, dt := range []struct {
		name string
		rel  float64
	}{{"float16", tolFloat16Rel}, {"bfloat16", tolBFloat16Rel}} {
		for _, name := range lim.decoders() {
			t.Run(fmt.Sprintf("%s/%s", dt.name, name), func(t *testing.T) {
				m, cases := loadGoldenCases(t, name)
				b := newDev(t, m, Options{DType: dt.name}, decoderBlocks)
				s := newStepper(t, b, decoderBlocks)
				worst := 0.0
				for i, c := range cases {
					if len(c.InputIDs) > lim.maxPrompt {
						continue
					}
					id := kv.SeqID(i + 1)
					rows := s.step(part{id: id, tokens: c.InputIDs, sample: true, needLogits: true})
					scale := 0.0
					for _, v := range c.Top10.Values {
						scale = max(scale, math.Abs(v))
					}
					for j, tok := range c.Top10.IDs {
						d := math.Abs(float64(rows[0].Logits[tok])-c.Top10.Values[j]) / scale
						worst = max(worst, d)
						if d > dt.rel {
							t.Errorf("%s: logit[%d] = %.6g, golden %.6g (relative error %.3g > %.0e)", c.Name, tok, rows[0].Logits[tok], c.Top10.Values[j], d, dt.rel)
						}
					}
					if err := s.kv.Free(id); err != nil {
						t.Fatal(err)
					}
				}
				t.Logf("max relative |device %s - golden| over top-10 logits: %.3g (tolerance %.0e)", dt.name, worst, dt.rel)
			})
		}
	}
}

// checkDecoderMixedBatches runs the golden prompts of up to 300 tokens
// (and the limits' maxPrompt) concurrently on the device (float32) and on the CPU backend with the
// same schedule (compareMixed: chunked prefills of 37 tokens mixed with
// decodes, rows with and without logits): every step's argmax agrees and
// the logits stay within the tolerance.
func checkDecoderMixedBatches(t *testing.T, newDev newDevice, lim goldenLimits) {
	for _, name := range lim.decoders() {
		t.Run(name, func(t *testing.T) {
			m, cases := loadGoldenCases(t, name)
			var prompts [][]int
			for _, c := range cases {
				if len(c.InputIDs) <= min(300, lim.maxPrompt) {
					prompts = append(prompts, c.InputIDs)
				}
			}
			gb := newDev(t, m, Options{DType: "float32"}, decoderBlocks)
			cb := cpuBackend(t, m, decoderBlocks)
			worst := compareMixed(t, gb, cb, prompts, decoderBlocks, 37, 6)
			if worst > decoderTol {
				t.Errorf("max |device - CPU| logit %.3g over the tolerance %.0e", worst, decoderTol)
			}
			t.Logf("max |device float32 - CPU| over all returned logits: %.3g", worst)
		})
	}
}

// TestGPUBuiltinQwenMatchesCPU runs the built-in qwen2.5-0.5b-random
// (Qwen2.5-0.5B's exact shape: 24 layers, 14 query heads and 2 KV heads of
// 64, MLP 4864, a tied vocabulary of 151936; bfloat16, uploaded as it is)
// against the CPU backend: the shapes of a real model, which the tiny
// checkpoints do not have (head_dim 64, seven query heads per KV head).
// Mixed prefill and decode batches in float32 must agree on every argmax
// and within 1e-4 on every logit; in bfloat16, the last prompt row's
// logits within the half-precision tolerance of its largest.
func TestGPUBuiltinQwenMatchesCPU(t *testing.T) {
	gpuOrSkip(t) // before generating 494M parameters
	checkBuiltinQwenMatchesCPU(t, newGPUOpts)
}

func checkBuiltinQwenMatchesCPU(t *testing.T, newDev newDevice) {
	m, err := model.Builtin(model.BuiltinQwen05B)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 16
	cb := cpuBackend(t, m, blocks)
	prompts := smallPrompts(m.Config.VocabSize, 40, 7)
	t.Run("float32", func(t *testing.T) {
		gb := newDev(t, m, Options{DType: "float32"}, blocks)
		worst := compareMixed(t, gb, cb, prompts, blocks, 16, 3)
		if worst > decoderTol {
			t.Errorf("max |device - CPU| logit %.3g over %.0e", worst, decoderTol)
		}
		t.Logf("max |device float32 - CPU| over all returned logits: %.3g", worst)
	})
	t.Run("bfloat16", func(t *testing.T) {
		gb := newDev(t, m, Options{DType: "bfloat16"}, blocks)
		want := newStepper(t, cb, blocks).step(part{id: 1, tokens: prompts[0], sample: true, needLogits: true})[0].Logits
		got := newStepper(t, gb, blocks).step(part{id: 1, tokens: prompts[0], sample: true, needLogits: true})[0].Logits
		scale, worst := 0.0, 0.0
		for _, v := range want {
			scale = max(scale, math.Abs(float64(v)))
		}
		for v := range want {
			worst = max(worst, math.Abs(float64(got[v]-want[v]))/scale)
		}
		if worst > tolBFloat16Rel {
			t.Errorf("relative logit error %.3g over %.0e", worst, tolBFloat16Rel)
		}
		t.Logf("max relative |device bfloat16 - CPU| over the last prompt row: %.3g (largest |logit| %.3g)", worst, scale)
	})
}
