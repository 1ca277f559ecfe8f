package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecodeRows: any prompt file gives rows or an error, never a panic;
// accepted rows all have a prompt, and asking for n gives exactly n.
func FuzzDecodeRows(f *testing.F) {
	b, err := os.ReadFile("../../prompts/short.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, 0)
	f.Add(b, 3)
	f.Add([]byte("{\"prompt\":\"a\"}\n\n{\"prompt\":\"b\",\"target_output_tokens\":-1}"), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		n = n % 1000
		rows, err := DecodeRows(bytes.NewReader(data), n)
		if err != nil {
			return
		}
		if len(rows) == 0 || (n > 0 && len(rows) != n) {
			t.Fatalf("asked for %d rows, got %d", n, len(rows))
		}
		for i := range rows {
			if rows[i].Prompt == "" {
				t.Fatalf("row %d has no prompt", i)
			}
			_ = rows[i].MaxTokens()
		}
	})
}

// FuzzParseSLO: --slo items (here the fuzzed string split at ',') give an
// SLO or an error naming the item, never a panic; an accepted SLO has only
// positive, finite thresholds (or 0, not set), survives the JSON round trip
// a run summary takes, and each threshold is the value written in the item
// that set it.
func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"ttft=0.2,tpot=0.05,latency=3", "e2e=1", " TTFT = 1e-3 ", "ttft=0", "ttft=-1", "ttft=inf", "x=1", "ttft", "latency=0x1p-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items := strings.Split(s, ",")
		slo, err := ParseSLO(items)
		if err != nil {
			if !slices.ContainsFunc(items, func(it string) bool { return strings.Contains(err.Error(), fmt.Sprintf("%q", it)) }) {
				t.Fatalf("ParseSLO(%q) = %v: names no item", items, err)
			}
			return
		}
		for _, v := range []float64{slo.TTFTS, slo.TPOTS, slo.LatencyS} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("ParseSLO(%q) accepted threshold %v", items, v)
			}
		}
		b, err := json.Marshal(slo)
		if err != nil {
			t.Fatalf("ParseSLO(%q) = %+v, which a summary cannot record: %v", items, slo, err)
		}
		var back SLO
		if err := json.Unmarshal(b, &back); err != nil || back != slo {
			t.Fatalf("SLO %+v came back from %s as %+v (%v)", slo, b, back, err)
		}
		for _, it := range items {
			name, val, _ := strings.Cut(it, "=")
			v, _ := strconv.ParseFloat(strings.TrimSpace(val), 64)
			got := map[string]float64{"ttft": slo.TTFTS, "tpot": slo.TPOTS, "latency": slo.LatencyS, "e2e": slo.LatencyS}[strings.ToLower(strings.TrimSpace(name))]
			if last := it == lastFor(items, name); last && got != v {
				t.Fatalf("ParseSLO(%q): %s = %v, want %v", items, name, got, v)
			}
		}
	})
}

// lastFor is the last item of items that sets the objective name names
// (latency and e2e are one).
func lastFor(items []string, name string) string {
	key := func(n string) string {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "e2e" {
			return "latency"
		}
		return n
	}
	last := ""
	for _, it := range items {
		if n, _, _ := strings.Cut(it, "="); key(n) == key(name) {
			last = it
		}
	}
	return last
}

// FuzzParsePrometheusText: whatever a server sends as /metrics, the parser
// returns only the names asked for and never panics; and a sample line
// appended after it adds exactly its value (a line the parser cannot read
// costs that line, not the rest of the page). Seeds: tinyserve's own page
// (testdata/metrics.txt) and testdata/fuzz/FuzzParsePrometheusText.
func FuzzParsePrometheusText(f *testing.F) {
	page, err := os.ReadFile("testdata/metrics.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(page)
	f.Add([]byte("vllm:num_requests_running{model_name=\"m\"} 3\n# HELP x\nvllm:num_requests_running 1e3\n"))
	f.Add([]byte("vllm:num_requests_running{a=\"}\"} 2 1700000000\r\n"))
	names := ScrapedMetrics()
	f.Fuzz(func(t *testing.T, data []byte) {
		out := ParsePrometheusText(bytes.NewReader(data), names)
		for k := range out {
			if !slices.Contains(names, k) {
				t.Fatalf("returned %q, which was not asked for", k)
			}
		}
		if bytes.Count(data, []byte("\n")) > 10_000 || len(data) > 1<<20 {
			return
		}
		const name = "vllm:num_requests_running"
		more := append(bytes.Clone(data), fmt.Sprintf("\n%s{extra=\"1\"} 7\n", name)...)
		got := ParsePrometheusText(bytes.NewReader(more), names)[name]
		want := out[name] + 7
		if math.IsNaN(out[name]) || math.IsInf(out[name], 0) {
			return
		}
		if got != want {
			t.Fatalf("appending a sample of 7 took %s from %v to %v", name, out[name], got)
		}
	})
}
