package report

import (
	"fmt"
	"path/filepath"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
)

// Paths are where a sweep's derived files are written.
type Paths struct {
	Summary, Report, CSV, PNG, SVG string
}

// PathsIn are the derived files' paths in the sweep folder root.
func PathsIn(root string) Paths {
	return Paths{
		Summary: filepath.Join(root, files.SummaryFile),
		Report:  filepath.Join(root, files.ReportFile),
		CSV:     filepath.Join(root, files.CSVFile),
		PNG:     filepath.Join(root, files.PlotPNGFile),
		SVG:     filepath.Join(root, files.PlotSVGFile),
	}
}

// Write writes summary.json, report.md, summary.csv, plot.png and
// plot.svg under root, each atomically. They are derived from the runs'
// files and so may be rewritten; the runs' files never are.
func Write(root string, c *analysis.Combined) (Paths, error) {
	p := PathsIn(root)
	js, err := files.MarshalIndent(c)
	if err != nil {
		return p, err
	}
	png, svg, err := renderPlot(c)
	if err != nil {
		return p, fmt.Errorf("plot: %w", err)
	}
	csvb, err := renderCSV(c)
	if err != nil {
		return p, err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{
		{p.Summary, js},
		{p.Report, []byte(Markdown(c))},
		{p.CSV, csvb},
		{p.PNG, png},
		{p.SVG, svg},
	} {
		if err := files.WriteAtomic(f.path, f.data); err != nil {
			return p, err
		}
	}
	return p, nil
}
