package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f64(v float64) *float64 { return &v }

func TestPercentileFixed(t *testing.T) {
	// Expected values are numpy.percentile(values, p) (method="linear").
	s := []float64{1, 2, 3, 4, 10}
	cases := []struct{ p, want float64 }{
		{0, 1}, {25, 2}, {50, 3}, {90, 7.6}, {99, 9.76}, {99.9, 9.976}, {100, 10}, {1, 1.04},
	}
	for _, c := range cases {
		assert.InDelta(t, c.want, Percentile(s, c.p), 1e-12, "p%v", c.p)
	}
	assert.Equal(t, 5.0, Percentile([]float64{5}, 99))
	assert.True(t, math.IsNaN(Percentile(nil, 50)))
	for _, p := range []float64{-1, 100.5, math.NaN(), math.Inf(1)} {
		assert.True(t, math.IsNaN(Percentile(s, p)), "p %v is no percentile", p)
	}
	assert.InDelta(t, 1.5, Percentile([]float64{1, 2}, 50), 1e-12)
}

func TestMedian(t *testing.T) {
	assert.Nil(t, Median(nil))
	assert.Equal(t, 2.0, *Median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, *Median([]float64{4, 1, 3, 2}))
	in := []float64{3, 1, 2}
	Median(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "input must not be reordered")
}

func TestDistributeFixed(t *testing.T) {
	d := Distribute([]float64{4, 2, 8, 6, math.NaN()})
	require.Equal(t, 4, d.Count)
	assert.Equal(t, 5.0, *d.Mean)
	assert.Equal(t, 2.0, *d.Min)
	assert.Equal(t, 8.0, *d.Max)
	assert.InDelta(t, math.Sqrt(5), *d.Std, 1e-12) // population std of 2,4,6,8
	assert.InDelta(t, 5.0, *d.P50, 1e-12)
	assert.InDelta(t, 7.4, *d.P90, 1e-12)
	assert.InDelta(t, 7.94, *d.P99, 1e-12)
	assert.InDelta(t, 7.994, *d.P999, 1e-12)

	empty := Distribute(nil)
	assert.Equal(t, 0, empty.Count)
	assert.Nil(t, empty.Mean)
	assert.Nil(t, empty.P99)
}

// naivePercentile is the obviously right reference: the definition of
// linear interpolation between closest ranks, computed from a fresh sort.
func naivePercentile(values []float64, p float64) float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	rank := p / 100 * float64(len(s)-1)
	below := int(rank)
	if below >= len(s)-1 {
		return s[len(s)-1]
	}
	frac := rank - float64(below)
	return s[below]*(1-frac) + s[below+1]*frac
}

func TestPercentileDifferential(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 20000; i++ {
		n := 1 + rng.IntN(40)
		vals := make([]float64, n)
		for j := range vals {
			switch rng.IntN(3) {
			case 0:
				vals[j] = float64(rng.IntN(5)) // ties
			default:
				vals[j] = rng.ExpFloat64() * 3
			}
		}
		p := rng.Float64() * 100
		if rng.IntN(4) == 0 {
			p = []float64{0, 50, 90, 99, 99.9, 100}[rng.IntN(6)]
		}
		d := Distribute(vals)
		got := Percentile(sortedCopy(vals), p)
		want := naivePercentile(vals, p)
		if math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
			t.Fatalf("seed %d case %d: percentile(%v, %v) = %v, reference %v", seed, i, vals, p, got, want)
		}
		if *d.Min > *d.P1 || *d.P1 > *d.P50 || *d.P50 > *d.P99 || *d.P99 > *d.P999 || *d.P999 > *d.Max {
			t.Fatalf("seed %d case %d: percentiles not monotone: %+v", seed, i, d)
		}
	}
}

func sortedCopy(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}
