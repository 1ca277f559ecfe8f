package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

func TestAggregateFixed(t *testing.T) {
	mk := func(kind string, idx, c int, tps, p99 float64, lat ...float64) analysis.RunData {
		var recs []loadgen.Record
		for _, l := range lat {
			out := 10
			recs = append(recs, loadgen.Record{Status: 200, LatencyS: l, OutputTokens: &out})
		}
		return analysis.RunData{Spec: analysis.RunSpec{Kind: kind, Index: idx, Concurrency: c}, Records: recs,
			Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: 1, OutputTokenThroughput: f64(tps), RequestThroughput: f64(tps / 10), LatencyS: loadgen.Distribution{P99: f64(p99)}}}}
	}
	runs := []analysis.RunData{
		mk(analysis.KindWarmup, 1, 1, 9999, 99, 50), // excluded everywhere
		mk(analysis.KindRepeat, 1, 4, 104, 1.55, 1, 2),
		mk(analysis.KindRepeat, 1, 1, 100, 1.0, 1),
		mk(analysis.KindRepeat, 1, 2, 103, 1.25, 1),
		mk(analysis.KindRepeat, 2, 1, 300, 5.0, 3),
		mk(analysis.KindRepeat, 3, 1, 100, 1.0, 2),
		mk(analysis.KindRepeat, 2, 2, 103, 1.25, 1),
		mk(analysis.KindRepeat, 2, 4, 104, 1.55, 1),
	}
	c := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{4, 1, 2}, runs)
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

	csvb, err := renderCSV(&c)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(csvb)), "\n")
	require.Len(t, lines, 4)
	assert.True(t, strings.HasPrefix(lines[0], "concurrency,repeats,"))
	assert.True(t, strings.HasSuffix(lines[2], ",true"), "level 2 is the candidate: %s", lines[2])
	md := Markdown(&c)
	assert.Contains(t, md, "| 1 | 3 | 3 | 0 |")
	assert.Contains(t, md, "| 100.000 | 100.0–300.0 | 1.000 | 1.000–5.000 |", "the repeats' spread beside the medians")
	assert.Contains(t, md, "not proof that the device itself is saturated")
	assert.Contains(t, md, "\n## Saturation\n\nCandidate saturation concurrency: **2**\n")
	// Level 1's repeats (100, 300, 100) are 200% of their median apart; the
	// others agree.
	assert.Contains(t, md, "**Warning: repeats disagree.**")
	assert.Contains(t, md, "than 10% of the median, while the rule above tests a 5% gain")
	assert.Contains(t, md, "- concurrency 1: 100.0–300.0 output tokens/s (200% of the median).\n\nThis plateau")
	png, svg, err := renderPlot(&c)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
	assert.Contains(t, string(svg), "<svg")

	// Missing values never crash the aggregate or the reports.
	empty := analysis.Aggregate(nil, nil, []int{1, 2}, nil)
	assert.Len(t, empty.ByConcurrency, 2)
	assert.Nil(t, empty.Saturation.Candidate)
	_, _, err = renderPlot(&empty)
	require.NoError(t, err)
	assert.Contains(t, Markdown(&empty), "n/a")
	assert.NotContains(t, Markdown(&empty), "repeats disagree")
}

// TestGoodputPerLevel: a level's goodput pools its repeats' records against
// the SLO they recorded; report.md and summary.csv show it; none meeting
// the SLO is a measured zero, never null.
func TestGoodputPerLevel(t *testing.T) {
	slo := &loadgen.SLO{LatencyS: 1.5}
	rec := func(lat float64, out int) loadgen.Record {
		return loadgen.Record{Status: 200, LatencyS: lat, OutputTokens: &out, ServerTokenUsagePresent: true}
	}
	run := func(idx, c int, recs ...loadgen.Record) analysis.RunData {
		return analysis.RunData{Spec: analysis.RunSpec{Kind: analysis.KindRepeat, Index: idx, Concurrency: c}, Records: recs,
			Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: 2}, Config: loadgen.SummaryConfig{SLO: slo}}}
	}
	c := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{1, 2}, []analysis.RunData{
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
	md := Markdown(&c)
	assert.Contains(t, md, "## Goodput")
	assert.Contains(t, md, "every objective (latency ≤ 1.5 s)")
	assert.Contains(t, md, "| 1 | 3 of 4 (75%) | 0.750 | 7.500 |")
	assert.Contains(t, md, "| 2 | 0 of 2 (0%) | 0.000 | 0.000 |")
	csvb, err := renderCSV(&c)
	require.NoError(t, err)
	assert.Contains(t, string(csvb), ",goodput_fraction,goodput_requests_per_s,saturation_candidate")
	assert.Contains(t, string(csvb), ",0.75,0.75,")

	without := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{1}, []analysis.RunData{{Spec: analysis.RunSpec{Kind: analysis.KindRepeat, Index: 1, Concurrency: 1}, Records: []loadgen.Record{rec(1, 1)}, Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: 1}}}})
	assert.Nil(t, without.ByConcurrency[0].Goodput)
	assert.NotContains(t, Markdown(&without), "Goodput")
}

// TestNoiseWarningThreshold: a level is named only when its fastest and
// slowest repeats are more than twice the gain threshold (10%) of the
// median apart: exactly 10% is what the rule can still resolve.
func TestNoiseWarningThreshold(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	level := func(c int, lo, med, hi float64) analysis.LevelAggregate {
		var a analysis.LevelAggregate
		a.Concurrency, a.Repeats = c, 3
		a.RepeatValues.OutputTokenThroughput = []*float64{f(lo), f(med), f(hi)}
		a.RepeatMedians.OutputTokenThroughput = f(med)
		return a
	}
	var b strings.Builder
	writeNoiseWarning(&b, []analysis.LevelAggregate{level(1, 95, 100, 105)}, analysis.DefaultThroughputGain)
	assert.Empty(t, b.String(), "10% apart")
	writeNoiseWarning(&b, []analysis.LevelAggregate{level(1, 95, 100, 105), level(2, 190, 200, 210.5)}, analysis.DefaultThroughputGain)
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

	run := func(idx, c int, recs []loadgen.Record, d float64) analysis.RunData {
		return analysis.RunData{Spec: analysis.RunSpec{Kind: analysis.KindRepeat, Index: idx, Concurrency: c}, Records: recs, Summary: loadgen.Summary{Figures: loadgen.Figures{DurationS: d}}}
	}
	held := []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1, &no, 200)} // 2 in flight over 1 s
	c := analysis.Aggregate(map[string]any{"name": "x", "num_requests": 2.0}, nil, []int{2, 4}, []analysis.RunData{
		run(1, 2, held, 1), run(2, 2, []loadgen.Record{rec(0, 1, &yes, 200), rec(0, 1, &yes, 200)}, 1),
		// Level 4: 2 in flight of 4 over 1 s, and 6 new connections.
		run(1, 4, []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1, &no, 200)}, 1),
		run(2, 4, []loadgen.Record{rec(0, 1, &no, 200), rec(0, 1, &no, 200), rec(0, 0, &no, 200), rec(0, 0, &no, 200)}, 1),
	})
	require.Len(t, c.ByConcurrency, 2)
	assert.InDelta(t, 2.0, *c.ByConcurrency[0].MeanInFlight, 1e-12)
	assert.InDelta(t, 2.0, *c.ByConcurrency[1].MeanInFlight, 1e-12, "4 s busy over 2 s")
	assert.Equal(t, 6, c.ByConcurrency[1].Counts.NewConnections)
	md := Markdown(&c)
	assert.Contains(t, md, "**Warning: concurrency not held.**")
	assert.Contains(t, md, "- concurrency 4: 2.0 in flight on average (50%).")
	assert.NotContains(t, md, "- concurrency 2: 2.0 in flight")
	assert.Contains(t, md, "(2 requests per run)")
	c.Config = map[string]any{"name": "x", "num_requests": json.Number("2")} // as a sweep resolves it
	assert.Contains(t, Markdown(&c), "(2 requests per run)")
	c.Config = map[string]any{"name": "x", "num_requests": 2.0}
	assert.Contains(t, md, "**Warning: connections reopened.**")
	assert.Contains(t, md, "- concurrency 4: 6 requests opened a connection over 2 repeats.")
	assert.NotContains(t, md, "- concurrency 2: 2 requests opened")

	held2 := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{2}, []analysis.RunData{run(1, 2, held, 1)})
	md = Markdown(&held2)
	assert.NotContains(t, md, "concurrency not held")
	assert.NotContains(t, md, "connections reopened")
	assert.NotContains(t, md, "held open")

	// Each session starts a new pool: two sessions may open 2c connections.
	bySession := func(idx, session, opened int) analysis.RunData {
		var recs []loadgen.Record
		for range opened {
			recs = append(recs, rec(0, 1, &no, 200))
		}
		r := run(idx, 2, recs, 1)
		r.Summary.Config.Session = session
		return r
	}
	two := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{2}, []analysis.RunData{bySession(1, 1, 2), bySession(2, 2, 2)})
	assert.Equal(t, 2, two.ByConcurrency[0].Sessions)
	assert.NotContains(t, Markdown(&two), "connections reopened")
	three := analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{2}, []analysis.RunData{bySession(1, 1, 2), bySession(2, 2, 3)})
	assert.Contains(t, Markdown(&three), "- concurrency 2: 5 requests opened a connection over 2 repeats.")

	lingering := rec(0, 1, &yes, 200)
	lingering.HeldOpenAfterDone = &yes
	c = analysis.Aggregate(map[string]any{"name": "x"}, nil, []int{1}, []analysis.RunData{run(1, 1, []loadgen.Record{lingering, rec(1, 2, &yes, 200)}, 2)})
	assert.Equal(t, 1, c.ByConcurrency[0].Counts.HeldOpen)
	md = Markdown(&c)
	assert.Contains(t, md, "**Warning: responses held open after [DONE].**")
	assert.Contains(t, md, "- concurrency 1: 1 of 2 responses.")
}
