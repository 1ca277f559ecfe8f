package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// ErrRefused marks a sweep that would overwrite or build on evidence it
// cannot trust; nothing was sent. The message names the file and says what
// to do.
var ErrRefused = errors.New("refusing to run")

// ErrUnreachable marks a sweep whose server did not answer HTTP at all
// (connection refused, no route, a timeout) before the first run; nothing
// was sent or kept.
var ErrUnreachable = errors.New("server not reachable")

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
	// and returns its completions URL and served model name, which replace
	// URL and Model. cmd/sweep uses it for an embedded target; stopping the
	// server after RunSweep returns is the caller's job.
	Target func(ctx context.Context) (url, model string, err error)
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

// SweepResult says what a sweep did and where its reports are.
type SweepResult struct {
	Root string
	// AlreadyComplete is true when every run was already complete and
	// nothing was sent or written.
	AlreadyComplete bool
	// Measured and Kept count runs measured now and runs kept from an
	// earlier invocation.
	Measured, Kept int
	Reports        ReportPaths
	Combined       *Combined
}

// RunSweep runs (or resumes) the sweep described by cfg. Runs already
// complete on disk are kept byte for byte and skipped; any other evidence
// already there stops it with [ErrRefused] before a request is sent. A
// server that gives no HTTP answer stops it with [ErrUnreachable] before the
// first run, and a failed start (that, or an embedded target that does not
// start) takes back the config.json and empty folder it made. A run
// that finishes with failed requests stops it with [ErrFailedRequests]. When
// every run is complete it writes summary.json, report.md, summary.csv and
// the plots. While it works on the folder it holds [LockFile] there, and a
// sweep that finds that file refuses.
func RunSweep(ctx context.Context, cfg *Config, opts SweepOptions) (*SweepResult, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	wd := opts.WorkDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	rc := cfg.Resolve(wd)
	// Checked here as well as in ParseConfig, for a Config built in code.
	timeout, err := TimeoutDuration(rc.Timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: timeout: %v", ErrConfig, err)
	}
	if opts.URL != "" {
		rc.URL = opts.URL
	}
	if rc.Model == "" {
		rc.Model = opts.Model
	}
	outDir := rc.OutputDir
	if opts.OutputRoot != "" {
		outDir = opts.OutputRoot
		if !filepath.IsAbs(outDir) {
			outDir = filepath.Join(wd, outDir)
		}
		rc.OutputDir = outDir // the resolved config records where the files went
	}
	root := filepath.Join(outDir, rc.Name)
	res := &SweepResult{Root: root}
	validate := func() error {
		probe := LoadOptions{URL: rc.URL, Model: rc.Model, Concurrency: 1, ExtraBody: rc.ExtraBody}
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
	rows, err := ReadRows(rc.Prompts, rc.NumRequests)
	if err != nil {
		return nil, err
	}
	made, err := prepareRoot(root, cfg.Original())
	if err != nil {
		return nil, err
	}
	// A sweep that fails before its first run (the embedded target does not
	// start, the server does not answer) takes back what it made: left with
	// only its config.json, the folder would refuse the corrected config.
	// The config goes while the lock is held; the folders this sweep
	// created, if they are empty, after.
	abandon := false
	defer func() {
		if abandon {
			made.removeDirs()
		}
	}()
	// Everything from here on reads or writes the folder as one sweep's.
	release, err := lockRoot(root, now())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := release(); err != nil {
			opts.Progress.Logf("warning: could not remove %s: %v", filepath.Join(root, LockFile), err)
		}
	}()
	defer func() {
		if abandon && made.config {
			_ = os.Remove(filepath.Join(root, ConfigFile))
		}
	}()
	// Check again under the lock: a sweep that abandoned the folder between
	// prepareRoot and lockRoot may have taken away the config seen there.
	wrote, err := ensureConfig(root, cfg.Original())
	if err != nil {
		return nil, err
	}
	made.config = made.config || wrote
	workloadSHA, err := FileSHA256(rc.Prompts)
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
	reports := ReportPaths{
		Summary: filepath.Join(root, SummaryFile), Report: filepath.Join(root, ReportFile),
		CSV: filepath.Join(root, CSVFile), PNG: filepath.Join(root, PlotPNGFile), SVG: filepath.Join(root, PlotSVGFile),
	}
	if ok, _ := exists(reports.Summary); allDone && ok {
		res.AlreadyComplete, res.Kept, res.Reports = true, len(order), reports
		return res, nil
	}
	if opts.Target != nil {
		url, model, err := opts.Target(ctx)
		if err != nil {
			abandon = true
			return nil, err
		}
		rc.URL = url
		if rc.Model == "" {
			rc.Model = model
		}
		if err := validate(); err != nil {
			abandon = true
			return nil, err
		}
	}

	client := opts.Client
	if client == nil {
		top := 1
		for _, c := range rc.Concurrency {
			top = max(top, c)
		}
		client = NewHTTPClient(top)
		defer client.CloseIdleConnections()
	}
	base, err := ServerBase(rc.URL)
	if err != nil {
		return nil, err
	}
	// A server that is not there would fail every request of the first run,
	// and that run would be kept as evidence, blocking the folder: check
	// first, as vLLM's benchmark sends one test prompt before measuring.
	if err := CheckReachable(ctx, client, base, opts.APIKey); err != nil {
		abandon = true
		return nil, err
	}

	s := &sweeper{cfg: rc, root: root, rows: rows, workloadSHA: workloadSHA, timeout: timeout, opts: opts, client: client, base: base, now: now}
	if !allDone {
		if err := s.testRequest(ctx); err != nil {
			abandon = true
			return nil, err
		}
	}

	m, err := startManifest(ctx, root, wd, cfg, rc, workloadSHA, opts, now)
	if err != nil {
		return nil, err
	}
	s.session = m.Experiment.Sessions
	finish := func(status string) error {
		t := now().UTC().Format(time.RFC3339Nano)
		m.Experiment.Status, m.Experiment.CompletedAtUTC = status, &t
		return writeManifest(root, m)
	}
	if ids := servedModels(s.saveModels(ctx)); len(ids) > 0 && !slices.Contains(ids, rc.Model) {
		// A warning, not an error: some servers (llama.cpp's) answer any
		// model name. Where the name matters, every request fails with 404
		// and the run stops with its evidence kept.
		opts.Progress.Logf("warning: %s lists the models %q; the configured model %q is not among them", s.base+"/v1/models", ids, rc.Model)
	}

	// A resumed sweep whose next run is a measured one would meet a server,
	// connections and caches cold from the break: it warms them first, as
	// the warm-up rounds did, with one run kept apart from the rounds.
	resumeWarmup := -1
	if i := slices.Index(complete, false); i > 0 && order[i].Kind == KindRepeat && rc.Warmups > 0 {
		resumeWarmup = i
	}
	if resumeWarmup >= 0 {
		opts.Progress.Begin(len(order) + 1)
	} else {
		opts.Progress.Begin(len(order))
	}
	for i, spec := range order {
		if complete[i] {
			res.Kept++
			opts.Progress.Skip(spec)
			continue
		}
		if i == resumeWarmup {
			extra := RunSpec{Kind: KindResumeWarmup, Index: m.Experiment.Sessions, Concurrency: spec.Concurrency}
			if err := s.measure(ctx, extra); err != nil {
				opts.Progress.Finish()
				if merr := finish("failed"); merr != nil {
					err = errors.Join(err, merr)
				}
				return res, err
			}
		}
		if err := s.measure(ctx, spec); err != nil {
			opts.Progress.Finish()
			// serving-inference's manifest schema knows running, completed
			// and failed; an interrupted sweep is a failed one until resumed.
			if merr := finish("failed"); merr != nil {
				err = errors.Join(err, merr)
			}
			return res, err
		}
		res.Measured++
	}
	opts.Progress.Finish()

	failed := func(err error) (*SweepResult, error) {
		if merr := finish("failed"); merr != nil {
			err = errors.Join(err, merr)
		}
		return res, err
	}
	runs, err := readRepeats(root, order)
	if err != nil {
		return failed(err)
	}
	combined := Aggregate(Sanitize(rc.resolvedView()), order, rc.Concurrency, runs)
	combined.Workload = &ManifestWorkload{Path: rc.Prompts, SHA256: workloadSHA}
	var sessions []int
	for _, r := range runs {
		sessions = append(sessions, r.Summary.Config.Session)
	}
	combined.SessionChanges = m.sessionChanges(sessions)
	res.Combined = &combined
	if res.Reports, err = WriteReports(root, &combined); err != nil {
		return failed(err)
	}
	return res, finish("completed")
}

// readRepeats reads the evidence of the measured (not warmup) runs in
// order, for the analysis.
func readRepeats(root string, order []RunSpec) ([]RunData, error) {
	var runs []RunData
	for _, spec := range order {
		if spec.Kind != KindRepeat {
			continue
		}
		rd := RunData{Spec: spec, RawPath: spec.RawPath(root), SummaryPath: spec.SummaryPath(root)}
		var err error
		if rd.Records, err = ReadRecords(rd.RawPath); err != nil {
			return nil, err
		}
		sum, err := ReadSummary(rd.SummaryPath)
		if err != nil {
			return nil, err
		}
		rd.Summary = *sum
		rd.Server = readRunMetrics(spec.MetricsPath(root))
		runs = append(runs, rd)
	}
	return runs, nil
}

// sweeper holds what every run of one invocation shares.
type sweeper struct {
	cfg         *Config
	root        string
	rows        []Row
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

// reachTimeout bounds CheckReachable's request.
const reachTimeout = 30 * time.Second

// CheckReachable sends one GET to base/v1/models. Any HTTP answer, an error
// status included (a server without the route, a wrong key), shows the
// server is up; only a failure to get an answer is an error, wrapping
// [ErrUnreachable].
func CheckReachable(ctx context.Context, client *http.Client, base, apiKey string) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s did not answer (%v); nothing was measured: start the server (the config records its flags) and run the sweep again", ErrUnreachable, base, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Body.Close()
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
	b, err := getText(ctx, s.client, ev.URL, s.opts.APIKey, 1<<20)
	path := filepath.Join(s.root, ModelsFile)
	if ok, _ := exists(path); ok {
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
	if out, err := marshalIndent(ev); err == nil {
		if err := writeNewFileAtomic(path, out); err != nil {
			s.opts.Progress.Logf("warning: could not keep %s: %v", path, err)
		}
	}
	return b
}

// servedModels returns the model ids of a /v1/models answer, or nil when b
// is not one.
func servedModels(b []byte) []string {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &list) != nil {
		return nil
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// loadOptions are the options of a run named name (for its request ids)
// at concurrency.
func (s *sweeper) loadOptions(name string, concurrency int) LoadOptions {
	prefix := s.opts.RequestIDPrefix
	if prefix == "" {
		prefix = fmt.Sprintf("%s-%s-%d", s.cfg.Name, name, s.now().UnixNano())
	}
	lo := LoadOptions{
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
	_, recs, err := RunCondition(ctx, s.loadOptions("test", 1), s.rows[:1], io.Discard)
	if err != nil {
		return err
	}
	if reason := FirstFailure(recs); reason != "" {
		return fmt.Errorf("%w: the test request before the first run failed (%s); nothing was measured: fix the config or the server and run the same command again", ErrTestFailed, reason)
	}
	return nil
}

// measure makes one run: records go to a uniquely named partial file that
// becomes the run's JSONL only once every request finished; the summary is
// written after it. An interrupted run leaves only its partial file, which
// is kept as evidence and does not stop a resume.
func (s *sweeper) measure(ctx context.Context, spec RunSpec) error {
	dir := filepath.Join(s.root, spec.Dir())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	metricsPath := spec.MetricsPath(s.root)
	if ok, _ := exists(metricsPath); ok {
		// Left by an attempt that died between writing metrics and the
		// run's files: move it aside rather than overwrite it.
		if err := os.Rename(metricsPath, metricsPath+".stale-"+strconv.FormatInt(s.now().UnixNano(), 10)); err != nil {
			return err
		}
	}
	rm := RunMetrics{URL: s.base + "/metrics"}
	rm.Before = ScrapeMetrics(ctx, s.client, s.base, s.opts.APIKey, s.now)

	raw := spec.RawPath(s.root)
	partial := raw + ".partial-" + strconv.FormatInt(s.now().UnixNano(), 10)
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	lo := s.loadOptions(spec.Dir()+"-"+spec.Stem(), spec.Concurrency)
	lo.ServerVersion = ServerVersion(ctx, s.client, s.base, s.opts.APIKey) // asked before each run: a server may be restarted between runs
	if s.opts.Progress != nil {
		lo.Progress = s.opts.Progress.Request
	}
	s.opts.Progress.StartRun(spec, len(s.rows))
	interval := s.opts.MetricsInterval
	if interval == 0 {
		interval = time.Second
	}
	type watched struct {
		max map[string]float64
		n   int
	}
	watchDone := make(chan watched, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	if interval > 0 && rm.Before.Available {
		go func() {
			m, n := watchMetrics(wctx, s.client, s.base, s.opts.APIKey, interval, s.now)
			watchDone <- watched{m, n}
		}()
	} else {
		watchDone <- watched{}
	}
	sum, recs, err := RunCondition(ctx, lo, s.rows, f)
	stopWatch()
	w := <-watchDone
	rm.DuringMax, rm.DuringSamples = w.max, w.n
	if len(rm.DuringMax) == 0 {
		rm.DuringMax = nil
	}
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
	rm.After = ScrapeMetrics(ctx, s.client, s.base, s.opts.APIKey, s.now)
	if b, err := marshalIndent(rm); err == nil {
		if err := writeNewFileAtomic(metricsPath, b); err != nil {
			return err
		}
	}
	if err := publishNew(partial, raw); err != nil {
		return err
	}
	sum.Config.Session = s.session
	sb, err := marshalIndent(sum)
	if err != nil {
		return err
	}
	if err := writeNewFileAtomic(spec.SummaryPath(s.root), sb); err != nil {
		return err
	}
	s.opts.Progress.EndRun(sum)
	if sum.Counts.Failed > 0 {
		return fmt.Errorf("%w: run %s finished with %d of %d requests failed (the first: %s); its files are kept in %s as evidence and will not be overwritten: fix the cause, then use a new name or --output-root",
			ErrFailedRequests, spec, sum.Counts.Failed, sum.Counts.Attempted, FirstFailure(recs), dir)
	}
	return nil
}
