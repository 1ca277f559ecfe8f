package sweep

import (
	"github.com/tinyserve/tinyserve/internal/pyrandom"
	"github.com/tinyserve/tinyserve/sweep/analysis"
)

// Order returns the sweep's runs in the order they are run: one RNG seeded
// with seed; for each warmup round, then each repeat round, a fresh copy of
// levels shuffled by it. The order equals serving-inference's sweep_order,
// which uses Python's random.Random(seed).shuffle, so the two tools measure
// the same levels in the same order.
func Order(seed int64, levels []int, warmups, repeats int) []analysis.RunSpec {
	rng := pyrandom.New(seed)
	var runs []analysis.RunSpec
	for _, round := range []struct {
		kind  string
		count int
	}{{analysis.KindWarmup, warmups}, {analysis.KindRepeat, repeats}} {
		for i := 1; i <= round.count; i++ {
			l := append([]int(nil), levels...)
			rng.Shuffle(len(l), func(a, b int) { l[a], l[b] = l[b], l[a] })
			for _, c := range l {
				runs = append(runs, analysis.RunSpec{Kind: round.kind, Index: i, Concurrency: c})
			}
		}
	}
	return runs
}
