package cpu

import (
	"math"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/model"
)

// bf16LogitTol is the largest difference allowed between a bfloat16-weight
// logit and the float32 one, relative to the float32 logits' largest
// magnitude in the row. bfloat16 keeps 8 significant bits (a relative
// rounding of at most 2⁻⁹ ≈ 0.002 per weight); errors of independent
// weights partly cancel in each dot product, and the two golden models
// show 0.27% and 0.42% at most, so 1% leaves margin without hiding a wrong
// weight (which moves logits by tens of percent).
const bf16LogitTol = 0.01

// TestBF16Weights runs the golden prompts with bfloat16 weights: the last
// position's logits must stay within bf16LogitTol of the float32 backend's,
// and the greedy continuation must match the golden tokens except where
// the float32 margin between the golden token and the bfloat16 choice is
// within that tolerance (after which the continuations may differ). The
// float32 GPT-2 checkpoints are rounded; the bfloat16 ones are
// TestDecoderBF16StorageIsExact's.
func TestBF16Weights(t *testing.T) {
	for _, ck := range checkpoints[:2] {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h32 := newHarness(t, m, blocksFor(g), 16, Options{})
			h16 := newHarness(t, m, blocksFor(g), 16, Options{WeightDType: "bfloat16"})
			worst := 0.0
			for i := range g.Cases {
				c := &g.Cases[i]
				if raceEnabled && i > 1 {
					break
				}
				id := kv.SeqID(i + 1)
				want := h32.step(part{id: id, tokens: c.InputIDs, sample: true})[0].Logits
				got := h16.step(part{id: id, tokens: c.InputIDs, sample: true})[0]
				scale := 0.0
				for _, v := range want {
					scale = max(scale, math.Abs(float64(v)))
				}
				d, at := maxDiff(got.Logits, float64s(want))
				worst = max(worst, d/scale)
				if d > bf16LogitTol*scale {
					t.Errorf("%s: bfloat16 logit %d = %v, float32 %v: |diff| %.3g > %.2g of max |logit| %.3g", c.Name, at, got.Logits[at], want[at], d, bf16LogitTol, scale)
				}
				// Greedy: follow the bfloat16 choices while they agree with the
				// golden tokens; a disagreement must be a near tie.
				tok, pos := got.Argmax, len(c.InputIDs)
				for step, wantTok := range c.Greedy.Tokens {
					if tok != wantTok {
						margin := math.Abs(float64(want[tok] - want[wantTok]))
						if margin > 2*bf16LogitTol*scale {
							t.Errorf("%s: greedy step %d: bfloat16 picks %d, golden %d, float32 margin %.3g", c.Name, step, tok, wantTok, margin)
						}
						break
					}
					if step == len(c.Greedy.Tokens)-1 {
						break
					}
					want = h32.step(part{id: id, tokens: []int{tok}, start: pos, sample: true})[0].Logits
					tok = h16.step(part{id: id, tokens: []int{tok}, start: pos, sample: true})[0].Argmax
					pos++
				}
				for _, h := range []*harness{h32, h16} {
					if err := h.kv.Free(id); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Logf("worst bfloat16 logit difference: %.3g of the largest |logit|", worst)
		})
	}
}

func float64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestWeightDTypeOption checks the option's validation and that bfloat16
// really stores half the bytes.
func TestWeightDTypeOption(t *testing.T) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(m, Options{WeightDType: "float16"}); err == nil {
		t.Error("WeightDType float16: no error")
	}
	b32, err := New(m, Options{Threads: 1, WeightDType: "float32"})
	if err != nil {
		t.Fatal(err)
	}
	defer b32.Close()
	b16, err := New(m, Options{Threads: 1, WeightDType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	defer b16.Close()
	if got, want := b16.lmHead.Bytes()*2, b32.lmHead.Bytes(); got != want || !b16.lmHead.BF16() {
		t.Errorf("bfloat16 LM head %d bytes (x2), float32 %d", got/2, want)
	}
}

// TestDecoderBF16StorageIsExact: the checkpoints store bfloat16, so packing
// the matrices in bfloat16 rounds nothing, and the logits must equal those
// of float32 storage bit for bit.
func TestDecoderBF16StorageIsExact(t *testing.T) {
	for _, ck := range checkpoints[2:] {
		t.Run(ck.name, func(t *testing.T) {
			m, g := loadGolden(t, ck.name)
			h32 := newHarness(t, m, blocksFor(g), 16, Options{})
			h16 := newHarness(t, m, blocksFor(g), 16, Options{WeightDType: "bfloat16"})
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
