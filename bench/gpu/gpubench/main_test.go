package main

import (
	"io"
	"os"
	"path/filepath"
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
	b := Report{Engine: "B", Results: []Result{{Scenario: Scenario{Name: "batch_c4", Concurrency: 4}, OutputTokS: 1000, LatencyP50S: 0.3, LatencyP95S: 0.4, StepMSP50: 9.375}}}
	got := table(a, b)
	for _, want := range []string{"| batch_c4 | 4 | 8 | 100.0 | 200.0 | 3000 | 300.0 | 400.0 | 1000 | 3.00 | 9.38 |", "| x | 0 | 0 | 0.0 | 0.0 | 0 | - | - | - | - | - |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestSweepReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		root := filepath.Join(dir, name)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "summary.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	one := write("a", `{"config":{"name":"tinyvllm-batch_c4","target":{"engine":{"model":"/m/gpt2-tiny","backend":"cuda","dtype":"auto"}}},
		"by_concurrency":[{"concurrency":4,"duration_s":2,"counts":{"successful":8,"output_tokens":256},"output_token_throughput_per_s":128,"latency_s":{"p50":0.5,"p95":0.75},"ttft_s":{"p50":0.1}}]}`)
	two := write("b", `{"config":{"name":"kv_pressure"},"by_concurrency":[{"concurrency":1},{"concurrency":8,"output_token_throughput_per_s":9}]}`)
	rep, err := sweepReport([]string{one, two})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Model != "gpt2-tiny" || rep.Device != "cuda" || len(rep.Results) != 3 {
		t.Fatalf("report %+v", rep)
	}
	r := rep.Results[0]
	if r.Name != "batch_c4" || r.Concurrency != 4 || r.Requests != 8 || r.OutputTokS != 128 || r.LatencyP50S != 0.5 || r.LatencyP95S != 0.75 || r.TTFTP50S != 0.1 || r.WallS != 2 || r.OutputTokens != 256 {
		t.Errorf("first result %+v", r)
	}
	if rep.Results[1].Name != "kv_pressure@1" || rep.Results[2].Name != "kv_pressure@8" || rep.Results[2].OutputTokS != 9 {
		t.Errorf("multi-level names %q %q", rep.Results[1].Name, rep.Results[2].Name)
	}
	if _, err := sweepReport([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a root without summary.json was accepted")
	}
	if err := run([]string{"fromsweep", filepath.Join(dir, "out.json"), one}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, err := readReport(filepath.Join(dir, "out.json")); err != nil || len(got.Results) != 1 {
		t.Errorf("fromsweep wrote %+v, %v", got, err)
	}
}
