package analysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// TestServerPhasesPoolsRuns: each phase's mean pools the runs' sums and
// counts (every request weighs the same), skipping a run whose counters
// went down (a server restarted mid-run) or are missing.
func TestServerPhasesPoolsRuns(t *testing.T) {
	run := func(before, after map[string]float64) *RunData {
		return &RunData{Server: &loadgen.RunMetrics{
			Before: loadgen.MetricsSnapshot{Available: true, Values: before},
			After:  loadgen.MetricsSnapshot{Available: true, Values: after},
		}}
	}
	const qs, qc = "vllm:request_queue_time_seconds_sum", "vllm:request_queue_time_seconds_count"
	runs := []*RunData{
		run(map[string]float64{qs: 1, qc: 10}, map[string]float64{qs: 2, qc: 20}),  // 10 requests, 1 s
		run(map[string]float64{qs: 2, qc: 20}, map[string]float64{qs: 5, qc: 50}),  // 30 requests, 3 s
		run(map[string]float64{qs: 9, qc: 90}, map[string]float64{qs: 0.5, qc: 5}), // restarted: skipped
		{}, // no metrics
	}
	p := serverPhases(runs)
	require.NotNil(t, p)
	require.NotNil(t, p.QueueS)
	assert.InDelta(t, 4.0/40, *p.QueueS, 1e-12)
	assert.Nil(t, p.PrefillS)
	assert.Nil(t, p.DecodeS)
	assert.Nil(t, serverPhases(runs[2:]))
}

// TestSessionCountOfOldSummaries: a run summary written before summaries
// named their session counts as the first session's in the per-level
// session count (the runner's TestSessionOfOldSummaries checks the
// mixed-set-up warning).
func TestSessionCountOfOldSummaries(t *testing.T) {
	old, resumed := loadgen.Summary{}, loadgen.Summary{Config: loadgen.SummaryConfig{Session: 2}}
	runs := []*RunData{{Summary: old}, {Summary: resumed}}
	assert.Equal(t, 2, sessionCount(runs))
	assert.Equal(t, 0, sessionCount(runs[:1]))
}
