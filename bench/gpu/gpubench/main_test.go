package main

import (
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []float64{4, 1, 3, 2, 5}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {50, 3}, {95, 4.8}, {100, 5}} {
		if got := percentile(xs, c.p); got < c.want-1e-12 || got > c.want+1e-12 {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty")
	}
}

func TestPromptsShapes(t *testing.T) {
	s := Scenario{Name: "mixed_prefill", ISL: 32, ISL2: 256, OSL: 32, Concurrency: 4}
	p := s.prompts(4, 50257, 1)
	if len(p[0]) != 32 || len(p[1]) != 256 || len(p[2]) != 32 {
		t.Errorf("lengths %d %d %d", len(p[0]), len(p[1]), len(p[2]))
	}
	q := s.prompts(4, 50257, 1)
	if p[1][7] != q[1][7] {
		t.Error("prompts are not deterministic")
	}
}

func TestTable(t *testing.T) {
	a := Report{Engine: "A", Results: []Result{{Scenario: Scenario{Name: "batch_c4", Concurrency: 4}, Requests: 8, OutputTokS: 3000, LatencyP50S: 0.1, LatencyP95S: 0.2}, {Scenario: Scenario{Name: "x"}}}}
	b := Report{Engine: "B", Results: []Result{{Scenario: Scenario{Name: "batch_c4", Concurrency: 4}, OutputTokS: 1000, LatencyP50S: 0.3, LatencyP95S: 0.4}}}
	got := table(a, b)
	for _, want := range []string{"| batch_c4 | 4 | 8 | 100.0 | 200.0 | 3000 | 300.0 | 400.0 | 1000 | 3.00 |", "| x | 0 | 0 | 0.0 | 0.0 | 0 | - | - | - | - |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
