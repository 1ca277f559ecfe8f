package cli

import (
	"strconv"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// TestAsRequest (moved from cmd/generate with AsRequest): --seed and
// --temperature mean what a request's seed and temperature mean to the
// server: -1 is no seed, and a temperature in
// (0, 0.01) samples at 0.01 instead of running greedy below 1e-5.
func TestAsRequest(t *testing.T) {
	for _, tc := range []struct {
		seed     *int64
		temp     float64
		wantSeed *int64
		wantTemp float64
	}{
		{new(int64(-1)), 1, nil, 1},
		{new(int64(0)), 1, new(int64(0)), 1},
		{new(int64(7)), 0, new(int64(7)), 0},
		{nil, 1e-6, nil, 0.01},
		{nil, 0.005, nil, 0.01},
		{nil, 0.01, nil, 0.01},
		{nil, 0.5, nil, 0.5},
	} {
		p := llm.SamplingParams{Seed: tc.seed, Temperature: tc.temp}
		AsRequest(&p)
		if (p.Seed == nil) != (tc.wantSeed == nil) || (p.Seed != nil && *p.Seed != *tc.wantSeed) || p.Temperature != tc.wantTemp {
			t.Errorf("seed %v temperature %v: got seed %v temperature %v, want %v and %v", fmtSeed(tc.seed), tc.temp, fmtSeed(p.Seed), p.Temperature, fmtSeed(tc.wantSeed), tc.wantTemp)
		}
	}
}

func fmtSeed(s *int64) string {
	if s == nil {
		return "none"
	}
	return strconv.FormatInt(*s, 10)
}
