package report

import (
	"bytes"
	"encoding/csv"
	"strconv"

	"github.com/tinyserve/tinyserve/sweep/analysis"
)

// csvHeader is the header row of summary.csv.
var csvHeader = []string{
	"concurrency", "repeats", "attempted", "successful", "failed", "output_tokens", "duration_s",
	"request_throughput_per_s", "output_token_throughput_per_s",
	"median_repeat_request_throughput_per_s", "median_repeat_output_token_throughput_per_s", "median_repeat_latency_p99_s",
	"latency_mean_s", "latency_p50_s", "latency_p90_s", "latency_p99_s",
	"ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
	"tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
	"inter_chunk_p50_s", "inter_chunk_p99_s", "client_queue_p50_s",
	"mean_in_flight", "new_connections", "goodput_fraction", "goodput_requests_per_s",
	"saturation_candidate",
}

// renderCSV renders summary.csv: one row per level, empty cells for missing
// values.
func renderCSV(c *analysis.Combined) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(csvHeader); err != nil {
		return nil, err
	}
	f := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	for _, a := range c.ByConcurrency {
		cand := "false"
		if c.Saturation.Candidate != nil && *c.Saturation.Candidate == a.Concurrency {
			cand = "true"
		}
		d := a.DurationS
		gf, gr := "", ""
		if g := a.Goodput; g != nil {
			gf, gr = f(g.Fraction), f(g.RequestsPerS)
		}
		row := []string{
			strconv.Itoa(a.Concurrency), strconv.Itoa(a.Repeats), strconv.Itoa(a.Counts.Attempted),
			strconv.Itoa(a.Counts.Successful), strconv.Itoa(a.Counts.Failed), strconv.Itoa(a.Counts.OutputTokens), f(&d),
			f(a.RequestThroughput), f(a.OutputTokenThroughput),
			f(a.RepeatMedians.RequestThroughput), f(a.RepeatMedians.OutputTokenThroughput), f(a.RepeatMedians.LatencyP99S),
			f(a.LatencyS.Mean), f(a.LatencyS.P50), f(a.LatencyS.P90), f(a.LatencyS.P99),
			f(a.TTFTS.Mean), f(a.TTFTS.P50), f(a.TTFTS.P90), f(a.TTFTS.P99),
			f(a.TPOTS.Mean), f(a.TPOTS.P50), f(a.TPOTS.P90), f(a.TPOTS.P99),
			f(a.InterChunkS.P50), f(a.InterChunkS.P99), f(a.ClientQueueS.P50),
			f(a.MeanInFlight), strconv.Itoa(a.Counts.NewConnections), gf, gr,
			cand,
		}
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}
