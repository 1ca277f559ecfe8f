package sweep

// The sweeper: one invocation's runs, each measured into its evidence files.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

// sweeper holds what every run of one invocation shares.
type sweeper struct {
	cfg         *Config
	root        string
	rows        []loadgen.Row
	workloadSHA string // of the prompt file rows came from
	timeout     time.Duration
	opts        SweepOptions
	client      *http.Client
	base        string
	now         func() time.Time
	// session numbers this invocation among the sweep's (the manifest's
	// experiment.sessions), recorded in each run's summary.
	session int
}

// modelsEvidence is models.json: the server's /v1/models answer, kept once.
type modelsEvidence struct {
	URL       string          `json:"url"`
	Time      string          `json:"time"`
	Available bool            `json:"available"`
	Error     string          `json:"error,omitempty"`
	Response  json.RawMessage `json:"response,omitempty"`
}

// saveModels asks the server for /v1/models and returns the answer (nil on
// failure), keeping it beside the runs the first time a sweep in this
// folder reaches the server.
func (s *sweeper) saveModels(ctx context.Context) []byte {
	ev := modelsEvidence{URL: s.base + "/v1/models"}
	b, err := loadgen.GetText(ctx, s.client, ev.URL, s.opts.APIKey, 1<<20)
	path := filepath.Join(s.root, files.ModelsFile)
	if ok, _ := files.Exists(path); ok {
		return b
	}
	ev.Time = s.now().UTC().Format(time.RFC3339Nano)
	switch {
	case err != nil:
		ev.Error = err.Error()
	case !json.Valid(b):
		ev.Error = "response is not JSON"
	default:
		ev.Available, ev.Response = true, b
	}
	if out, err := files.MarshalIndent(ev); err == nil {
		if err := files.WriteNew(path, out); err != nil {
			s.opts.Progress.logf("warning: could not keep %s: %v", path, err)
		}
	}
	return b
}

// measureAll measures the runs of order that are not complete yet, in
// order; res counts the runs kept and measured. A resumed sweep whose next
// run is a measured one would meet a server, connections and caches cold
// from the break: it warms them first, as the warm-up rounds did, with one
// run kept apart from the rounds (resume-warmup-NN, NN the session).
func (s *sweeper) measureAll(ctx context.Context, order []analysis.RunSpec, complete []bool, res *SweepResult) error {
	resumeWarmup := -1
	if i := slices.Index(complete, false); i > 0 && order[i].Kind == analysis.KindRepeat && s.cfg.Warmups > 0 {
		resumeWarmup = i
	}
	progress := s.opts.Progress
	if resumeWarmup >= 0 {
		progress.begin(len(order) + 1)
	} else {
		progress.begin(len(order))
	}
	defer progress.finish()
	for i, spec := range order {
		if complete[i] {
			res.Kept++
			progress.skip(spec)
			continue
		}
		if i == resumeWarmup {
			if err := s.measure(ctx, analysis.RunSpec{Kind: analysis.KindResumeWarmup, Index: s.session, Concurrency: spec.Concurrency}); err != nil {
				return err
			}
		}
		if err := s.measure(ctx, spec); err != nil {
			return err
		}
		res.Measured++
	}
	return nil
}

// report aggregates the sweep's measured repeats, notes how the sessions
// that measured them differ (m's provenance), and writes the reports.
func (s *sweeper) report(m *Manifest, order []analysis.RunSpec) (*analysis.Combined, report.Paths, error) {
	runs, err := readRepeats(s.root, order)
	if err != nil {
		return nil, report.Paths{}, err
	}
	c := analysis.Aggregate(loadgen.Sanitize(s.cfg.resolvedView()), order, s.cfg.Concurrency, runs)
	c.Workload = &analysis.Workload{Path: s.cfg.Prompts, SHA256: s.workloadSHA}
	c.Checkpoint = m.Serving.Checkpoint
	var sessions []int
	for _, r := range runs {
		sessions = append(sessions, r.Summary.Session())
	}
	c.SessionChanges = m.sessionChanges(sessions)
	paths, err := report.Write(s.root, &c)
	return &c, paths, err
}

// loadOptions are the options of a run named name (for its request ids)
// at concurrency.
func (s *sweeper) loadOptions(name string, concurrency int) loadgen.LoadOptions {
	prefix := s.opts.RequestIDPrefix
	if prefix == "" {
		prefix = fmt.Sprintf("%s-%s-%d", s.cfg.Name, name, s.now().UnixNano())
	}
	lo := loadgen.LoadOptions{
		URL:             s.cfg.URL,
		Model:           s.cfg.Model,
		Concurrency:     concurrency,
		Temperature:     s.cfg.Temperature,
		Timeout:         s.timeout,
		Stream:          s.cfg.Stream,
		IgnoreEOS:       s.cfg.IgnoreEOS,
		StoreResponse:   s.cfg.StoreResponse,
		ExtraBody:       s.cfg.ExtraBody,
		APIKey:          s.opts.APIKey,
		RequestIDPrefix: prefix,
		WorkloadSHA256:  s.workloadSHA,
		Client:          s.client,
	}
	if s.cfg.SLO != nil {
		lo.SLO = *s.cfg.SLO
	}
	return lo
}

// testRequest sends the first prompt row once before anything is measured,
// as vLLM's benchmark does: a request the server refuses (a wrong model
// name or API key, a field or a row it rejects) would fail every request of
// the first run, which would then be kept as evidence and block the
// folder. Its answer is not kept.
func (s *sweeper) testRequest(ctx context.Context) error {
	_, recs, err := loadgen.RunCondition(ctx, s.loadOptions("test", 1), s.rows[:1], io.Discard)
	if err != nil {
		return err
	}
	if reason := loadgen.FirstFailure(recs); reason != "" {
		return fmt.Errorf("%w: the test request before the first run failed (%s); nothing was measured: fix the config or the server and run the same command again", ErrTestFailed, reason)
	}
	return nil
}

// measure makes one run: records go to a uniquely named partial file that
// becomes the run's JSONL only once every request finished, published
// with its summary by [publishRun]. An interrupted run leaves only its
// partial file, which is kept as evidence and does not stop a resume.
func (s *sweeper) measure(ctx context.Context, spec analysis.RunSpec) error {
	dir := filepath.Join(s.root, spec.Dir())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	metricsPath := spec.MetricsPath(s.root)
	if ok, _ := files.Exists(metricsPath); ok {
		// Left by an attempt that died between writing metrics and the
		// run's files: move it aside rather than overwrite it.
		if err := os.Rename(metricsPath, metricsPath+".stale-"+strconv.FormatInt(s.now().UnixNano(), 10)); err != nil {
			return err
		}
	}
	raw := spec.RawPath(s.root)
	partial := raw + ".partial-" + strconv.FormatInt(s.now().UnixNano(), 10)
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	lo := s.loadOptions(spec.Dir()+"-"+spec.Stem(), spec.Concurrency)
	if s.opts.Progress != nil {
		lo.Progress = s.opts.Progress.request
	}
	s.opts.Progress.startRun(spec, len(s.rows))
	sum, recs, rm, err := loadgen.Measure(ctx, lo, s.rows, f, &loadgen.ServerMetrics{Interval: s.opts.MetricsInterval, Now: s.now})
	if err != nil {
		f.Close()
		return fmt.Errorf("run %s: %w (its records so far are kept in %s)", spec, err, partial)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if b, err := files.MarshalIndent(rm); err == nil {
		if err := files.WriteNew(metricsPath, b); err != nil {
			return err
		}
	}
	sum.Config.Session = s.session
	sb, err := files.MarshalIndent(sum)
	if err != nil {
		return err
	}
	if err := publishRun(partial, raw, spec.SummaryPath(s.root), sb); err != nil {
		return err
	}
	s.opts.Progress.endRun(sum)
	if sum.Counts.Failed > 0 {
		return fmt.Errorf("%w: run %s finished with %d of %d requests failed (the first: %s); its files are kept in %s as evidence and will not be overwritten: fix the cause, then use a new name or --output-root",
			ErrFailedRequests, spec, sum.Counts.Failed, sum.Counts.Attempted, loadgen.FirstFailure(recs), dir)
	}
	return nil
}
