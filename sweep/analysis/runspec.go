package analysis

import (
	"fmt"
	"path/filepath"
)

// Run kinds.
const (
	KindWarmup = "warmup"
	KindRepeat = "repeat"
	// KindResumeWarmup is the warm-up run a resumed sweep makes before its
	// first measured run, numbered by the session (resume-warmup-02): like
	// a warm-up, it is evidence on disk and never part of an aggregate.
	KindResumeWarmup = "resume-warmup"
)

// RunSpec names one run of a sweep: a round (warmup or measured repeat, both
// numbered from 1) at one concurrency level.
type RunSpec struct {
	Kind        string `json:"kind"`
	Index       int    `json:"index"`
	Concurrency int    `json:"concurrency"`
}

// Dir is the run's folder relative to the sweep root, e.g. repeat-01.
func (r RunSpec) Dir() string { return fmt.Sprintf("%s-%02d", r.Kind, r.Index) }

// Stem is the run's file name stem, e.g. concurrency-004.
func (r RunSpec) Stem() string { return fmt.Sprintf("concurrency-%03d", r.Concurrency) }

// RawPath is the run's JSONL path under root.
func (r RunSpec) RawPath(root string) string {
	return filepath.Join(root, r.Dir(), r.Stem()+".jsonl")
}

// SummaryPath is the run's summary path under root.
func (r RunSpec) SummaryPath(root string) string {
	return filepath.Join(root, r.Dir(), r.Stem()+".summary.json")
}

// MetricsPath is where the server metrics scraped around the run are kept.
func (r RunSpec) MetricsPath(root string) string {
	return filepath.Join(root, r.Dir(), r.Stem()+".metrics.json")
}

// String names the run as its folder and stem, for messages.
func (r RunSpec) String() string { return r.Dir() + "/" + r.Stem() }
