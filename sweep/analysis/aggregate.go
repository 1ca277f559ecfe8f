package analysis

import (
	"slices"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// RunData is one finished run as the analysis sees it: its spec, where its
// files are, and their contents.
type RunData struct {
	Spec        RunSpec
	RawPath     string
	SummaryPath string
	Records     []loadgen.Record
	Summary     loadgen.Summary
	// Server is the server's metrics around the run (its .metrics.json);
	// nil when there is none.
	Server *loadgen.RunMetrics
}

// MeasuredRun is an entry of summary.json's measured_runs.
type MeasuredRun struct {
	RunSpec
	Raw     string          `json:"raw"`
	Summary string          `json:"summary"`
	Metrics loadgen.Summary `json:"metrics"`
}

// RepeatMedians are medians over a level's measured repeats: what the
// saturation analysis compares, because a median of repeats is robust to one
// noisy run in a way a pooled figure is not.
type RepeatMedians struct {
	RequestThroughput     *float64 `json:"request_throughput_per_s"`
	OutputTokenThroughput *float64 `json:"output_token_throughput_per_s"`
	LatencyP99S           *float64 `json:"latency_p99_s"`
}

// RepeatValues are the per-repeat figures behind RepeatMedians, in repeat
// order, for plots and for readers who want the spread. Nil entries are runs
// without the figure.
type RepeatValues struct {
	RequestThroughput     []*float64 `json:"request_throughput_per_s"`
	OutputTokenThroughput []*float64 `json:"output_token_throughput_per_s"`
	LatencyP99S           []*float64 `json:"latency_p99_s"`
}

// LevelAggregate is an entry of summary.json's by_concurrency: pooled
// metrics over every measured repeat at one level (warmups excluded), and
// the repeat medians. Keys are serving-inference's, plus inter-chunk gaps,
// client queueing and the per-repeat values.
type LevelAggregate struct {
	Concurrency int `json:"concurrency"`
	Repeats     int `json:"repeats"`
	// Sessions counts the sweep invocations that measured the repeats
	// (their summaries' config.session), when more than one did: each
	// starts with a new connection pool.
	Sessions int `json:"sessions,omitempty"`
	// Figures pool the repeats' records over the sum of their durations;
	// goodput is against the SLO the runs recorded.
	loadgen.Figures
	RepeatMedians RepeatMedians `json:"repeat_medians"`
	RepeatValues  RepeatValues  `json:"repeat_values"`
	// PrefixCacheHitRate is the share of the prompt tokens the server looked
	// up in its prefix cache during the level's repeats that it found there
	// (vllm:prefix_cache_hits_total over _queries_total, each the change
	// across a run); nil when the server does not report them or looked
	// nothing up.
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	// ServerPhases are the server's mean queue, prefill and decode times
	// per request over the level's repeats, from its phase histograms;
	// nil when the server does not report them.
	ServerPhases *ServerPhases `json:"server_phases,omitempty"`
}

// ServerPhases are mean times per request as the server measured them
// (vLLM's vllm:request_{queue,prefill,decode}_time_seconds: queue is
// arrival to first scheduled, prefill first scheduled to first token,
// decode first to last token). Beside the client's TTFT and latency they
// show where the time went: waiting for a batch slot, computing the
// prompt, or generating. A phase the server does not report is nil.
type ServerPhases struct {
	QueueS   *float64 `json:"queue_s"`
	PrefillS *float64 `json:"prefill_s"`
	DecodeS  *float64 `json:"decode_s"`
}

// Combined is summary.json: the resolved config, the order the runs were
// made in, every measured run with its summary, the per-level aggregates
// in ascending concurrency, and the saturation analysis.
type Combined struct {
	Config any `json:"config"`
	// Workload is the prompt file the runs sent, by path and SHA-256, so
	// that a comparison can tell whether two sweeps measured the same
	// workload; nil in files written before it was recorded.
	Workload *Workload `json:"workload,omitempty"`
	// ServerVersions are the distinct versions the server reported
	// (GET /version) across the measured runs, in sweep order: one when
	// every run measured the same software, none when the server does not
	// say. More than one means a resumed sweep mixed server versions.
	ServerVersions []string `json:"server_versions,omitempty"`
	// Checkpoint is the model files an embedded target loaded, by content
	// (manifest.json's); nil for a remote server or a model made in memory.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// SessionChanges says how the invocations that measured the repeats
	// differ from the earliest of them in source revision, Go, OS, CPU or
	// GPUs (manifest.json's resumes, or tinyserve-sessions.json, describe them); empty when they do not,
	// or when one invocation measured them all.
	SessionChanges []string         `json:"session_changes,omitempty"`
	SweepOrder     []RunSpec        `json:"sweep_order"`
	MeasuredRuns   []MeasuredRun    `json:"measured_runs"`
	ByConcurrency  []LevelAggregate `json:"by_concurrency"`
	Saturation     SaturationResult `json:"saturation"`
}

// Aggregate combines the runs of a sweep. Warmup runs in runs are ignored:
// they are evidence on disk, never part of an aggregate. Levels are reported
// in ascending order (whatever order the config lists them in) because
// saturation is about adjacent levels. It is a pure function of its inputs.
func Aggregate(config any, order []RunSpec, levels []int, runs []RunData) Combined {
	c := Combined{Config: config, SweepOrder: order, MeasuredRuns: []MeasuredRun{}}
	byLevel := map[int][]*RunData{}
	for i := range runs {
		r := &runs[i]
		if r.Spec.Kind != KindRepeat {
			continue
		}
		c.MeasuredRuns = append(c.MeasuredRuns, MeasuredRun{RunSpec: r.Spec, Raw: r.RawPath, Summary: r.SummaryPath, Metrics: r.Summary})
		if v := r.Summary.Config.ServerVersion; v != "" && !slices.Contains(c.ServerVersions, v) {
			c.ServerVersions = append(c.ServerVersions, v)
		}
		byLevel[r.Spec.Concurrency] = append(byLevel[r.Spec.Concurrency], r)
	}
	var points []LevelPoint
	for _, level := range sortedLevels(levels) {
		rs := byLevel[level]
		var all []loadgen.Record
		var duration float64
		var rv RepeatValues
		for _, r := range rs {
			all = append(all, r.Records...)
			duration += r.Summary.DurationS
			rv.RequestThroughput = append(rv.RequestThroughput, r.Summary.RequestThroughput)
			tokps := r.Summary.OutputTokenThroughput
			if !loadgen.AnyUsage(r.Records) {
				// Summaries written before null was used say 0 here; the
				// records say there was no data.
				tokps = nil
			}
			rv.OutputTokenThroughput = append(rv.OutputTokenThroughput, tokps)
			rv.LatencyP99S = append(rv.LatencyP99S, r.Summary.LatencyS.P99)
		}
		a := LevelAggregate{
			Concurrency: level,
			Repeats:     len(rs),
			Sessions:    sessionCount(rs),
			Figures:     loadgen.FiguresOf(all, duration, levelSLO(rs)),
			RepeatMedians: RepeatMedians{
				RequestThroughput:     medianOf(rv.RequestThroughput),
				OutputTokenThroughput: medianOf(rv.OutputTokenThroughput),
				LatencyP99S:           medianOf(rv.LatencyP99S),
			},
			RepeatValues:       rv,
			PrefixCacheHitRate: prefixCacheHitRate(rs),
			ServerPhases:       serverPhases(rs),
		}
		c.ByConcurrency = append(c.ByConcurrency, a)
		points = append(points, LevelPoint{
			Concurrency:      level,
			OutputTokensPerS: a.RepeatMedians.OutputTokenThroughput,
			LatencyP99S:      a.RepeatMedians.LatencyP99S,
		})
	}
	c.Saturation = Saturation(points, DefaultThroughputGain, DefaultP99Rise)
	return c
}

// sessionCount is the number of sessions that measured runs, when more
// than one did; 0 otherwise.
func sessionCount(runs []*RunData) int {
	seen := map[int]bool{}
	for _, r := range runs {
		seen[r.Summary.Session()] = true
	}
	if len(seen) < 2 {
		return 0
	}
	return len(seen)
}

// levelSLO is the SLO a level's runs recorded, or nil.
func levelSLO(runs []*RunData) *loadgen.SLO {
	for _, r := range runs {
		if slo := r.Summary.Config.SLO; slo != nil && !slo.Empty() {
			return slo
		}
	}
	return nil
}

// counterDelta is the change of metric name across a run, when both
// scrapes have it and it did not go down (a server restarted mid-run
// resets its counters).
func counterDelta(r *RunData, name string) (float64, bool) {
	if r.Server == nil || !r.Server.Before.Available || !r.Server.After.Available {
		return 0, false
	}
	b, ok1 := r.Server.Before.Values[name]
	a, ok2 := r.Server.After.Values[name]
	if !ok1 || !ok2 || a < b {
		return 0, false
	}
	return a - b, true
}

// pooledRatio is the change of num over the change of den, each added up
// over the runs that have both; nil when den did not grow.
func pooledRatio(runs []*RunData, num, den string) *float64 {
	var n, d float64
	for _, r := range runs {
		dn, ok1 := counterDelta(r, num)
		dd, ok2 := counterDelta(r, den)
		if ok1 && ok2 {
			n, d = n+dn, d+dd
		}
	}
	if d <= 0 {
		return nil
	}
	v := n / d
	return &v
}

// serverPhases pools each phase histogram's sum and count over the runs,
// so a phase's mean weighs every request equally.
func serverPhases(runs []*RunData) *ServerPhases {
	mean := func(phase string) *float64 {
		name := "vllm:request_" + phase + "_time_seconds"
		return pooledRatio(runs, name+"_sum", name+"_count")
	}
	p := ServerPhases{QueueS: mean("queue"), PrefillS: mean("prefill"), DecodeS: mean("decode")}
	if p.QueueS == nil && p.PrefillS == nil && p.DecodeS == nil {
		return nil
	}
	return &p
}

// prefixCacheHitRate is the prefix cache's hits over its queries during
// the runs whose metrics were scraped before and after.
func prefixCacheHitRate(runs []*RunData) *float64 {
	return pooledRatio(runs, "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
}

// medianOf is the median of the non-nil values.
func medianOf(vs []*float64) *float64 {
	var clean []float64
	for _, v := range vs {
		if v != nil {
			clean = append(clean, *v)
		}
	}
	return loadgen.Median(clean)
}

// sortedLevels returns the distinct levels in ascending order.
func sortedLevels(levels []int) []int {
	s := slices.Clone(levels)
	slices.Sort(s)
	return slices.Compact(s)
}

// Workload identifies the prompt file a sweep sent by path and content,
// as manifest.json and summary.json record it.
type Workload struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}
