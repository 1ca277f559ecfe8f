package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

// ErrRefused marks a sweep that would overwrite or build on evidence it
// cannot trust; nothing was sent. The message names the file and says what
// to do.
var ErrRefused = errors.New("refusing to run")

// ErrTestFailed marks a sweep whose test request, sent before the first
// run, failed: nothing was measured or kept.
var ErrTestFailed = errors.New("test request failed")

// ErrFailedRequests marks a run that finished with failed requests. Its
// files are kept as evidence and the sweep stopped; cmd/sweep and
// cmd/sendrequests exit with status 2.
var ErrFailedRequests = errors.New("requests failed")

// SweepOptions configure [RunSweep] beyond the config file. The zero value
// measures the config's URL and writes under its output_dir.
type SweepOptions struct {
	// OutputRoot replaces the config's output_dir (cmd/sweep --output-root),
	// to measure afresh without touching an earlier sweep.
	OutputRoot string
	// URL replaces the config's url; cmd/sweep sets it for an embedded
	// target.
	URL string
	// Model is used when the config has no model (an embedded target).
	Model string
	// Target, when set, starts the server the first time the sweep needs
	// it (never when every run is already complete or the sweep refuses)
	// and says what it started: its completions URL and served model name
	// replace URL and Model. cmd/sweep uses it for an embedded target;
	// stopping the server after RunSweep returns is the caller's job.
	Target func(ctx context.Context) (TargetInfo, error)
	// APIKey is sent as a bearer token; never written anywhere.
	APIKey string
	// WorkDir resolves relative paths; empty means the working directory.
	WorkDir string
	// Client sends every request; nil means one sized for the largest level.
	Client *http.Client
	// Progress reports progress; nil reports nothing.
	Progress *Progress
	// Now is the wall clock for manifest and metrics timestamps; nil means
	// time.Now.
	Now func() time.Time
	// Environment and Git describe the machine and source for the manifest;
	// nil means collect them (running git, uname and nvidia-smi).
	Environment *Environment
	Git         *GitInfo
	// RequestIDPrefix starts each request's X-Request-Id; empty means one
	// per run made from the sweep name and the run.
	RequestIDPrefix string
	// MetricsInterval is how often /metrics is scraped while a run is in
	// flight; zero means every second, negative means only before and after.
	MetricsInterval time.Duration
}

// TargetInfo is what SweepOptions.Target started.
type TargetInfo struct {
	URL   string // the completions endpoint
	Model string // the served model's name
	// Checkpoint is the model's files, recorded in manifest.json; a sweep
	// resumed with other files refuses. Nil for a model made in memory.
	Checkpoint *analysis.Checkpoint
}

// SweepResult says what a sweep did and where its reports are.
type SweepResult struct {
	Root string
	// AlreadyComplete is true when every run was already complete and
	// nothing was sent or written; Combined is then read back from the
	// sweep's summary.json.
	AlreadyComplete bool
	// Measured and Kept count runs measured now and runs kept from an
	// earlier invocation.
	Measured, Kept int
	Reports        report.Paths
	Combined       *analysis.Combined
}

// RunSweep runs (or resumes) the sweep described by cfg. Runs already
// complete on disk are kept byte for byte and skipped; any other evidence
// already there stops it with [ErrRefused] before a request is sent. A
// server that gives no HTTP answer stops it with [loadgen.ErrUnreachable] before the
// first run, and a failed start (that, or an embedded target that does not
// start) takes back the config.json and empty folder it made. A run
// that finishes with failed requests stops it with [ErrFailedRequests]. When
// every run is complete it writes summary.json, report.md, summary.csv and
// the plots. While it works on the folder it holds [lockFile] there, and a
// sweep that finds that file refuses.
func RunSweep(ctx context.Context, cfg *Config, opts SweepOptions) (*SweepResult, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	wd, rc, timeout, err := resolveSweep(cfg, opts)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(rc.OutputDir, rc.Name)
	res := &SweepResult{Root: root}
	validate := func() error {
		probe := loadgen.LoadOptions{URL: rc.URL, Model: rc.Model, Concurrency: 1, ExtraBody: rc.ExtraBody}
		if err := probe.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		return nil
	}
	if opts.Target == nil {
		if err := validate(); err != nil {
			return nil, err
		}
	}
	rows, err := loadgen.ReadRows(rc.Prompts, rc.NumRequests)
	if err != nil {
		return nil, err
	}
	made, err := makeRoot(root)
	if err != nil {
		return nil, err
	}
	// A sweep that fails before its first run (the folder is someone
	// else's, the embedded target does not start, the server does not
	// answer) takes back what it made: left with only its config.json, the
	// folder would refuse the corrected config. The config goes while the
	// lock is held; the folders this sweep created, if they are empty,
	// after.
	abandon := false
	defer func() {
		if abandon {
			made.removeDirs()
		}
	}()
	// Everything from here on reads or writes the folder as one sweep's.
	release, err := lockRoot(root, now(), opts.Progress.logf)
	if err != nil {
		abandon = true
		return nil, err
	}
	defer func() {
		if err := release(); err != nil {
			opts.Progress.logf("warning: could not remove %s: %v", filepath.Join(root, lockFile), err)
		}
	}()
	defer func() {
		if abandon && made.config {
			_ = os.Remove(filepath.Join(root, files.ConfigFile))
		}
	}()
	made.config, err = claimRoot(root, cfg.Original())
	if err != nil {
		abandon = true
		return nil, err
	}
	// A sweep killed at any instant leaves its folder in a state that
	// this finishes or takes back (see publishRun).
	notes, err := recoverRuns(root)
	for _, n := range notes {
		opts.Progress.logf("recovered: %s", n)
	}
	if err != nil {
		return nil, err
	}
	workloadSHA, err := loadgen.FileSHA256(rc.Prompts)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	if err := checkWorkload(root, rc.Prompts, workloadSHA); err != nil {
		return nil, err
	}
	order := Order(rc.Seed, rc.Concurrency, rc.Warmups, rc.Repeats)
	complete, allDone, err := scanRuns(root, order, rc.NumRequests, workloadSHA)
	if err != nil {
		return nil, err
	}
	if err := checkResumeWarmups(root, rc.NumRequests, workloadSHA); err != nil {
		return nil, err
	}
	reports := report.PathsIn(root)
	if allDone && allExist(reports) {
		res.AlreadyComplete, res.Kept, res.Reports = true, len(order), reports
		// The verdict is repeated from the summary written then; one
		// that does not read leaves Combined nil (the files stay as they
		// are either way).
		res.Combined, _ = analysis.ReadCombined(reports.Summary)
		return res, nil
	}
	var checkpoint *analysis.Checkpoint
	if opts.Target != nil {
		ti, err := opts.Target(ctx)
		if err != nil {
			abandon = true
			return nil, err
		}
		if err := checkCheckpoint(root, ti.Checkpoint); err != nil {
			return nil, err
		}
		rc.URL, checkpoint = ti.URL, ti.Checkpoint
		if rc.Model == "" {
			rc.Model = ti.Model
		}
		if err := validate(); err != nil {
			abandon = true
			return nil, err
		}
	}

	client := opts.Client
	if client == nil {
		client = loadgen.NewHTTPClient(slices.Max(append([]int{1}, rc.Concurrency...)))
		defer client.CloseIdleConnections()
	}
	base, err := reach(ctx, client, rc.URL, opts.APIKey)
	if err != nil {
		abandon = errors.Is(err, loadgen.ErrUnreachable)
		return nil, err
	}

	s := &sweeper{cfg: rc, root: root, rows: rows, workloadSHA: workloadSHA, timeout: timeout, opts: opts, client: client, base: base, now: now}
	if !allDone {
		if err := s.testRequest(ctx); err != nil {
			abandon = true
			return nil, err
		}
	}

	m, err := startManifest(ctx, root, wd, cfg, rc, workloadSHA, checkpoint, opts, now)
	if err != nil {
		return nil, err
	}
	s.session = m.Experiment.Sessions
	if ids := loadgen.ServedModelIDs(s.saveModels(ctx)); len(ids) > 0 && !slices.Contains(ids, rc.Model) {
		// A warning, not an error: some servers (llama.cpp's) answer any
		// model name. Where the name matters, every request fails with 404
		// and the run stops with its evidence kept.
		opts.Progress.logf("warning: %s lists the models %q; the configured model %q is not among them", s.base+"/v1/models", ids, rc.Model)
	}

	err = s.measureAll(ctx, order, complete, res)
	if err == nil {
		res.Combined, res.Reports, err = s.report(m, order)
	}
	// serving-inference's manifest schema knows running, completed and
	// failed; an interrupted sweep is a failed one until resumed.
	status := "completed"
	if err != nil {
		status = "failed"
	}
	t := now().UTC().Format(time.RFC3339Nano)
	m.Experiment.Status, m.Experiment.CompletedAtUTC = status, &t
	if merr := writeManifest(root, m); merr != nil {
		err = errors.Join(err, merr)
	}
	return res, err
}

// resolveSweep is cfg as this sweep runs it: paths resolved against the
// working folder (opts.WorkDir, else the process's), opts' URL, model and
// output root applied, and the per-request timeout checked.
func resolveSweep(cfg *Config, opts SweepOptions) (wd string, rc *Config, timeout time.Duration, err error) {
	wd = opts.WorkDir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return "", nil, 0, err
		}
	}
	rc = cfg.resolve(wd)
	// Checked here as well as in parseConfig, for a Config built in code.
	if timeout, err = loadgen.TimeoutDuration(rc.Timeout); err != nil {
		return "", nil, 0, fmt.Errorf("%w: timeout: %v", ErrConfig, err)
	}
	if opts.URL != "" {
		rc.URL = opts.URL
	}
	if rc.Model == "" {
		rc.Model = opts.Model
	}
	if opts.OutputRoot != "" {
		outDir := opts.OutputRoot
		if !filepath.IsAbs(outDir) {
			outDir = filepath.Join(wd, outDir)
		}
		rc.OutputDir = outDir // the resolved config records where the files went
	}
	return wd, rc, timeout, nil
}

// reach returns the server's base URL of endpoint once the server answers.
// A server that is not there would fail every request of the first run,
// and that run would be kept as evidence, blocking the folder: so it is
// checked first, as vLLM's benchmark sends one test prompt before
// measuring (an error wrapping loadgen.ErrUnreachable).
func reach(ctx context.Context, client *http.Client, endpoint, apiKey string) (string, error) {
	base, err := loadgen.ServerBase(endpoint)
	if err != nil {
		return "", err
	}
	if err := loadgen.CheckReachable(ctx, client, base, apiKey); err != nil {
		return "", fmt.Errorf("%w: start the server (the config records its flags) and run the sweep again", err)
	}
	return base, nil
}

// readRepeats reads the evidence of the measured (not warmup) runs in
// order, for the analysis.
func readRepeats(root string, order []analysis.RunSpec) ([]analysis.RunData, error) {
	var runs []analysis.RunData
	for _, spec := range order {
		if spec.Kind != analysis.KindRepeat {
			continue
		}
		rd := analysis.RunData{Spec: spec, RawPath: spec.RawPath(root), SummaryPath: spec.SummaryPath(root)}
		var err error
		if rd.Records, err = loadgen.ReadRecords(rd.RawPath); err != nil {
			return nil, err
		}
		sum, err := loadgen.ReadSummary(rd.SummaryPath)
		if err != nil {
			return nil, err
		}
		rd.Summary = *sum
		rd.Server = readRunMetrics(spec.MetricsPath(root))
		runs = append(runs, rd)
	}
	return runs, nil
}

// readRunMetrics reads a run's .metrics.json; nil when it is missing or
// unreadable (a run measured before it was kept, a server without
// /metrics): the metrics explain a run, they never decide whether it counts.
func readRunMetrics(path string) *loadgen.RunMetrics {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var rm loadgen.RunMetrics
	if json.Unmarshal(b, &rm) != nil {
		return nil
	}
	return &rm
}

// allExist reports whether every report is there: a sweep whose runs are
// complete says so and stops only then, since it names each of them; one
// that is missing (removed by hand, or lost to a crash while reports were
// written) is written again from the runs' files.
func allExist(p report.Paths) bool {
	for _, f := range []string{p.Summary, p.Report, p.CSV, p.PNG, p.SVG} {
		if ok, _ := files.Exists(f); !ok {
			return false
		}
	}
	return true
}
