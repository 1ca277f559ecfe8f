// Package report renders a sweep's analysis (an [analysis.Combined]) for
// people and spreadsheets: report.md, summary.csv, the PNG and SVG plot, and
// the lines cmd/sweep prints on a terminal (the saturation verdict and the
// comparison of two sweeps). [Write] writes the files beside the runs'.
//
// It imports the analysis and the load generator below it, never the runner
// (package [github.com/tinyserve/tinyserve/sweep]) above it.
package report
