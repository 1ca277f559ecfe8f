package engine

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/tinyserve/tinyserve/internal/f32"
	"github.com/tinyserve/tinyserve/llm"
)

// sampler holds scratch buffers reused across rows and steps; it belongs to
// the engine's goroutine.
type sampler struct {
	idx   []int32
	probs []float64
	kept  []uint64  // a bit per token id: the tokens left after top-k/top-p
	z     []float32 // the kept tokens' scaled logits, then their exps
}

// argmax returns the id of the largest logit, ties to the lowest id; NaNs
// are skipped, and 0 is returned when nothing beats -Inf, as the CPU
// backend's argmax does. The vector maximum, then a vector search for
// where it first is, is quicker than one scalar pass over GPT-2's
// vocabulary.
func argmax(logits []float32) int {
	if m := f32.Max(logits); m > float32(math.Inf(-1)) {
		return f32.Index(logits, m)
	}
	return 0
}

// sample chooses a token from logits under p, drawing from rng.
// Temperature, then top-k and min-p, then top-p, as in vLLM.
func (s *sampler) sample(logits []float32, p *llm.SamplingParams, rng *rand.Rand) int {
	if p.Greedy() {
		return argmax(logits)
	}
	n := len(logits)
	if cap(s.idx) < n {
		s.idx = make([]int32, n)
		s.probs = make([]float64, n)
		s.kept = make([]uint64, (n+63)/64)
		s.z = make([]float32, n)
	}
	idx, probs := s.idx[:n], s.probs[:n]
	kept := n
	if p.TopK > 0 && p.TopK < n {
		kept = p.TopK
	}
	if kept*16 <= n {
		selectTopHeap(idx, logits, kept) // the usual top_k: a few dozen of 50k
	} else {
		for i := range idx {
			idx[i] = int32(i)
		}
		if kept < n {
			selectTop(idx, kept, func(a, b int32) bool { return before(logits, a, b) })
		}
	}
	idx = idx[:kept]
	// Softmax of logits/T over the kept tokens, gathered into one buffer
	// for the vector exp (f32.ExpSubSum, within 3 ulps); the distance from
	// the largest logit is taken before scaling by 1/T, so that a low
	// temperature does not magnify the rounding of large logits.
	z := s.z[:kept]
	maxL := float32(math.Inf(-1))
	for j, i := range idx {
		z[j] = logits[i]
		maxL = max(maxL, z[j])
	}
	if math.IsInf(float64(maxL), 0) || math.IsNaN(float64(maxL)) {
		// Everything masked, or a backend's NaN or +Inf (which would make
		// every scaled logit NaN): fall back rather than draw from nothing.
		return argmax(logits)
	}
	invT := float32(1 / p.Temperature)
	for j := range z {
		z[j] = (z[j] - maxL) * invT
	}
	if p.MinP > 0 {
		// z is each token's log-probability relative to the most likely
		// one, so min_p keeps z >= ln(min_p): a prefix in logit order,
		// like top-k's, so the two commute; top-p then renormalizes over
		// what is left, as after vLLM's min_p mask.
		cut := float32(math.Log(p.MinP))
		k := 0
		for j := range z {
			if z[j] >= cut {
				idx[k], z[k] = idx[j], z[j]
				k++
			}
		}
		idx, z = idx[:k], z[:k]
	}
	f32.ExpSubSum(z, 0)
	total := 0.0
	for j, i := range idx {
		if math.IsInf(float64(logits[i]), -1) {
			z[j] = 0 // masked: the clamped exp would leave it 4e-38, not 0
		}
		probs[i] = float64(z[j])
		total += probs[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		target := p.TopP * total
		idx = idx[:nucleusCandidates(idx, probs, target)]
		idx = idx[:selectMass(idx, probs, logits, target)]
	}
	return s.draw(idx, probs, rng)
}

// nucleusCandidates moves to the front of idx, and counts, the tokens that
// top-p could keep, so that the selection runs over those alone: a real
// model's nucleus is a few dozen tokens of 50k. Tokens are bucketed by the
// binary exponent of their probability (probs are at most 1, the largest
// exactly 1); the candidates are the buckets, most likely first, up to the
// one where the mass reaches target. Every token of a later bucket is less
// likely than every candidate, so the candidates are a prefix of the before
// order and selectMass over them gives the same set as over all of idx.
func nucleusCandidates(idx []int32, probs []float64, target float64) int {
	const buckets = 64
	var mass [buckets]float64
	bucket := func(p float64) int {
		return min(buckets-1, max(0, 1023-int(math.Float64bits(p)>>52&0x7ff)))
	}
	for _, i := range idx {
		mass[bucket(probs[i])] += probs[i]
	}
	last, sum := buckets-1, 0.0
	for b := range buckets {
		if sum += mass[b]; sum >= target {
			// One bucket more: selectMass sums in another order, and its
			// rounding may need a token past where this sum said enough.
			last = min(b+1, buckets-1)
			break
		}
	}
	n := 0
	for k, i := range idx {
		if bucket(probs[i]) <= last {
			idx[n], idx[k] = idx[k], idx[n]
			n++
		}
	}
	return n
}

// draw picks one of the kept tokens idx with probability proportional to
// probs. It walks them in id order, not in the order quickselect left them:
// that order depends on every comparison made over the vocabulary, so a
// change in the last bits of a far-off logit (another chunking of the
// prompt, another batch) would move a seeded draw to another token.
func (s *sampler) draw(idx []int32, probs []float64, rng *rand.Rand) int {
	kept := s.kept[:(len(probs)+63)/64]
	clear(kept)
	for _, i := range idx {
		kept[i/64] |= 1 << (i % 64)
	}
	total := 0.0
	for w, word := range kept {
		for ; word != 0; word &= word - 1 {
			total += probs[w*64+bits.TrailingZeros64(word)]
		}
	}
	u := rng.Float64() * total
	last := int(idx[0])
	for w, word := range kept {
		for ; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			if probs[i] == 0 {
				continue
			}
			if u -= probs[i]; u < 0 {
				return i
			}
			last = i
		}
	}
	return last // rounding left u a hair above zero: the last token with mass
}

// before orders tokens by logit, descending, ties to the lowest id: the
// order in which "the K most likely" and "top-p" are defined.
func before(logits []float32, a, b int32) bool {
	if logits[a] != logits[b] {
		return logits[a] > logits[b]
	}
	return a < b
}

// selectTop moves the k first elements of idx in the order less to idx[:k]
// (in no particular order), in expected linear time (quickselect).
func selectTop(idx []int32, k int, less func(a, b int32) bool) {
	lo, hi := 0, len(idx)
	for hi-lo > 1 {
		p := partition(idx[lo:hi], less) + lo
		switch {
		case p == k || p+1 == k:
			return
		case p > k:
			hi = p
		default:
			lo = p + 1
		}
	}
}

// selectTopHeap writes the k first token ids in the before order to idx[:k]
// (in no particular order) in one pass over logits, for k much smaller than
// len(logits): it keeps the k best seen so far in a heap whose root is the
// worst of them, so that most ids cost a single comparison with the root.
func selectTopHeap(idx []int32, logits []float32, k int) {
	h := idx[:0]
	for i := range logits {
		id := int32(i)
		switch {
		case len(h) < k:
			h = append(h, id)
			for c := len(h) - 1; c > 0; { // sift up past better parents
				p := (c - 1) / 2
				if !before(logits, h[p], h[c]) {
					break
				}
				h[p], h[c] = h[c], h[p]
				c = p
			}
		case before(logits, id, h[0]):
			h[0] = id
			for p := 0; ; { // sift down below worse children
				w, l, r := p, 2*p+1, 2*p+2
				if l < k && before(logits, h[w], h[l]) {
					w = l
				}
				if r < k && before(logits, h[w], h[r]) {
					w = r
				}
				if w == p {
					break
				}
				h[p], h[w] = h[w], h[p]
				p = w
			}
		}
	}
}

// partition splits a around a median-of-three pivot: elements before it,
// the pivot at the returned index, elements after it.
func partition(a []int32, less func(x, y int32) bool) int {
	mid, last := len(a)/2, len(a)-1
	if less(a[mid], a[0]) {
		a[mid], a[0] = a[0], a[mid]
	}
	if less(a[last], a[0]) {
		a[last], a[0] = a[0], a[last]
	}
	if less(a[mid], a[last]) {
		a[mid], a[last] = a[last], a[mid]
	}
	pivot := a[last] // the median of the three
	store := 0
	for i := 0; i < last; i++ {
		if less(a[i], pivot) {
			a[i], a[store] = a[store], a[i]
			store++
		}
	}
	a[store], a[last] = a[last], a[store]
	return store
}

// selectMass reorders idx so that idx[:n] is the smallest set of most likely
// tokens (in the before order) whose mass reaches target, and returns n.
func selectMass(idx []int32, probs []float64, logits []float32, target float64) int {
	less := func(a, b int32) bool { return before(logits, a, b) }
	lo, hi := 0, len(idx)
	need := target // mass still needed from idx[lo:hi]
	for hi-lo > 1 {
		p := partition(idx[lo:hi], less) + lo
		upper := 0.0 // mass of idx[lo:p+1], the pivot included
		for _, i := range idx[lo : p+1] {
			upper += probs[i]
		}
		if upper-probs[idx[p]] >= need {
			hi = p // enough without the pivot
			continue
		}
		if upper >= need {
			return p + 1 // the pivot is the last one needed
		}
		need -= upper
		lo = p + 1
	}
	return min(hi, len(idx))
}

// logprobsOf returns the chosen token's log-probability and the top n
// alternatives under the model's raw distribution (before temperature and
// filtering, as vLLM reports by default). The log-sum-exp uses the vector
// exp (f32.ExpSubSum, float32 like vLLM's log_softmax) on a copy of logits
// in *scratch, which it grows as needed; nil allocates one.
func logprobsOf(logits []float32, chosen, n int, scratch *[]float32) llm.TokenLogprob {
	if scratch == nil {
		scratch = new([]float32)
	}
	z := append((*scratch)[:0], logits...)
	*scratch = z
	maxL := f32.Max(logits)
	lse := float64(maxL) + math.Log(float64(f32.ExpSubSum(z, maxL)))
	rank := 0
	for _, v := range logits {
		if v >= logits[chosen] {
			rank++
		}
	}
	out := llm.TokenLogprob{ID: chosen, Logprob: float32(float64(logits[chosen]) - lse), Rank: rank}
	if n <= 0 {
		return out
	}
	// Insertion into a short sorted list: n is at most llm.MaxLogprobs.
	top := make([]int32, 0, n+1)
	for i := range logits {
		id := int32(i)
		if len(top) == n && !before(logits, id, top[n-1]) {
			continue
		}
		pos := len(top)
		for pos > 0 && before(logits, id, top[pos-1]) {
			pos--
		}
		top = append(top, 0)
		copy(top[pos+1:], top[pos:])
		top[pos] = id
		if len(top) > n {
			top = top[:n]
		}
	}
	out.Top = make([]llm.TopLogprob, len(top))
	for k, id := range top {
		out.Top[k] = llm.TopLogprob{ID: int(id), Logprob: float32(float64(logits[id]) - lse)}
	}
	return out
}
