package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm/model"
)

// attnTestModel has a 16-wide head so that both attention paths run their
// vector kernels, and 160 positions for a long prompt.
func attnTestModel(t *testing.T) *model.Model {
	t.Helper()
	m := randomModel(t, "attn", gpt2Config(97, 160, 64, 2, 4), 11, 0.3)
	return m
}

// prefillLogits prefills prompt in chunks of chunk tokens (the whole prompt
// when chunk is 0) and returns the logits of every position.
func prefillLogits(t *testing.T, m *model.Model, prompt []int, chunk, threads, blockSize int) [][]float32 {
	t.Helper()
	h := newHarness(t, m, (len(prompt)+blockSize-1)/blockSize+1, blockSize, Options{Threads: threads})
	h.allRows = true
	if chunk == 0 {
		chunk = len(prompt)
	}
	var out [][]float32
	for start := 0; start < len(prompt); start += chunk {
		end := min(start+chunk, len(prompt))
		for _, r := range h.step(part{id: 1, tokens: prompt[start:end], start: start, sample: true}) {
			out = append(out, r.Logits)
		}
	}
	return out
}

// TestBlockAttentionMatchesRows prefills a 150-token prompt in one step
// (block units: rows in blocks of attnRowBlock, the last one ragged) and
// in chunks of 7 (row units only), and checks that every position's
// logits agree to float32 rounding: the two paths compute the same
// attention in different orders.
func TestBlockAttentionMatchesRows(t *testing.T) {
	m := attnTestModel(t)
	rng := rand.New(rand.NewPCG(5, 6))
	prompt := make([]int, 150)
	for i := range prompt {
		prompt[i] = rng.IntN(m.Config.VocabSize)
	}
	block := prefillLogits(t, m, prompt, 0, 2, 16)
	rows := prefillLogits(t, m, prompt, attnBlockMin/2-1, 2, 16)
	if len(block) != len(prompt) || len(rows) != len(prompt) {
		t.Fatalf("%d and %d rows of logits for %d positions", len(block), len(rows), len(prompt))
	}
	worst := 0.0
	for p := range prompt {
		scale := 0.0
		for _, v := range rows[p] {
			scale = max(scale, math.Abs(float64(v)))
		}
		for i := range rows[p] {
			d := math.Abs(float64(block[p][i]-rows[p][i])) / scale
			if !(d <= 1e-5) {
				t.Fatalf("position %d logit %d: block path %v, row path %v", p, i, block[p][i], rows[p][i])
			}
			worst = max(worst, d)
		}
	}
	t.Logf("largest difference %.2g of the row's largest logit", worst)
}

// TestBlockAttentionDeterministic checks that block units, like row units,
// give bit-identical results whatever the thread count and KV block size:
// each unit is computed by one worker, and the gathered keys do not depend
// on how the cache is paged.
func TestBlockAttentionDeterministic(t *testing.T) {
	m := attnTestModel(t)
	prompt := make([]int, 100)
	for i := range prompt {
		prompt[i] = (i*31 + 7) % m.Config.VocabSize
	}
	ref := prefillLogits(t, m, prompt, 40, 1, 16)
	for _, v := range []struct{ threads, block int }{{3, 16}, {2, 5}, {1, 1}} {
		got := prefillLogits(t, m, prompt, 40, v.threads, v.block)
		for p := range ref {
			if !slices.Equal(got[p], ref[p]) {
				t.Fatalf("threads %d block %d: position %d differs", v.threads, v.block, p)
			}
		}
	}
}
