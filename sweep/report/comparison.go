package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tinyserve/tinyserve/sweep/analysis"
)

// versionSuffix names the server versions a sweep measured, for the
// comparison's header; "" when the server did not say.
func versionSuffix(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return " (server " + strings.Join(vs, ", ") + ")"
}

// WriteComparison prints c as an aligned text table: for each
// metric the value in A, in B and the ratio B/A, after a warning line for
// each way the sweeps are not comparable.
func WriteComparison(w io.Writer, c analysis.Comparison) error {
	fmt.Fprintf(w, "A: %s%s\nB: %s%s\n\n", c.NameA, versionSuffix(c.VersionsA), c.NameB, versionSuffix(c.VersionsB))
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if len(c.Warnings) > 0 {
		fmt.Fprintln(w)
	}
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
