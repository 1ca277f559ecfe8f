package loadgen

import (
	"fmt"
	"io"
)

// WriteBrief ends a run with the few figures a person reads first, as
// `vllm bench serve` does: counts, throughput, and the p50 and p99 of TTFT,
// time per output token and latency, in milliseconds. The summary JSON has
// everything else; this is for the terminal, not for a file.
func (s *Summary) WriteBrief(w io.Writer) {
	num := func(v *float64, scale float64, format string) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprintf(format, *v*scale)
	}
	dist := func(d Distribution) string {
		return num(d.P50, 1000, "%.1f") + " / " + num(d.P99, 1000, "%.1f")
	}
	fmt.Fprintf(w, "%-34s %d (%d failed)\n", "Requests:", s.Counts.Attempted, s.Counts.Failed)
	fmt.Fprintf(w, "%-34s %.2f\n", "Duration (s):", s.DurationS)
	fmt.Fprintf(w, "%-34s %s\n", "Request throughput (req/s):", num(s.RequestThroughput, 1, "%.2f"))
	fmt.Fprintf(w, "%-34s %s\n", "Output token throughput (tok/s):", num(s.OutputTokenThroughput, 1, "%.1f"))
	fmt.Fprintf(w, "%-34s %s\n", "TTFT p50 / p99 (ms):", dist(s.TTFTS))
	fmt.Fprintf(w, "%-34s %s\n", "TPOT p50 / p99 (ms):", dist(s.TPOTS))
	fmt.Fprintf(w, "%-34s %s\n", "Latency p50 / p99 (ms):", dist(s.LatencyS))
}
