package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

func randomLogits(rng *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(rng.IntN(20)) / 4 // many ties on purpose
	}
	return l
}

func naiveOrder(logits []float32) []int32 {
	idx := make([]int32, len(logits))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if before(logits, a, b) {
			return -1
		}
		if before(logits, b, a) {
			return 1
		}
		return 0
	})
	return idx
}

func sortedSet(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestSelectionAgainstSort checks the linear-time top-k and top-p
// selections against a full sort, on random logits with many ties.
func TestSelectionAgainstSort(t *testing.T) {
	seed := uint64(rand.Int64())
	rng := rand.New(rand.NewPCG(seed, 1))
	for trial := range 3000 {
		n := 1 + rng.IntN(60)
		logits := randomLogits(rng, n)
		order := naiveOrder(logits)
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		k := 1 + rng.IntN(n)
		selectTop(idx, k, func(a, b int32) bool { return before(logits, a, b) })
		if !slices.Equal(sortedSet(idx[:k]), sortedSet(order[:k])) {
			t.Fatalf("seed %d trial %d: top-%d of %v: %v, want %v", seed, trial, k, logits, idx[:k], order[:k])
		}
		selectTopHeap(idx, logits, k)
		if !slices.Equal(sortedSet(idx[:k]), sortedSet(order[:k])) {
			t.Fatalf("seed %d trial %d: heap top-%d of %v: %v, want %v", seed, trial, k, logits, idx[:k], order[:k])
		}

		probs := make([]float64, n)
		total := 0.0
		for i, v := range logits {
			probs[i] = math.Exp(float64(v))
			total += probs[i]
		}
		target := rng.Float64() * total
		want, mass := 0, 0.0
		for want < n && mass < target {
			mass += probs[order[want]]
			want++
		}
		for i := range idx {
			idx[i] = int32(i)
		}
		got := selectMass(idx, probs, logits, target)
		if trial%2 == 1 { // the same, through the bucket prefilter
			for i := range idx {
				idx[i] = int32(i)
			}
			m := nucleusCandidates(idx, probs, target)
			got = selectMass(idx[:m], probs, logits, target)
		}
		if got != max(want, 1) && !(want == 0 && got <= 1) {
			t.Fatalf("seed %d trial %d: top-p kept %d, want %d", seed, trial, got, want)
		}
		if want > 0 && !slices.Equal(sortedSet(idx[:got]), sortedSet(order[:want])) {
			t.Fatalf("seed %d trial %d: top-p set %v, want %v", seed, trial, sortedSet(idx[:got]), sortedSet(order[:want]))
		}
	}
}

func TestGreedyTiesToLowestID(t *testing.T) {
	if got := argmax([]float32{1, 3, 2, 3}); got != 1 {
		t.Errorf("argmax = %d, want 1", got)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		x    []float32
		want int
	}{
		{[]float32{nan, 1, 2, 2}, 2}, // a NaN first is skipped, as the CPU backend skips it
		{[]float32{-inf, -inf}, 0},
		{[]float32{nan, -inf, nan}, 0},
		{nil, 0},
		{append(make([]float32, 40), 1, 0, 1), 40}, // past a vector's width
	} {
		if got := argmax(tc.x); got != tc.want {
			t.Errorf("argmax(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
	var s sampler
	p := llm.SamplingParams{MaxTokens: 1, Temperature: 0.7, TopK: 1}
	if got := s.sample([]float32{1, 3, 2, 3}, &p, rand.New(rand.NewPCG(1, 2))); got != 1 {
		t.Errorf("top_k=1 sample = %d, want 1", got)
	}
}

// TestSamplingFollowsTheDistribution draws many samples and compares the
// frequencies with the softmax of logits/T restricted by top-k and top-p.
func TestSamplingFollowsTheDistribution(t *testing.T) {
	logits := []float32{2, 1, 0.5, 0, -1, 3}
	cases := []llm.SamplingParams{
		{MaxTokens: 1, Temperature: 1},
		{MaxTokens: 1, Temperature: 0.5, TopK: 3},
		{MaxTokens: 1, Temperature: 1, TopP: 0.8},
		{MaxTokens: 1, Temperature: 1, MinP: 0.3},
		{MaxTokens: 1, Temperature: 0.5, TopK: 4, MinP: 0.01},
		{MaxTokens: 1, Temperature: 2, TopP: 0.7, MinP: 0.2},
		{MaxTokens: 1, Temperature: 1, MinP: 1},
	}
	for _, p := range cases {
		// Expected distribution, the slow way: temperature, top-k, min-p
		// (against the most likely token), then top-p over what is left.
		order := naiveOrder(logits)
		keep := len(logits)
		if p.TopK > 0 {
			keep = p.TopK
		}
		w := make([]float64, len(logits))
		for _, i := range order[:keep] {
			w[i] = math.Exp(float64(logits[i]) / p.Temperature)
		}
		top := w[order[0]]
		total := 0.0
		for _, i := range order[:keep] {
			if w[i] < p.MinP*top {
				w[i] = 0
			}
			total += w[i]
		}
		if p.TopP > 0 {
			mass, k := 0.0, 0
			for k < keep && mass < p.TopP*total {
				mass += w[order[k]]
				k++
			}
			for _, i := range order[k:keep] {
				w[i] = 0
			}
			total = mass
		}
		var s sampler
		rng := rand.New(rand.NewPCG(7, 8))
		counts := make([]int, len(logits))
		const draws = 40000
		for range draws {
			counts[s.sample(slices.Clone(logits), &p, rng)]++
		}
		for i := range logits {
			want := w[i] / total
			got := float64(counts[i]) / draws
			if math.Abs(got-want) > 0.015 {
				t.Errorf("%+v: token %d frequency %.3f, want %.3f", p, i, got, want)
			}
		}
	}
}

func TestLogprobsOf(t *testing.T) {
	logits := []float32{0, 1, 2, 2}
	lp := logprobsOf(logits, 1, 3, nil)
	lse := math.Log(1 + math.E + 2*math.E*math.E)
	if math.Abs(float64(lp.Logprob)-(1-lse)) > 1e-6 {
		t.Errorf("chosen logprob %v, want %v", lp.Logprob, 1-lse)
	}
	ids := []int{lp.Top[0].ID, lp.Top[1].ID, lp.Top[2].ID}
	if !slices.Equal(ids, []int{2, 3, 1}) {
		t.Errorf("top ids %v, want [2 3 1] (ties to the lowest id)", ids)
	}
	// Rank counts the logits at least as large: two tokens tie at 2, so
	// token 1 is third and each of the tied ones second.
	for chosen, want := range map[int]int{0: 4, 1: 3, 2: 2, 3: 2} {
		if got := logprobsOf(logits, chosen, 0, nil).Rank; got != want {
			t.Errorf("rank of token %d: %d, want %d", chosen, got, want)
		}
	}
}

// TestSampleStableUnderTinyLogitChanges checks that a seeded draw does not
// depend on the last bits of logits far from where the draw lands. Other
// batch compositions or prompt chunkings change logits by about 1e-6; the
// draw may then change only when it falls within about that much of a
// boundary between two tokens' probability masses. Walking the kept tokens
// in quickselect's order instead flipped about half the draws.
func TestSampleStableUnderTinyLogitChanges(t *testing.T) {
	const n, draws = 50257, 100
	rng := rand.New(rand.NewPCG(7, 8))
	// A vocabulary's worth of logits, on a coarse grid so that many are
	// near-equal (as float32 logits of a real model are), and a copy with
	// each moved by about 1e-6.
	base := make([]float32, n)
	for i := range base {
		base[i] = float32(math.Round(rng.NormFloat64()*3*256) / 256)
	}
	noisy := slices.Clone(base)
	for i := range noisy {
		noisy[i] += float32(rng.NormFloat64() * 1e-6)
	}
	for _, p := range []llm.SamplingParams{
		{MaxTokens: 1, Temperature: 0.9, TopK: 40},
		{MaxTokens: 1, Temperature: 1, TopP: 0.3},
		{MaxTokens: 1, Temperature: 0.7, TopK: 200, TopP: 0.9},
		{MaxTokens: 1, Temperature: 1},
	} {
		var s sampler
		flips := 0
		for d := range draws {
			a := s.sample(base, &p, rand.New(rand.NewPCG(uint64(d), 1)))
			b := s.sample(noisy, &p, rand.New(rand.NewPCG(uint64(d), 1)))
			if a != b {
				flips++
			}
		}
		if flips > 1 {
			t.Errorf("top_k %d top_p %v: %d of %d seeded draws changed under 1e-6 logit noise", p.TopK, p.TopP, flips, draws)
		}
	}
}

// TestDenormalTemperatureIsGreedy: 1/T for a denormal T is +Inf, which
// turned every probability into NaN and picked token 0.
func TestDenormalTemperatureIsGreedy(t *testing.T) {
	logits := []float32{1, 3, 2, 0}
	var s sampler
	for _, temp := range []float64{0, 1e-309, 5e-324, 1e-6} {
		p := llm.SamplingParams{MaxTokens: 1, Temperature: temp}
		if got := s.sample(logits, &p, rand.New(rand.NewPCG(1, 2))); got != 1 {
			t.Errorf("temperature %g: sampled %d, want the argmax 1", temp, got)
		}
	}
}

// TestNonFiniteLogitsNeverPanic: a backend's NaN or +Inf logit (a bug
// there) must not take the engine down: with min_p it once left no token to
// draw from. The sampler falls back to the argmax.
func TestNonFiniteLogitsNeverPanic(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	var s sampler
	for _, logits := range [][]float32{{1, 2, nan, 0.5}, {1, inf, 2, 0}, {nan, nan}} {
		for _, p := range []llm.SamplingParams{
			{MaxTokens: 1, Temperature: 1},
			{MaxTokens: 1, Temperature: 1, MinP: 0.1},
			{MaxTokens: 1, Temperature: 0.7, TopK: 2, TopP: 0.9, MinP: 0.5},
		} {
			got := s.sample(slices.Clone(logits), &p, rand.New(rand.NewPCG(1, 2)))
			if got < 0 || got >= len(logits) {
				t.Errorf("%v %+v: sampled %d", logits, p, got)
			}
		}
	}
	p := llm.SamplingParams{MaxTokens: 1, Temperature: 1, MinP: 0.1}
	if got := s.sample([]float32{1, inf, 2, 0}, &p, rand.New(rand.NewPCG(1, 2))); got != 1 {
		t.Errorf("+Inf logit: sampled %d, want it (1)", got)
	}
}

// BenchmarkSample times one draw over GPT-2's vocabulary per setting.
func BenchmarkSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	for _, p := range []llm.SamplingParams{
		{MaxTokens: 1, Temperature: 1},
		{MaxTokens: 1, Temperature: 0.9, TopK: 40},
		{MaxTokens: 1, Temperature: 1, TopP: 0.9},
	} {
		b.Run(fmt.Sprintf("topk=%d,topp=%v", p.TopK, p.TopP), func(b *testing.B) {
			var s sampler
			for b.Loop() {
				s.sample(logits, &p, rng)
			}
		})
	}
}

// BenchmarkLogprobsOf times one position's log-probabilities over GPT-2's
// vocabulary: what a prompt token costs the engine when it is scored.
func BenchmarkLogprobsOf(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	for _, n := range []int{0, 5} {
		b.Run(fmt.Sprintf("top=%d", n), func(b *testing.B) {
			var scratch []float32
			for b.Loop() {
				logprobsOf(logits, 7, n, &scratch)
			}
		})
	}
}
