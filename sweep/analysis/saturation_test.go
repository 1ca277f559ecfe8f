package analysis

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pts(levels []int, tps, p99 []*float64) []LevelPoint {
	out := make([]LevelPoint, len(levels))
	for i := range levels {
		out[i] = LevelPoint{Concurrency: levels[i], OutputTokensPerS: tps[i], LatencyP99S: p99[i]}
	}
	return out
}

func TestSaturationServingInferenceExample(t *testing.T) {
	// serving-inference's documented example: candidate 2.
	r := Saturation(pts([]int{1, 2, 4},
		[]*float64{f64(100), f64(103), f64(104)},
		[]*float64{f64(1.0), f64(1.25), f64(1.55)}), DefaultThroughputGain, DefaultP99Rise)
	require.NotNil(t, r.Candidate)
	assert.Equal(t, 2, *r.Candidate)
	require.Len(t, r.Transitions, 2)
	assert.True(t, r.Transitions[0].Qualifies)
	assert.True(t, r.Transitions[1].Qualifies)
	assert.InDelta(t, 0.03, *r.Transitions[0].ThroughputChange, 1e-12)
	assert.InDelta(t, 0.25, *r.Transitions[0].P99Change, 1e-12)
	assert.Equal(t, 0.05, r.ThroughputGainThreshold)
	assert.Equal(t, 0.20, r.P99RiseThreshold)
	assert.Equal(t, 2, r.RequiredTransitions)
}

func TestSaturationCases(t *testing.T) {
	cases := []struct {
		name   string
		levels []int
		tps    []*float64
		p99    []*float64
		want   *int
	}{
		{"linear growth", []int{1, 2, 4}, []*float64{f64(100), f64(200), f64(400)}, []*float64{f64(1), f64(1), f64(1)}, nil},
		{"one flat step is noise", []int{1, 2, 4}, []*float64{f64(100), f64(101), f64(200)}, []*float64{f64(1), f64(2), f64(2)}, nil},
		{"rise exactly 20% qualifies", []int{1, 2, 4}, []*float64{f64(100), f64(100), f64(100)}, []*float64{f64(5), f64(6), f64(12)}, ip(2)},
		{"gain exactly 5% does not", []int{1, 2, 4}, []*float64{f64(100), f64(105), f64(110.25)}, []*float64{f64(1), f64(2), f64(4)}, nil},
		{"first streak wins", []int{1, 2, 4, 8, 16}, []*float64{f64(100), f64(200), f64(201), f64(202), f64(203)}, []*float64{f64(1), f64(1), f64(2), f64(3), f64(4)}, ip(4)},
		{"missing values never crash", []int{1, 2, 4, 8}, []*float64{nil, f64(1), f64(1), f64(1)}, []*float64{f64(1), nil, f64(2), f64(3)}, nil},
		{"zero old throughput", []int{1, 2, 4}, []*float64{f64(0), f64(0), f64(0)}, []*float64{f64(1), f64(2), f64(3)}, nil},
		{"single level", []int{1}, []*float64{f64(1)}, []*float64{f64(1)}, nil},
		{"no levels", nil, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Saturation(pts(c.levels, c.tps, c.p99), DefaultThroughputGain, DefaultP99Rise)
			assert.Equal(t, c.want, r.Candidate)
			assert.Len(t, r.Transitions, max(len(c.levels)-1, 0))
		})
	}
}

func ip(v int) *int { return &v }

// naiveSaturation restates the rule in the plainest terms: the candidate is
// the smallest i such that transitions i-1 -> i and i -> i+1 both qualify,
// where the streak is only ever broken by a non-qualifying transition.
func naiveSaturation(l []LevelPoint) *int {
	q := func(a, b LevelPoint) bool {
		if a.OutputTokensPerS == nil || b.OutputTokensPerS == nil || a.LatencyP99S == nil || b.LatencyP99S == nil {
			return false
		}
		if *a.OutputTokensPerS == 0 || *a.LatencyP99S == 0 {
			return false
		}
		g := (*b.OutputTokensPerS - *a.OutputTokensPerS) / *a.OutputTokensPerS
		r := (*b.LatencyP99S - *a.LatencyP99S) / *a.LatencyP99S
		return g < 0.05 && r >= 0.20
	}
	for i := 1; i+1 < len(l); i++ {
		if q(l[i-1], l[i]) && q(l[i], l[i+1]) {
			c := l[i].Concurrency
			return &c
		}
	}
	return nil
}

func TestSaturationDifferential(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < 20000; i++ {
		n := rng.IntN(8)
		l := make([]LevelPoint, n)
		tp, lat := 100.0, 1.0
		for j := range l {
			l[j].Concurrency = j + 1
			tp *= 1 + (rng.Float64()*0.2 - 0.05)
			lat *= 1 + rng.Float64()*0.5
			if rng.IntN(10) > 0 {
				l[j].OutputTokensPerS = f64(tp)
			}
			if rng.IntN(10) > 0 {
				l[j].LatencyP99S = f64(lat)
			}
		}
		got := Saturation(l, DefaultThroughputGain, DefaultP99Rise).Candidate
		want := naiveSaturation(l)
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Fatalf("seed %d case %d: got %v want %v for %+v", seed, i, deref(got), deref(want), l)
		}
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func f64(v float64) *float64 { return &v }
