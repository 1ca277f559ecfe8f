package llm

import "testing"

func TestRaiseTinyTemperature(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{0, 0}, {1e-9, MinRequestTemperature}, {0.005, MinRequestTemperature},
		{MinRequestTemperature, MinRequestTemperature}, {0.7, 0.7},
	} {
		p := SamplingParams{Temperature: tc.in}
		p.RaiseTinyTemperature()
		if p.Temperature != tc.want {
			t.Errorf("RaiseTinyTemperature(%v) = %v, want %v", tc.in, p.Temperature, tc.want)
		}
	}
}
