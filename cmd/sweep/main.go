// Command sweep runs a load sweep against an OpenAI-compatible completions
// (or chat completions) server, or against tinyserve started in-process, and writes the evidence
// and the reports:
//
//	go run ./cmd/sweep experiments/example.json
//	go run ./cmd/sweep --output-root /tmp/fresh experiments/example-vllm.json
//	go run ./cmd/sweep compare results/experiments/A results/experiments/B
//
// The config is serving-inference's sweep schema (plus ignore_eos,
// extra_body, api_key_env, slo and target); see docs/benchmarking.md. An
// interrupted sweep resumes when run again; complete runs are never
// re-measured or overwritten. Exit status 2 means a run had failed
// requests.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/sweep"
	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/report"
)

// exitCoder carries the process status through cli's error return.
type exitCoder struct {
	error
	code int
}

// Unwrap lets errors.Is see the cause.
func (e exitCoder) Unwrap() error { return e.error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, newApp(os.Stdout, os.Stderr, os.Getenv), os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		var ec exitCoder
		if errors.As(err, &ec) {
			os.Exit(ec.code)
		}
		os.Exit(1)
	}
}

// run runs app on args, flags after CONFIG included (flagsFirst).
func run(ctx context.Context, app *cli.App, args []string) error {
	return app.RunContext(ctx, flagsFirst(args, app.Flags, app.Commands))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *cli.App {
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "sweep",
		Usage:        "measure an OpenAI-compatible server (completions or chat) over concurrency levels and find where throughput stops growing",
		ArgsUsage:    "CONFIG",
		Writer:       stdout,
		ErrWriter:    stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output-root", EnvVars: []string{"TINYSERVE_OUTPUT_ROOT"}, Usage: "write under this folder instead of the config's output_dir (to measure afresh)"},
			&cli.StringFlag{Name: "api-key-env", EnvVars: []string{"TINYSERVE_API_KEY_ENV"}, Usage: "environment variable holding a bearer token (overrides the config's api_key_env)"},
			&cli.StringSliceFlag{Name: "engine", EnvVars: []string{"TINYSERVE_SWEEP_ENGINE"}, Usage: "override an embedded target's engine setting, KEY=VALUE (e.g. backend=cuda); recorded in config.json like the rest of the config (repeatable)"},
			&cli.BoolFlag{Name: "verbose", EnvVars: []string{"TINYSERVE_VERBOSE"}, Usage: "log the embedded engine's start-up"},
		},
		Action: func(c *cli.Context) error { return runSweep(c, stdout, stderr, getenv) },
		Commands: []*cli.Command{{
			Name:      "compare",
			Usage:     "compare two sweeps' summaries level by level (ratios are B/A)",
			ArgsUsage: "A B (sweep folders or summary.json files)",
			Action: func(c *cli.Context) error {
				if c.NArg() != 2 {
					return fmt.Errorf("compare wants two sweeps, got %d arguments", c.NArg())
				}
				a, err := analysis.ReadCombined(c.Args().Get(0))
				if err != nil {
					return err
				}
				b, err := analysis.ReadCombined(c.Args().Get(1))
				if err != nil {
					return err
				}
				return report.WriteComparison(stdout, analysis.Compare(a, b))
			},
		}},
	}
}

func runSweep(c *cli.Context, stdout, stderr io.Writer, getenv func(string) string) error {
	if c.NArg() == 0 {
		// A first try without arguments wants to know what to pass.
		if err := cli.ShowAppHelp(c); err != nil {
			return err
		}
		return errors.New("want a CONFIG argument (the usage is above)")
	}
	if c.NArg() != 1 {
		for _, a := range c.Args().Slice()[min(1, c.NArg()):] {
			if len(a) > 1 && strings.HasPrefix(a, "-") { // left last by flagsFirst
				return fmt.Errorf("flag needs an argument: %s", a)
			}
		}
		return fmt.Errorf("want one CONFIG argument, got %d: %v", c.NArg(), c.Args().Slice())
	}
	cfg, err := sweep.LoadConfig(c.Args().First(), c.StringSlice("engine")...)
	if err != nil {
		return err
	}
	keyEnv := cfg.APIKeyEnv
	if v := c.String("api-key-env"); v != "" {
		keyEnv = v
	}
	var apiKey string
	if keyEnv != "" {
		if apiKey = getenv(keyEnv); apiKey == "" {
			return fmt.Errorf("api_key_env: environment variable %s is empty or unset", keyEnv)
		}
	}
	ctx := c.Context
	opts := sweep.SweepOptions{
		OutputRoot: c.String("output-root"),
		APIKey:     apiKey,
		Progress:   sweep.NewProgress(stderr, isTerminal(stderr), time.Now),
	}
	if cfg.Embedded() {
		level := slog.LevelWarn
		if c.Bool("verbose") {
			level = slog.LevelInfo
		}
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
		var srv *embeddedServer
		defer func() {
			if srv == nil {
				return
			}
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.stop(sctx); err != nil {
				fmt.Fprintln(stderr, "warning: stopping the embedded target:", err)
			}
		}()
		// Started only when a run needs it: a complete or refused sweep
		// never loads the model (but for the check of its files against
		// the manifest's, which needs them loaded).
		opts.Target = func(ctx context.Context) (sweep.TargetInfo, error) {
			fmt.Fprintln(stderr, "starting embedded tinyserve target...")
			s, err := startEmbedded(ctx, cfg.Target, logger)
			if err != nil {
				return sweep.TargetInfo{}, err
			}
			srv = s
			fmt.Fprintf(stderr, "embedded target serving %s at %s\n", s.Model, s.URL)
			return sweep.TargetInfo{URL: s.URL, Model: s.Model, Checkpoint: s.Checkpoint}, nil
		}
	}
	start := time.Now()
	res, err := sweep.RunSweep(ctx, cfg, opts)
	switch {
	case errors.Is(err, sweep.ErrFailedRequests):
		return exitCoder{err, 2}
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w; run the same command again to resume (complete runs are kept)", err)
	case err != nil:
		return err
	}
	if res.AlreadyComplete {
		fmt.Fprintf(stdout, "every run of %s is already complete; nothing was sent (use --output-root to measure afresh)\n", res.Root)
		if res.Combined != nil {
			report.WriteVerdict(stdout, res.Combined)
		}
	} else {
		fmt.Fprintf(stdout, "sweep finished in %s: %d runs measured, %d kept from before\n", time.Since(start).Round(time.Second), res.Measured, res.Kept)
		report.WriteVerdict(stdout, res.Combined)
	}
	fmt.Fprintf(stdout, "report:  %s\nCSV:     %s\nplot:    %s\n         %s\nsummary: %s\n", res.Reports.Report, res.Reports.CSV, res.Reports.PNG, res.Reports.SVG, res.Reports.Summary)
	return nil
}
