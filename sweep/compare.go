package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
)

// ReadCombined reads a sweep's summary.json; path may be the file or the
// sweep's folder.
func ReadCombined(path string) (*Combined, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, SummaryFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Combined
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
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
	cmp := Comparison{CandidateA: a.Saturation.Candidate, CandidateB: b.Saturation.Candidate, NameA: sweepName(a), NameB: sweepName(b)}
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

// WriteTable prints the comparison as an aligned text table: for each
// metric the value in A, in B and the ratio B/A.
func (c Comparison) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "A: %s\nB: %s\n\n", c.NameA, c.NameB)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(c.Rows) > 0 {
		fmt.Fprint(tw, "concurrency\t")
		for _, m := range c.Rows[0].Metrics {
			fmt.Fprintf(tw, "A %s\tB %s\tB/A\t", m.Name, m.Name)
		}
		fmt.Fprintln(tw)
	}
	for _, r := range c.Rows {
		fmt.Fprintf(tw, "%d\t", r.Concurrency)
		for _, m := range r.Metrics {
			fmt.Fprintf(tw, "%s\t%s\t%s\t", fmtNum(m.A, "%.4g"), fmtNum(m.B, "%.4g"), fmtNum(m.Ratio, "%.3fx"))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	cand := func(p *int) string {
		if p == nil {
			return "not demonstrated"
		}
		return fmt.Sprint(*p)
	}
	_, err := fmt.Fprintf(w, "\nsaturation candidate: A %s, B %s\n", cand(c.CandidateA), cand(c.CandidateB))
	return err
}
