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
// requests (tcli.ExitFailedRequests).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/sweep"
	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, newApp(os.Stdout, os.Stderr, os.Getenv), os.Args)
	stop()
	tcli.Exit("sweep", err)
}

// run runs app on args, flags after CONFIG included (tcli.Reorder).
func run(ctx context.Context, app *cli.App, args []string) error {
	args, err := tcli.Reorder(args, app.Flags, app.Commands, "")
	if err != nil {
		return err
	}
	return app.RunContext(ctx, args)
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
			&cli.StringFlag{Name: "output-root", EnvVars: tcli.EnvVars("output-root"), Usage: "write under this folder instead of the config's output_dir (to measure afresh)"},
			&cli.StringFlag{Name: "api-key-env", EnvVars: tcli.EnvVars("api-key-env"), Usage: "environment variable holding a bearer token (overrides the config's api_key_env)"},
			&cli.StringSliceFlag{Name: "engine", EnvVars: []string{tcli.EnvPrefix + "SWEEP_ENGINE"}, Usage: "override an embedded target's engine setting, KEY=VALUE (e.g. backend=cuda); recorded in config.json like the rest of the config (repeatable)"},
			&cli.BoolFlag{Name: "verbose", EnvVars: tcli.EnvVars("verbose"), Usage: "log the embedded engine's start-up"},
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
			if len(a) > 1 && strings.HasPrefix(a, "-") { // left last by tcli.Reorder
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
		logger := tcli.StartupLogger(stderr, c.Bool("verbose"))
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
		return tcli.WithExitCode(err, tcli.ExitFailedRequests)
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
