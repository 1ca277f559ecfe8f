package sweep

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

func TestEstimateETA(t *testing.T) {
	s := time.Second
	assert.Zero(t, estimateETA(nil, 5, 0, 0))
	assert.Equal(t, 4*s+2*s, estimateETA([]time.Duration{2 * s, 2 * s}, 2, 0, 0))
	// Halfway through the current run after 3 s: 3 s more, plus 2 runs of 2 s.
	assert.Equal(t, 7*s, estimateETA([]time.Duration{2 * s}, 2, 3*s, 0.5))
	// Past the mean with nothing finished: only the runs not started.
	assert.Equal(t, 4*s, estimateETA([]time.Duration{2 * s}, 2, 5*s, 0))
}

func TestProgressPlainAndTerminal(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	var plain bytes.Buffer
	p := NewProgress(&plain, false, clock)
	p.begin(2)
	p.skip(analysis.RunSpec{Kind: analysis.KindWarmup, Index: 1, Concurrency: 1})
	p.startRun(analysis.RunSpec{Kind: analysis.KindRepeat, Index: 1, Concurrency: 2}, 4)
	p.request(1)
	p.endRun(&loadgen.Summary{Figures: loadgen.Figures{Counts: loadgen.Counts{Attempted: 4, Successful: 4}}})
	p.finish()
	out := plain.String()
	assert.Contains(t, out, "resume: keeping complete run warmup-01/concurrency-001")
	assert.Contains(t, out, "run 2/2: repeat-01/concurrency-002 (4 requests)")
	assert.Contains(t, out, "done: 4/4 ok, n/a output tokens/s, p99 latency n/a\n", "no unit after n/a")
	assert.NotContains(t, out, "\r", "no control characters when not a terminal")

	var tty bytes.Buffer
	p = NewProgress(&tty, true, clock)
	p.begin(3)
	p.startRun(analysis.RunSpec{Kind: analysis.KindRepeat, Index: 1, Concurrency: 2}, 4)
	p.request(2)
	p.endRun(nil)
	p.logf("hello %d", 1)
	p.finish()
	assert.Contains(t, tty.String(), "runs 1/3")
	assert.Contains(t, tty.String(), "2/4 requests")
	assert.Contains(t, tty.String(), "ETA")
	assert.Contains(t, tty.String(), "hello 1\n")

	var nilP *Progress
	nilP.begin(1)
	nilP.request(1)
	nilP.finish()
}

// TestThroughputWithoutUsageIsNull: output-token throughput with no
// server-reported token count is null (no data), never 0, in a run summary,
// its goodput and a sweep's aggregate, including for summaries written
// before the fix that say 0; requests without usage are counted and
// reported.
func TestThroughputWithoutUsageIsNull(t *testing.T) {
	ten := 10
	withUsage := loadgen.Record{Status: 200, LatencyS: 1, OutputTokens: &ten, ServerTokenUsagePresent: true}
	without := loadgen.Record{Status: 200, LatencyS: 1}
	slo := loadgen.SLO{LatencyS: 5}
	cfg := loadgen.SummaryConfig{SLO: &slo}

	none := loadgen.Summarize(cfg, []loadgen.Record{without, without}, 2)
	assert.Nil(t, none.OutputTokenThroughput)
	assert.Nil(t, none.Goodput.OutputTokensPer)
	require.NotNil(t, none.RequestThroughput)
	assert.Equal(t, 1.0, *none.RequestThroughput)
	assert.Equal(t, 2, none.Counts.WithoutUsage)
	assert.Contains(t, none.Counts.UsageWarning(), "null")
	b, err := json.Marshal(none)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"output_token_throughput_per_s":null`)
	assert.Contains(t, string(b), `"successful_without_usage":2`)

	mixed := loadgen.Summarize(cfg, []loadgen.Record{withUsage, without}, 2)
	require.NotNil(t, mixed.OutputTokenThroughput)
	assert.Equal(t, 5.0, *mixed.OutputTokenThroughput)
	assert.Equal(t, 1, mixed.Counts.WithoutUsage)
	assert.Contains(t, mixed.Counts.UsageWarning(), "1 of 2")
	assert.Empty(t, loadgen.Summarize(cfg, []loadgen.Record{withUsage}, 1).Counts.UsageWarning())

	old := loadgen.Summary{Figures: loadgen.Figures{DurationS: 2, OutputTokenThroughput: f64(0), RequestThroughput: f64(1), Counts: loadgen.Counts{Attempted: 2, Successful: 2}}}
	c := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{1}, []analysis.RunData{
		{Spec: analysis.RunSpec{Kind: analysis.KindRepeat, Index: 1, Concurrency: 1}, Records: []loadgen.Record{without, without}, Summary: old},
	})
	a := c.ByConcurrency[0]
	assert.Nil(t, a.OutputTokenThroughput)
	assert.Equal(t, []*float64{nil}, a.RepeatValues.OutputTokenThroughput, "an old summary's 0 is not data")
	assert.Nil(t, a.RepeatMedians.OutputTokenThroughput)
	assert.Equal(t, 2, a.Counts.WithoutUsage)
	assert.Contains(t, report.Markdown(&c), "Warning: missing token usage")
	assert.Contains(t, report.Markdown(&c), "concurrency 1: the server reported no token usage")

	var log bytes.Buffer
	p := NewProgress(&log, false, time.Now)
	p.begin(1)
	p.startRun(analysis.RunSpec{Kind: analysis.KindRepeat, Index: 1, Concurrency: 1}, 2)
	p.endRun(&none)
	assert.Contains(t, log.String(), "warning: run ")
	assert.Contains(t, log.String(), "no token usage")
	assert.Contains(t, log.String(), "n/a output tokens/s")
}

func f64(v float64) *float64 { return &v }

// TestSessionOfOldSummaries: a run summary written before summaries named
// their session counts as the first session's for the mixed-set-up
// warning (analysis's TestSessionCountOfOldSummaries checks the per-level
// session count).
func TestSessionOfOldSummaries(t *testing.T) {
	old, resumed := loadgen.Summary{}, loadgen.Summary{Config: loadgen.SummaryConfig{Session: 2}}
	assert.Equal(t, 1, old.Session())
	assert.Equal(t, 2, resumed.Session())
	m := &Manifest{Source: ManifestSource{Git: GitInfo{Available: true, Revision: "aaa"}},
		Resumes: []ManifestResume{{Session: 2, Source: ManifestSource{Git: GitInfo{Available: true, Revision: "bbb"}}}}}
	assert.Equal(t, []string{"source revision aaa in session 1, bbb in session 2"}, m.sessionChanges([]int{old.Session(), resumed.Session()}))
}
