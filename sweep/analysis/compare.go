package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// ErrNotSweepSummary marks a file that [ReadCombined] cannot compare: it is
// not a sweep's summary.json.
var ErrNotSweepSummary = errors.New("not a sweep summary.json")

// ReadCombined reads a sweep's summary.json; path may be the file or the
// sweep's folder. A JSON file without a config object or without any
// by_concurrency level is refused with [ErrNotSweepSummary]: comparing it
// would print blank names and n/a everywhere as if that were a result.
func ReadCombined(path string) (*Combined, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, files.SummaryFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Combined
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, ok := c.Config.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: %w: it has no config object", path, ErrNotSweepSummary)
	}
	if len(c.ByConcurrency) == 0 {
		return nil, fmt.Errorf("%s: %w: it has no by_concurrency levels", path, ErrNotSweepSummary)
	}
	if c.Workload == nil {
		c.Workload = manifestWorkload(filepath.Join(filepath.Dir(path), files.ManifestFile))
	}
	return &c, nil
}

// manifestWorkload is the workload the manifest at path records, or nil.
// serving-inference's summary.json does not name its prompt file, but the
// manifest beside it records its SHA-256, as tinyserve's does: without it,
// comparing such a sweep would say that the workloads could not be
// compared.
func manifestWorkload(path string) *Workload {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var m struct {
		Workload *Workload `json:"workload"`
	}
	if json.Unmarshal(b, &m) != nil || m.Workload == nil || m.Workload.SHA256 == "" {
		return nil
	}
	return m.Workload
}

// CompareMetric is one figure compared between two sweeps at one level.
type CompareMetric struct {
	Name string
	A, B *float64
	// Ratio is B / A; nil when either is missing or A is zero.
	Ratio *float64
}

// CompareRow is one concurrency level of a comparison. A level measured by
// only one sweep has nil figures on the other side.
type CompareRow struct {
	Concurrency int
	Metrics     []CompareMetric
}

// Comparison sets two sweeps side by side.
type Comparison struct {
	Rows                   []CompareRow
	CandidateA, CandidateB *int
	NameA, NameB           string
	// VersionsA and VersionsB are the server versions each sweep recorded
	// ([Combined.ServerVersions]).
	VersionsA, VersionsB []string
	// Warnings name every setting in which the sweeps differ in a way that
	// makes their ratios measure something other than the servers.
	Warnings []string
}

// comparedSettings are the resolved-config keys that must agree for two
// sweeps' figures to be comparable; the url and model are what a
// comparison is about, so they may differ.
// A different api (chat against completions) is one of them: a chat
// server wraps every prompt in its chat template, so the prefill is
// longer than the workload says.
var comparedSettings = []string{"api", "num_requests", "stream", "ignore_eos", "temperature", "extra_body"}

// setting is the JSON text of a resolved-config key, or "" when the config
// does not record it. serving-inference never sends ignore_eos and speaks
// only completions, so its configs, which lack the keys, mean false and
// "completions" (as do tinyserve's from before it recorded the api).
func setting(c *Combined, key string) string {
	m, _ := c.Config.(map[string]any)
	v, ok := m[key]
	switch {
	case !ok && key == "ignore_eos":
		v, ok = false, true
	case !ok && key == "api":
		v, ok = string(loadgen.APICompletions), true
	}
	if !ok {
		return ""
	}
	b, err := json.Marshal(v) // sorted keys, so equal objects compare equal
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// workloadSHA is the prompt file's SHA-256 a sweep recorded: summary.json's
// workload, else its runs' summaries; "" when neither says.
func workloadSHA(c *Combined) string {
	if c.Workload != nil && c.Workload.SHA256 != "" {
		return c.Workload.SHA256
	}
	for _, r := range c.MeasuredRuns {
		if r.Metrics.Config.WorkloadSHA256 != "" {
			return r.Metrics.Config.WorkloadSHA256
		}
	}
	return ""
}

// tokensPerRequest is the mean output tokens of the level's successful
// requests that reported usage; nil without any.
func tokensPerRequest(l *LevelAggregate) *float64 {
	n := l.Counts.Successful - l.Counts.WithoutUsage
	if n <= 0 {
		return nil
	}
	v := float64(l.Counts.OutputTokens) / float64(n)
	return &v
}

// comparability lists how a and b differ in what their figures depend on
// besides the server: the workload, the request settings and the output
// length actually produced.
func comparability(a, b *Combined, ia, ib map[int]*LevelAggregate, levels []int) []string {
	var w []string
	shaA, shaB := workloadSHA(a), workloadSHA(b)
	switch {
	case shaA != "" && shaB != "" && shaA != shaB:
		w = append(w, fmt.Sprintf("different workloads: prompt file SHA-256 A %s, B %s", shaA, shaB))
	case shaA == "" || shaB == "":
		w = append(w, "workload SHA-256 not recorded by both sweeps: the prompt files could not be compared")
	}
	show := func(s string) string {
		if s == "" {
			return "not recorded"
		}
		return s
	}
	for _, k := range comparedSettings {
		if x, y := setting(a, k), setting(b, k); x != y {
			w = append(w, fmt.Sprintf("different %s: A %s, B %s", k, show(x), show(y)))
		}
	}
	var diffs []string
	for _, l := range levels {
		if ia[l] == nil || ib[l] == nil {
			continue
		}
		x, y := tokensPerRequest(ia[l]), tokensPerRequest(ib[l])
		// 1% tolerates a request or two stopping early; beyond that,
		// tokens/s and latency compare answers of different lengths.
		if x != nil && y != nil && math.Abs(*x-*y) > 0.01*max(*x, *y) {
			diffs = append(diffs, fmt.Sprintf("concurrency %d: A %.4g, B %.4g", l, *x, *y))
		}
	}
	if len(diffs) > 0 {
		w = append(w, "different output tokens per request ("+strings.Join(diffs, "; ")+"): the servers produced answers of different lengths (ignore_eos?), so tokens/s and latency are not like for like")
	}
	return w
}

// Compare compares sweep b with sweep a level by level: median-of-repeats
// output-token and request throughput and p99 latency (the figures the
// saturation analysis uses) and pooled median TTFT and TPOT. Ratios are
// B / A, so above 1 means B is higher.
func Compare(a, b *Combined) Comparison {
	idx := func(c *Combined) map[int]*LevelAggregate {
		m := map[int]*LevelAggregate{}
		for i := range c.ByConcurrency {
			m[c.ByConcurrency[i].Concurrency] = &c.ByConcurrency[i]
		}
		return m
	}
	ia, ib := idx(a), idx(b)
	var levels []int
	for l := range ia {
		levels = append(levels, l)
	}
	for l := range ib {
		if _, ok := ia[l]; !ok {
			levels = append(levels, l)
		}
	}
	slices.Sort(levels)
	type getter func(*LevelAggregate) *float64
	metrics := []struct {
		name string
		get  getter
	}{
		{"output tok/s", func(l *LevelAggregate) *float64 { return l.RepeatMedians.OutputTokenThroughput }},
		{"req/s", func(l *LevelAggregate) *float64 { return l.RepeatMedians.RequestThroughput }},
		{"p99 latency s", func(l *LevelAggregate) *float64 { return l.RepeatMedians.LatencyP99S }},
		{"p50 TTFT s", func(l *LevelAggregate) *float64 { return l.TTFTS.P50 }},
		{"p50 TPOT s", func(l *LevelAggregate) *float64 { return l.TPOTS.P50 }},
	}
	cmp := Comparison{CandidateA: a.Saturation.Candidate, CandidateB: b.Saturation.Candidate, NameA: sweepName(a), NameB: sweepName(b),
		VersionsA: a.ServerVersions, VersionsB: b.ServerVersions,
		Warnings: comparability(a, b, ia, ib, levels)}
	for _, l := range levels {
		row := CompareRow{Concurrency: l}
		for _, m := range metrics {
			cm := CompareMetric{Name: m.name}
			if x := ia[l]; x != nil {
				cm.A = m.get(x)
			}
			if x := ib[l]; x != nil {
				cm.B = m.get(x)
			}
			if cm.A != nil && cm.B != nil && *cm.A != 0 {
				r := *cm.B / *cm.A
				cm.Ratio = &r
			}
			row.Metrics = append(row.Metrics, cm)
		}
		cmp.Rows = append(cmp.Rows, row)
	}
	return cmp
}

func sweepName(c *Combined) string {
	if m, ok := c.Config.(map[string]any); ok {
		if n, ok := m["name"].(string); ok {
			return n
		}
	}
	return ""
}
