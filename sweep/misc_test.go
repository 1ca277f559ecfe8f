package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

func TestParsePrometheusText(t *testing.T) {
	text := `# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 3
vllm:num_requests_running{model_name="b"} 1
vllm:kv_cache_usage_perc{model_name="a",engine="0"} 0.25
vllm:num_preemptions_total 7 1700000000000
vllm:num_requests_waiting{model_name="a"} NaN-ish
other_metric 9
vllm:generation_tokens_total{label="with } brace"} 12
`
	got := loadgen.ParsePrometheusText(strings.NewReader(text), loadgen.ScrapedMetrics())
	assert.Equal(t, 4.0, got["vllm:num_requests_running"])
	assert.Equal(t, 0.25, got["vllm:kv_cache_usage_perc"])
	assert.Equal(t, 7.0, got["vllm:num_preemptions_total"])
	assert.Equal(t, 12.0, got["vllm:generation_tokens_total"])
	assert.NotContains(t, got, "vllm:num_requests_waiting")
	assert.NotContains(t, got, "other_metric")
}

func TestServerBase(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:8000/v1/completions":     "http://localhost:8000",
		"http://u:p@h:1/prefix/v1/completions?x=1": "http://h:1/prefix",
		"https://h/completions":                    "https://h",
	} {
		got, err := loadgen.ServerBase(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
}

func TestEstimateETA(t *testing.T) {
	s := time.Second
	assert.Zero(t, EstimateETA(nil, 5, 0, 0))
	assert.Equal(t, 4*s+2*s, EstimateETA([]time.Duration{2 * s, 2 * s}, 2, 0, 0))
	// Halfway through the current run after 3 s: 3 s more, plus 2 runs of 2 s.
	assert.Equal(t, 7*s, EstimateETA([]time.Duration{2 * s}, 2, 3*s, 0.5))
	// Past the mean with nothing finished: only the runs not started.
	assert.Equal(t, 4*s, EstimateETA([]time.Duration{2 * s}, 2, 5*s, 0))
}

func TestProgressPlainAndTerminal(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	var plain bytes.Buffer
	p := NewProgress(&plain, false, clock)
	p.Begin(2)
	p.Skip(RunSpec{Kind: KindWarmup, Index: 1, Concurrency: 1})
	p.StartRun(RunSpec{Kind: KindRepeat, Index: 1, Concurrency: 2}, 4)
	p.Request(1)
	p.EndRun(&loadgen.Summary{Figures: loadgen.Figures{Counts: loadgen.Counts{Attempted: 4, Successful: 4}}})
	p.Finish()
	out := plain.String()
	assert.Contains(t, out, "resume: keeping complete run warmup-01/concurrency-001")
	assert.Contains(t, out, "run 2/2: repeat-01/concurrency-002 (4 requests)")
	assert.Contains(t, out, "done: 4/4 ok, n/a output tokens/s, p99 latency n/a\n", "no unit after n/a")
	assert.NotContains(t, out, "\r", "no control characters when not a terminal")

	var tty bytes.Buffer
	p = NewProgress(&tty, true, clock)
	p.Begin(3)
	p.StartRun(RunSpec{Kind: KindRepeat, Index: 1, Concurrency: 2}, 4)
	p.Request(2)
	p.EndRun(nil)
	p.Logf("hello %d", 1)
	p.Finish()
	assert.Contains(t, tty.String(), "runs 1/3")
	assert.Contains(t, tty.String(), "2/4 requests")
	assert.Contains(t, tty.String(), "ETA")
	assert.Contains(t, tty.String(), "hello 1\n")

	var nilP *Progress
	nilP.Begin(1)
	nilP.Request(1)
	nilP.Finish()
}

func TestAggregateFixed(t *testing.T) {
	mk := func(kind string, idx, c int, tps, p99 float64, lat ...float64) RunData {
		var recs []loadgen.Record
		for _, l := range lat {
			out := 10
			recs = append(recs, loadgen.Record{Status: 200, LatencyS: l, OutputTokens: &out})
		}
		return RunData{Spec: RunSpec{Kind: kind, Index: idx, Concurrency: c}, Records: recs,
			Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: 1, OutputTokenThroughput: f64(tps), RequestThroughput: f64(tps / 10), LatencyS: loadgen.Distribution{P99: f64(p99)}}}}
	}
	runs := []RunData{
		mk(KindWarmup, 1, 1, 9999, 99, 50), // excluded everywhere
		mk(KindRepeat, 1, 4, 104, 1.55, 1, 2),
		mk(KindRepeat, 1, 1, 100, 1.0, 1),
		mk(KindRepeat, 1, 2, 103, 1.25, 1),
		mk(KindRepeat, 2, 1, 300, 5.0, 3),
		mk(KindRepeat, 3, 1, 100, 1.0, 2),
		mk(KindRepeat, 2, 2, 103, 1.25, 1),
		mk(KindRepeat, 2, 4, 104, 1.55, 1),
	}
	c := Aggregate(map[string]any{"name": "x"}, nil, []int{4, 1, 2}, runs)
	require.Len(t, c.ByConcurrency, 3)
	l1 := c.ByConcurrency[0]
	assert.Equal(t, 1, l1.Concurrency)
	assert.Equal(t, 3, l1.Repeats)
	assert.Equal(t, 100.0, *l1.RepeatMedians.OutputTokenThroughput, "median of 100, 300, 100")
	assert.Equal(t, 1.0, *l1.RepeatMedians.LatencyP99S)
	assert.Equal(t, 3, l1.Counts.Successful, "warmup records excluded")
	assert.InDelta(t, 10.0, *l1.OutputTokenThroughput, 1e-12, "30 tokens over 3 s")
	assert.Len(t, c.MeasuredRuns, 7)
	require.NotNil(t, c.Saturation.Candidate)
	assert.Equal(t, 2, *c.Saturation.Candidate)

	csvb, err := RenderCSV(&c)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(csvb)), "\n")
	require.Len(t, lines, 4)
	assert.True(t, strings.HasPrefix(lines[0], "concurrency,repeats,"))
	assert.True(t, strings.HasSuffix(lines[2], ",true"), "level 2 is the candidate: %s", lines[2])
	md := RenderReport(&c)
	assert.Contains(t, md, "| 1 | 3 | 3 | 0 |")
	assert.Contains(t, md, "| 100.000 | 100.0–300.0 | 1.000 | 1.000–5.000 |", "the repeats' spread beside the medians")
	assert.Contains(t, md, "not proof that the device itself is saturated")
	// Level 1's repeats (100, 300, 100) are 200% of their median apart; the
	// others agree.
	assert.Contains(t, md, "**Warning: repeats disagree.**")
	assert.Contains(t, md, "than 10% of the median, while the rule above tests a 5% gain")
	assert.Contains(t, md, "- concurrency 1: 100.0–300.0 output tokens/s (200% of the median).\n\nThis plateau")
	png, svg, err := RenderPlot(&c)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
	assert.Contains(t, string(svg), "<svg")

	// Missing values never crash the aggregate or the reports.
	empty := Aggregate(nil, nil, []int{1, 2}, nil)
	assert.Len(t, empty.ByConcurrency, 2)
	assert.Nil(t, empty.Saturation.Candidate)
	_, _, err = RenderPlot(&empty)
	require.NoError(t, err)
	assert.Contains(t, RenderReport(&empty), "n/a")
	assert.NotContains(t, RenderReport(&empty), "repeats disagree")
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
	c := Aggregate(map[string]any{"name": "x"}, nil, []int{1}, []RunData{
		{Spec: RunSpec{Kind: KindRepeat, Index: 1, Concurrency: 1}, Records: []loadgen.Record{without, without}, Summary: old},
	})
	a := c.ByConcurrency[0]
	assert.Nil(t, a.OutputTokenThroughput)
	assert.Equal(t, []*float64{nil}, a.RepeatValues.OutputTokenThroughput, "an old summary's 0 is not data")
	assert.Nil(t, a.RepeatMedians.OutputTokenThroughput)
	assert.Equal(t, 2, a.Counts.WithoutUsage)
	assert.Contains(t, RenderReport(&c), "Warning: missing token usage")
	assert.Contains(t, RenderReport(&c), "concurrency 1: the server reported no token usage")

	var log bytes.Buffer
	p := NewProgress(&log, false, time.Now)
	p.Begin(1)
	p.StartRun(RunSpec{Kind: KindRepeat, Index: 1, Concurrency: 1}, 2)
	p.EndRun(&none)
	assert.Contains(t, log.String(), "warning: run ")
	assert.Contains(t, log.String(), "no token usage")
	assert.Contains(t, log.String(), "n/a output tokens/s")
}

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

func TestServedModelsAndVersion(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
	}{
		"/list/v1/models":    {200, `{"object":"list","data":[{"id":""},{"id":"a"},{"id":"b/c"}]}`},
		"/empty/v1/models":   {200, `{"object":"list","data":[]}`},
		"/broken/v1/models":  {500, `{"error":{}}`},
		"/list/version":      {200, `{"version":"0.9.1"}`},
		"/empty/version":     {200, `{"version":7}`},
		"/broken/version":    {500, `{"version":"0.9.1"}`},
		"/long/version":      {200, `{"version":"` + strings.Repeat("x", 300) + `"}`},
		"/notjson/v1/models": {200, `<html>`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	ctx := context.Background()
	ids, err := loadgen.ServedModels(ctx, srv.Client(), srv.URL+"/list", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b/c"}, ids, "empty ids are skipped")
	for _, base := range []string{"/empty", "/broken", "/notjson", "/missing"} {
		_, err := loadgen.ServedModels(ctx, srv.Client(), srv.URL+base, "")
		assert.Error(t, err, base)
	}
	assert.Equal(t, "0.9.1", loadgen.ServerVersion(ctx, srv.Client(), srv.URL+"/list", ""))
	for _, base := range []string{"/empty", "/broken", "/long", "/missing"} {
		assert.Empty(t, loadgen.ServerVersion(ctx, srv.Client(), srv.URL+base, ""), base)
	}
}

// TestGoodputPerLevel: a level's goodput pools its repeats' records against
// the SLO they recorded; report.md and summary.csv show it; none meeting
// the SLO is a measured zero, never null.
func TestGoodputPerLevel(t *testing.T) {
	slo := &loadgen.SLO{LatencyS: 1.5}
	rec := func(lat float64, out int) loadgen.Record {
		return loadgen.Record{Status: 200, LatencyS: lat, OutputTokens: &out, ServerTokenUsagePresent: true}
	}
	run := func(idx, c int, recs ...loadgen.Record) RunData {
		return RunData{Spec: RunSpec{Kind: KindRepeat, Index: idx, Concurrency: c}, Records: recs,
			Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: 2}, Config: loadgen.SummaryConfig{SLO: slo}}}
	}
	c := Aggregate(map[string]any{"name": "x"}, nil, []int{1, 2}, []RunData{
		run(1, 1, rec(1, 10), rec(2, 10)), run(2, 1, rec(1, 10), rec(1, 10)),
		run(1, 2, rec(3, 10), rec(3, 10)),
	})
	g := c.ByConcurrency[0].Goodput
	require.NotNil(t, g)
	assert.Equal(t, 3, g.Met)
	assert.InDelta(t, 0.75, *g.Fraction, 1e-12)
	assert.InDelta(t, 0.75, *g.RequestsPerS, 1e-12, "3 over 4 s")
	assert.InDelta(t, 7.5, *g.OutputTokensPer, 1e-12)
	g2 := c.ByConcurrency[1].Goodput
	require.NotNil(t, g2)
	assert.Equal(t, 0, g2.Met)
	require.NotNil(t, g2.OutputTokensPer, "none met: a measured zero")
	assert.Zero(t, *g2.OutputTokensPer)
	md := RenderReport(&c)
	assert.Contains(t, md, "## Goodput")
	assert.Contains(t, md, "every objective (latency ≤ 1.5 s)")
	assert.Contains(t, md, "| 1 | 3 of 4 (75%) | 0.750 | 7.500 |")
	assert.Contains(t, md, "| 2 | 0 of 2 (0%) | 0.000 | 0.000 |")
	csvb, err := RenderCSV(&c)
	require.NoError(t, err)
	assert.Contains(t, string(csvb), ",goodput_fraction,goodput_requests_per_s,saturation_candidate")
	assert.Contains(t, string(csvb), ",0.75,0.75,")

	without := Aggregate(map[string]any{"name": "x"}, nil, []int{1}, []RunData{{Spec: RunSpec{Kind: KindRepeat, Index: 1, Concurrency: 1}, Records: []loadgen.Record{rec(1, 1)}, Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: 1}}}})
	assert.Nil(t, without.ByConcurrency[0].Goodput)
	assert.NotContains(t, RenderReport(&without), "Goodput")
}

// TestNoiseWarningThreshold: a level is named only when its fastest and
// slowest repeats are more than twice the gain threshold (10%) of the
// median apart: exactly 10% is what the rule can still resolve.
func TestNoiseWarningThreshold(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	level := func(c int, lo, med, hi float64) LevelAggregate {
		var a LevelAggregate
		a.Concurrency, a.Repeats = c, 3
		a.RepeatValues.OutputTokenThroughput = []*float64{f(lo), f(med), f(hi)}
		a.RepeatMedians.OutputTokenThroughput = f(med)
		return a
	}
	var b strings.Builder
	writeNoiseWarning(&b, []LevelAggregate{level(1, 95, 100, 105)}, DefaultThroughputGain)
	assert.Empty(t, b.String(), "10% apart")
	writeNoiseWarning(&b, []LevelAggregate{level(1, 95, 100, 105), level(2, 190, 200, 210.5)}, DefaultThroughputGain)
	assert.NotContains(t, b.String(), "concurrency 1:")
	assert.Contains(t, b.String(), "- concurrency 2: 190.0–210.5 output tokens/s (10% of the median).\n")
}

// TestMeanInFlightAndConnections: a run's mean in flight is the time its
// requests (failed ones too) spent from send to end over its duration, and
// new connections are counted; a sweep's report warns about levels that
// did not hold their concurrency or reopened connections.
func TestMeanInFlightAndConnections(t *testing.T) {
	yes, no := true, false
	rec := func(start, end float64, reused *bool, status loadgen.Status) loadgen.Record {
		return loadgen.Record{Status: status, StartedOffsetS: start, EndedOffsetS: end, LatencyS: end - start, ConnectionReused: reused}
	}
	// Two slots over 2 s: busy 1+1.5+0.5 = 3 s, so 1.5 in flight.
	recs := []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1.5, &no, 200), rec(1, 1.5, &yes, 500)}
	s := loadgen.Summarize(loadgen.SummaryConfig{Concurrency: 2}, recs, 2)
	require.NotNil(t, s.MeanInFlight)
	assert.InDelta(t, 1.5, *s.MeanInFlight, 1e-12)
	assert.Equal(t, 2, s.Counts.NewConnections)

	run := func(idx, c int, recs []loadgen.Record, d float64) RunData {
		return RunData{Spec: RunSpec{Kind: KindRepeat, Index: idx, Concurrency: c}, Records: recs, Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: d}}}
	}
	held := []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1, &no, 200)} // 2 in flight over 1 s
	c := Aggregate(map[string]any{"name": "x", "num_requests": 2.0}, nil, []int{2, 4}, []RunData{
		run(1, 2, held, 1), run(2, 2, []loadgen.Record{rec(0, 1, &yes, 200), rec(0, 1, &yes, 200)}, 1),
		// Level 4: 2 in flight of 4 over 1 s, and 6 new connections.
		run(1, 4, []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1, &no, 200)}, 1),
		run(2, 4, []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1, &no, 200), rec(0, 0, &no, 200), rec(0, 0, &no, 200)}, 1),
	})
	require.Len(t, c.ByConcurrency, 2)
	assert.InDelta(t, 2.0, *c.ByConcurrency[0].MeanInFlight, 1e-12)
	assert.InDelta(t, 2.0, *c.ByConcurrency[1].MeanInFlight, 1e-12, "4 s busy over 2 s")
	assert.Equal(t, 6, c.ByConcurrency[1].Counts.NewConnections)
	md := RenderReport(&c)
	assert.Contains(t, md, "**Warning: concurrency not held.**")
	assert.Contains(t, md, "- concurrency 4: 2.0 in flight on average (50%).")
	assert.NotContains(t, md, "- concurrency 2: 2.0 in flight")
	assert.Contains(t, md, "(2 requests per run)")
	c.Config = map[string]any{"name": "x", "num_requests": json.Number("2")} // as a sweep resolves it
	assert.Contains(t, RenderReport(&c), "(2 requests per run)")
	c.Config = map[string]any{"name": "x", "num_requests": 2.0}
	assert.Contains(t, md, "**Warning: connections reopened.**")
	assert.Contains(t, md, "- concurrency 4: 6 requests opened a connection over 2 repeats.")
	assert.NotContains(t, md, "- concurrency 2: 2 requests opened")

	held2 := Aggregate(map[string]any{"name": "x"}, nil, []int{2}, []RunData{run(1, 2, held, 1)})
	md = RenderReport(&held2)
	assert.NotContains(t, md, "concurrency not held")
	assert.NotContains(t, md, "connections reopened")
	assert.NotContains(t, md, "held open")

	// Each session starts a new pool: two sessions may open 2c connections.
	bySession := func(idx, session, opened int) RunData {
		var recs []loadgen.Record
		for range opened {
			recs = append(recs, rec(0, 1, &no, 200))
		}
		r := run(idx, 2, recs, 1)
		r.Summary.Config.Session = session
		return r
	}
	two := Aggregate(map[string]any{"name": "x"}, nil, []int{2}, []RunData{bySession(1, 1, 2), bySession(2, 2, 2)})
	assert.Equal(t, 2, two.ByConcurrency[0].Sessions)
	assert.NotContains(t, RenderReport(&two), "connections reopened")
	three := Aggregate(map[string]any{"name": "x"}, nil, []int{2}, []RunData{bySession(1, 1, 2), bySession(2, 2, 3)})
	assert.Contains(t, RenderReport(&three), "- concurrency 2: 5 requests opened a connection over 2 repeats.")

	lingering := rec(0, 1, &yes, 200)
	lingering.HeldOpenAfterDone = &yes
	c = Aggregate(map[string]any{"name": "x"}, nil, []int{1}, []RunData{run(1, 1, []loadgen.Record{lingering, rec(1, 2, &yes, 200)}, 2)})
	assert.Equal(t, 1, c.ByConcurrency[0].Counts.HeldOpen)
	md = RenderReport(&c)
	assert.Contains(t, md, "**Warning: responses held open after [DONE].**")
	assert.Contains(t, md, "- concurrency 1: 1 of 2 responses.")
}

// TestSessionOfOldSummaries: a run summary written before summaries named
// their session counts as the first session's, both for the mixed-set-up
// warning and for the per-level session count.
func TestSessionOfOldSummaries(t *testing.T) {
	old, resumed := loadgen.Summary{}, loadgen.Summary{Config: loadgen.SummaryConfig{Session: 2}}
	assert.Equal(t, 1, old.Session())
	assert.Equal(t, 2, resumed.Session())
	m := &Manifest{Source: ManifestSource{Git: GitInfo{Available: true, Revision: "aaa"}},
		Resumes: []ManifestResume{{Session: 2, Source: ManifestSource{Git: GitInfo{Available: true, Revision: "bbb"}}}}}
	assert.Equal(t, []string{"source revision aaa in session 1, bbb in session 2"}, m.sessionChanges([]int{old.Session(), resumed.Session()}))
	runs := []*RunData{{Summary: old}, {Summary: resumed}}
	assert.Equal(t, 2, sessionCount(runs))
	assert.Equal(t, 0, sessionCount(runs[:1]))
}
