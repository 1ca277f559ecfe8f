package sweep

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tinyserve/tinyserve/sweep/analysis"
)

func levelsOf(runs []analysis.RunSpec, kind string, index int) []int {
	var out []int
	for _, r := range runs {
		if r.Kind == kind && r.Index == index {
			out = append(out, r.Concurrency)
		}
	}
	return out
}

// Expected orders were printed by CPython 3:
// random.Random(seed) shuffling a fresh copy per round, as
// serving-inference's sweep_order does.
func TestOrderMatchesPython(t *testing.T) {
	runs := Order(20260729, []int{1, 2, 4, 8, 12, 16, 24, 32}, 1, 3)
	assert.Len(t, runs, 32)
	assert.Equal(t, []int{4, 1, 12, 2, 32, 8, 16, 24}, levelsOf(runs, analysis.KindWarmup, 1))
	assert.Equal(t, []int{1, 12, 8, 16, 32, 24, 2, 4}, levelsOf(runs, analysis.KindRepeat, 1))
	assert.Equal(t, []int{1, 8, 12, 2, 4, 24, 32, 16}, levelsOf(runs, analysis.KindRepeat, 2))
	assert.Equal(t, []int{2, 12, 4, 8, 32, 16, 24, 1}, levelsOf(runs, analysis.KindRepeat, 3))
	assert.Equal(t, analysis.RunSpec{Kind: analysis.KindWarmup, Index: 1, Concurrency: 4}, runs[0])

	runs = Order(7, []int{1, 2, 4, 8, 16}, 0, 2)
	assert.Equal(t, []int{16, 1, 8, 2, 4}, levelsOf(runs, analysis.KindRepeat, 1))
	assert.Equal(t, []int{4, 8, 2, 16, 1}, levelsOf(runs, analysis.KindRepeat, 2))

	runs = Order(-5, []int{3, 1, 2}, 2, 1)
	assert.Equal(t, []int{3, 1, 2}, levelsOf(runs, analysis.KindWarmup, 1))
	assert.Equal(t, []int{3, 1, 2}, levelsOf(runs, analysis.KindWarmup, 2))
	assert.Equal(t, []int{1, 3, 2}, levelsOf(runs, analysis.KindRepeat, 1))
}
