// Command sendrequests measures one condition against an OpenAI-compatible
// completions (or chat completions) endpoint: a closed loop at a fixed concurrency (or an open loop
// with seeded Poisson arrivals) over the first N rows of a prompt file. It
// writes one JSONL record per request as each finishes, and a summary JSON,
// in serving-inference's schema 1.0; it exits with status 2 when any request
// failed.
//
//	go run ./cmd/sendrequests --prompts prompts/latency_c1.jsonl \
//	    --url http://127.0.0.1:8000/v1/completions --model tiny-gpt2 \
//	    --num-requests 32 --concurrency 4 --output results/c4.jsonl
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// exitCoder carries the process status through cli's error return.
type exitCoder struct {
	error
	code int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr, os.Getenv).RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sendrequests:", err)
		var ec exitCoder
		if errors.As(err, &ec) {
			os.Exit(ec.code)
		}
		os.Exit(1)
	}
}

func env(name string) []string { return []string{"TINYSERVE_" + name} }

func newApp(stdout, stderr io.Writer, getenv func(string) string) *cli.App {
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "sendrequests",
		Usage:        "measure one load condition against an OpenAI-compatible completions or chat completions endpoint",
		Writer:       stdout,
		ErrWriter:    stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prompts", Required: true, EnvVars: env("PROMPTS"), Usage: "prompt file (JSONL rows: bucket, id, prompt, prompt_tokens, target_output_tokens, ...)"},
			&cli.StringFlag{Name: "output", Value: "results/run_001.jsonl", EnvVars: env("OUTPUT"), Usage: "per-request JSONL (refuses to overwrite an existing file)"},
			&cli.StringFlag{Name: "summary", EnvVars: env("SUMMARY"), Usage: "summary JSON (default: beside --output, NAME.summary.json)"},
			&cli.StringFlag{Name: "url", Value: "http://localhost:8000/v1/completions", EnvVars: env("URL"), Usage: "endpoint; a path ending in /chat/completions speaks the chat API, any other the completions API"},
			&cli.StringFlag{Name: "model", EnvVars: env("MODEL"), Usage: "model name to send (default: the first model the server's /v1/models lists)"},
			&cli.IntFlag{Name: "num-requests", Value: 10, EnvVars: env("NUM_REQUESTS"), Usage: "requests to send: the first N rows of --prompts"},
			&cli.IntFlag{Name: "concurrency", Value: 1, EnvVars: env("CONCURRENCY"), Usage: "requests in flight (with --request-rate: a cap, 0 or left out for none, as vllm bench serve's --max-concurrency)"},
			&cli.Float64Flag{Name: "request-rate", EnvVars: env("REQUEST_RATE"), Usage: "open loop: mean Poisson arrival rate in requests/s (0: closed loop)"},
			&cli.Int64Flag{Name: "seed", EnvVars: env("SEED"), Usage: "seed of the open-loop arrival times"},
			&cli.Float64Flag{Name: "temperature", EnvVars: env("TEMPERATURE"), Usage: "sampling temperature sent with every request"},
			&cli.Float64Flag{Name: "timeout", Value: 300, EnvVars: env("TIMEOUT"), Usage: "per-request timeout in seconds"},
			&cli.BoolFlag{Name: "stream", Value: true, EnvVars: env("STREAM"), Usage: "stream with SSE (needed for TTFT, TPOT and inter-chunk gaps); --stream=false to disable"},
			&cli.BoolFlag{Name: "ignore-eos", EnvVars: env("IGNORE_EOS"), Usage: "send vLLM's ignore_eos so outputs have the requested length"},
			&cli.BoolFlag{Name: "store-response", EnvVars: env("STORE_RESPONSE"), Usage: "keep generated text in the records"},
			&cli.StringFlag{Name: "extra-body", EnvVars: env("EXTRA_BODY"), Usage: "JSON object merged into every request body, e.g. '{\"top_k\":5}'"},
			&cli.StringFlag{Name: "api-key-env", EnvVars: env("API_KEY_ENV"), Usage: "name of an environment variable holding a bearer token (never written anywhere)"},
			&cli.StringSliceFlag{Name: "slo", EnvVars: env("SLO"), Usage: "service-level objective for goodput, NAME=SECONDS with NAME ttft, tpot or latency (repeatable)"},
		},
		Action: func(c *cli.Context) error { return run(c, stdout, stderr, getenv) },
	}
}

func run(c *cli.Context, stdout, stderr io.Writer, getenv func(string) string) error {
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", c.Args().Slice())
	}
	n := c.Int("num-requests")
	if n < 1 {
		return fmt.Errorf("--num-requests must be at least 1, got %d", n)
	}
	timeout, err := loadgen.TimeoutDuration(c.Float64("timeout"))
	if err != nil {
		return fmt.Errorf("--timeout: %w", err)
	}
	slo, err := loadgen.ParseSLO(c.StringSlice("slo"))
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	var apiKey string
	if name := c.String("api-key-env"); name != "" {
		apiKey = getenv(name)
		if apiKey == "" {
			return fmt.Errorf("--api-key-env: environment variable %s is empty or unset", name)
		}
	}
	concurrency := c.Int("concurrency")
	if c.Float64("request-rate") > 0 && !c.IsSet("concurrency") {
		// An open loop is capped only when asked, as vllm bench serve's
		// --max-concurrency is: the closed loop's default of 1 would hold
		// one request in flight and queue every other arrival in the
		// client, measuring a closed loop that the summary calls an open
		// one at the given rate.
		concurrency = 0
	}
	opts := loadgen.LoadOptions{
		URL:           c.String("url"),
		Model:         c.String("model"),
		Concurrency:   concurrency,
		RequestRate:   c.Float64("request-rate"),
		Seed:          c.Int64("seed"),
		Temperature:   c.Float64("temperature"),
		Timeout:       timeout,
		Stream:        c.Bool("stream"),
		IgnoreEOS:     c.Bool("ignore-eos"),
		StoreResponse: c.Bool("store-response"),
		APIKey:        apiKey,
		SLO:           slo,
	}
	if eb := c.String("extra-body"); eb != "" {
		if !json.Valid([]byte(eb)) {
			return fmt.Errorf("--extra-body: not valid JSON")
		}
		opts.ExtraBody = json.RawMessage(eb)
	}
	// Everything that can be checked is checked before a request is sent.
	rows, err := loadgen.ReadRows(c.String("prompts"), n)
	if err != nil {
		return err
	}
	if opts.WorkloadSHA256, err = loadgen.FileSHA256(c.String("prompts")); err != nil {
		return fmt.Errorf("prompts: %w", err)
	}
	client := loadgen.NewHTTPClient(opts.MaxInFlight(len(rows)))
	defer client.CloseIdleConnections()
	opts.Client = client
	// The flags are checked before the server is asked for its model, so a
	// bad flag is named as such rather than hidden behind a failed lookup.
	probe := opts
	if probe.Model == "" {
		probe.Model = "the server's"
	}
	if err := probe.Validate(); err != nil {
		return flagError(err)
	}
	output := c.String("output")
	summaryPath := c.String("summary")
	if summaryPath == "" {
		summaryPath = strings.TrimSuffix(output, filepath.Ext(output)) + ".summary.json"
	}
	if err := checkOutputs(output, summaryPath); err != nil {
		return err
	}
	base, err := loadgen.ServerBase(opts.URL)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if opts.Model == "" {
		// Pointing the client at a server is enough: it serves this model.
		ids, err := loadgen.ServedModels(c.Context, client, base, apiKey)
		if err != nil {
			return fmt.Errorf("--model not given and the server's model list is unavailable: %w", err)
		}
		opts.Model = ids[0]
	} else {
		// As the sweep does: a server that is not up gets an error, not an
		// output file of failed requests that --output then refuses to
		// replace.
		if err := loadgen.CheckReachable(c.Context, client, base, apiKey); err != nil {
			return fmt.Errorf("%w: start the server and run the same command again", err)
		}
	}
	for _, p := range []string{output, summaryPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	// Checked again: the files may have appeared while the server was
	// asked, and O_EXCL below is what finally keeps the records.
	if err := checkOutputs(output, summaryPath); err != nil {
		return err
	}
	f, err := os.OpenFile(output, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("refusing to overwrite %s: choose another --output", output)
		}
		return err
	}
	tty := false
	if fd, ok := stderr.(interface{ Fd() uintptr }); ok {
		tty = term.IsTerminal(int(fd.Fd()))
	}
	if tty {
		start := time.Now()
		opts.Progress = func(done int) {
			fmt.Fprintf(stderr, "\r\033[K%d/%d requests, %.1f s", done, len(rows), time.Since(start).Seconds())
		}
	}
	sum, recs, _, runErr := loadgen.Measure(c.Context, opts, rows, f, nil)
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err := f.Close(); runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("%w (records written so far are in %s)", runErr, output)
	}
	b, err := summaryJSON(sum)
	if err != nil {
		return err
	}
	// Never replaces a file: whatever appeared at summaryPath during the run
	// (the records themselves, under another spelling of their path) stays.
	werr := loadgen.WriteNewFile(summaryPath, b)
	stdout.Write(b)
	if werr != nil {
		return fmt.Errorf("summary (printed above, not written): %w; the records are in %s", werr, output)
	}
	fmt.Fprintf(stdout, "Raw results: %s\nSummary: %s\n", output, summaryPath)
	writeHumanSummary(stdout, sum)
	if w := sum.Counts.UsageWarning(); w != "" {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if sum.Counts.Failed > 0 {
		return exitCoder{fmt.Errorf("%d of %d requests failed (the first: %s; every record is in %s)", sum.Counts.Failed, sum.Counts.Attempted, loadgen.FirstFailure(recs), output), 2}
	}
	return nil
}

// summaryJSON is the summary as the file holds it: two-space indentation
// and a final newline, as the sweep writes its run summaries and
// serving-inference its own, and without encoding/json's HTML escaping,
// which would write an extra_body stop string "</s>" or a URL's "&" as
// \u003c/s\u003e and \u0026 (neither tool escapes them).
func summaryJSON(sum *loadgen.Summary) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sum); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// flagError turns a LoadOptions error, which names its JSON field
// ("request_rate: ..."), into one that names the flag ("--request-rate:
// ..."); a key inside extra_body keeps its own spelling.
func flagError(err error) error {
	field, rest, _ := strings.Cut(err.Error(), ":")
	flag, key, nested := strings.Cut(field, ".")
	flag = "--" + strings.ReplaceAll(flag, "_", "-")
	if nested {
		flag += "." + key
	}
	return errors.New(flag + ":" + rest)
}

// samePath reports whether a and b name the same file: the same name in
// the same folder, however the folders are spelled (relative, with "..", or
// through a symbolic link). Both folders must exist.
// checkOutputs refuses output and summary paths that would lose evidence:
// one file for both, or either already there. It runs before the server is
// contacted, so that a command that cannot keep its results fails at once.
func checkOutputs(output, summaryPath string) error {
	if samePath(output, summaryPath) {
		return fmt.Errorf("--output and --summary both name %s: the summary would replace the per-request records; choose another --summary", output)
	}
	if _, err := os.Lstat(output); err == nil {
		return fmt.Errorf("refusing to overwrite %s: choose another --output", output)
	}
	if _, err := os.Lstat(summaryPath); err == nil {
		return fmt.Errorf("refusing to overwrite %s: choose another --output or --summary", summaryPath)
	}
	return nil
}

// samePath reports whether a and b name one file however spelled (another
// path to the same folder, a symbolic link); folders not yet made never do.
func samePath(a, b string) bool {
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, err1 := os.Stat(filepath.Dir(a))
	db, err2 := os.Stat(filepath.Dir(b))
	return err1 == nil && err2 == nil && os.SameFile(da, db)
}
