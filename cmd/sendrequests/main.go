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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr, os.Getenv).RunContext(ctx, os.Args)
	stop()
	tcli.Exit("sendrequests", err)
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *cli.App {
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "sendrequests",
		Usage:        "measure one load condition against an OpenAI-compatible completions or chat completions endpoint",
		Writer:       stdout,
		ErrWriter:    stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prompts", Required: true, EnvVars: tcli.EnvVars("prompts"), Usage: "prompt file (JSONL rows: bucket, id, prompt, prompt_tokens, target_output_tokens, ...)"},
			&cli.StringFlag{Name: "output", Value: "results/run_001.jsonl", EnvVars: tcli.EnvVars("output"), Usage: "per-request JSONL (refuses to overwrite an existing file)"},
			&cli.StringFlag{Name: "summary", EnvVars: tcli.EnvVars("summary"), Usage: "summary JSON (default: beside --output, NAME.summary.json)"},
			&cli.StringFlag{Name: "url", Value: "http://localhost:8000/v1/completions", EnvVars: tcli.EnvVars("url"), Usage: "endpoint; a path ending in /chat/completions speaks the chat API, any other the completions API"},
			&cli.StringFlag{Name: "model", EnvVars: tcli.EnvVars("model"), Usage: "model name to send (default: the first model the server's /v1/models lists)"},
			&cli.IntFlag{Name: "num-requests", Value: 10, EnvVars: tcli.EnvVars("num-requests"), Usage: "requests to send: the first N rows of --prompts"},
			&cli.IntFlag{Name: "concurrency", Value: 1, EnvVars: tcli.EnvVars("concurrency"), Usage: "requests in flight (with --request-rate: a cap, 0 or left out for none, as vllm bench serve's --max-concurrency)"},
			&cli.Float64Flag{Name: "request-rate", EnvVars: tcli.EnvVars("request-rate"), Usage: "open loop: mean Poisson arrival rate in requests/s (0: closed loop)"},
			&cli.Int64Flag{Name: "seed", EnvVars: tcli.EnvVars("seed"), Usage: "seed of the open-loop arrival times"},
			&cli.Float64Flag{Name: "temperature", EnvVars: tcli.EnvVars("temperature"), Usage: "sampling temperature sent with every request"},
			&cli.Float64Flag{Name: "timeout", Value: 300, EnvVars: tcli.EnvVars("timeout"), Usage: "per-request timeout in seconds"},
			&cli.BoolFlag{Name: "stream", Value: true, EnvVars: tcli.EnvVars("stream"), Usage: "stream with SSE (needed for TTFT, TPOT and inter-chunk gaps); --stream=false to disable"},
			&cli.BoolFlag{Name: "ignore-eos", EnvVars: tcli.EnvVars("ignore-eos"), Usage: "send vLLM's ignore_eos so outputs have the requested length"},
			&cli.BoolFlag{Name: "store-response", EnvVars: tcli.EnvVars("store-response"), Usage: "keep generated text in the records"},
			&cli.StringFlag{Name: "extra-body", EnvVars: tcli.EnvVars("extra-body"), Usage: "JSON object merged into every request body, e.g. '{\"top_k\":5}'"},
			&cli.StringFlag{Name: "api-key-env", EnvVars: tcli.EnvVars("api-key-env"), Usage: "name of an environment variable holding a bearer token (never written anywhere)"},
			&cli.StringSliceFlag{Name: "slo", EnvVars: tcli.EnvVars("slo"), Usage: "service-level objective for goodput, NAME=SECONDS with NAME ttft, tpot or latency (repeatable)"},
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
	cond := loadgen.Condition{
		Options: loadgen.LoadOptions{
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
		},
		Prompts:     c.String("prompts"),
		NumRequests: n,
		Output:      c.String("output"),
		Summary:     c.String("summary"),
	}
	if eb := c.String("extra-body"); eb != "" {
		if !json.Valid([]byte(eb)) {
			return fmt.Errorf("--extra-body: not valid JSON")
		}
		cond.Options.ExtraBody = json.RawMessage(eb)
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		cond.Progress = stderr
	}
	ev, err := loadgen.MeasureToFiles(c.Context, cond)
	if ev != nil {
		stdout.Write(ev.SummaryJSON) // also when it could not be written
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Raw results: %s\nSummary: %s\n", cond.Output, cond.SummaryPath())
	ev.Summary.WriteBrief(stdout)
	if w := ev.Summary.Counts.UsageWarning(); w != "" {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if failed := ev.Summary.Counts.Failed; failed > 0 {
		return tcli.WithExitCode(fmt.Errorf("%d of %d requests failed (the first: %s; every record is in %s)", failed, ev.Summary.Counts.Attempted, loadgen.FirstFailure(ev.Records), cond.Output), tcli.ExitFailedRequests)
	}
	return nil
}
