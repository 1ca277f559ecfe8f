// Command tinyserve-serve serves a model over the OpenAI completions API, as
// `vllm serve` does: POST /v1/completions, GET /v1/models (and
// /v1/models/{model}), GET /health, GET /version, GET /metrics, POST /tokenize
// and POST /detokenize (see docs/server.md), with CORS open to any origin.
//
//	go run ./cmd/serve                         # built-in tiny GPT-2 on the CPU
//	go run ./cmd/serve --backend mock --port 8001
//	go run ./cmd/serve gpt2 --port 8000        # the model first, as vllm serve takes it
//
// Every tinyserve flag can also be set from a TINYSERVE_* environment variable
// (the flag name in upper case with underscores: TINYSERVE_MAX_NUM_SEQS); the
// vLLM flags it accepts have none. On SIGINT or SIGTERM the server drains
// (openai.Serve): /health turns 503, new requests get 503, accepted requests
// finish (up to --drain-timeout), then it exits 0; a second signal during
// the drain ends the process at once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/openai"
)

func main() {
	args, more := moreServedNames(os.Args)
	app := newApp(os.Stderr)
	args, err := tcli.Reorder(args, app.Flags, app.Commands, "model") // vllm serve MODEL [flags]
	if err == nil {
		app.Metadata = map[string]any{moreNamesKey: more}
		err = app.Run(args)
	}
	tcli.Exit("tinyserve-serve", err)
}

// serveOptions are the flags of this binary beyond the engine's.
type serveOptions struct {
	addr          string
	drainTimeout  time.Duration
	logger        *slog.Logger
	ready         func(net.Addr)  // called once listening, when set (tests use port 0)
	shutdownGrace time.Duration   // 0: openai.DefaultShutdownGrace (tests shorten it)
	apiKeys       []string        // required on /v1/ routes when any
	handler       []openai.Option // access log, served names, chat parsers
}

func newApp(stderr io.Writer) *cli.App {
	seed, _ := tinyserve.SettingNamed("seed")
	flags := append(tcli.EngineFlags(true), tcli.SettingFlag(seed, true),
		&cli.StringFlag{Name: "host", Value: "127.0.0.1", EnvVars: tcli.EnvVars("host"), Usage: "address to listen on (0.0.0.0 in a container)"},
		&cli.IntFlag{Name: "port", Value: 8000, EnvVars: tcli.EnvVars("port"), Usage: "port to listen on (0: any free port)",
			Action: func(_ *cli.Context, p int) error { return tcli.CheckRange("--port", p, 0, 65535) }},
		&cli.DurationFlag{Name: "drain-timeout", Value: openai.DefaultDrainTimeout, EnvVars: tcli.EnvVars("drain-timeout"), Usage: "how long accepted requests may run on after SIGTERM",
			Action: func(_ *cli.Context, d time.Duration) error { return tcli.CheckPositive("--drain-timeout", d) }},
		&cli.StringSliceFlag{Name: "api-key", EnvVars: tcli.EnvVars("api-key"), Usage: "require \"Authorization: Bearer <key>\" on /v1/ routes (repeat for several keys; the variable takes them comma-separated; without either, VLLM_API_KEY as vllm serve reads it)"},
	)
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "tinyserve-serve",
		Usage:        "serve a model over the OpenAI completions and chat completions API",
		UsageText: "tinyserve-serve [MODEL] [options]     (MODEL as in vllm serve MODEL, or as --model)\n" +
			"tinyserve-serve [options] health     (exit 0 when the server answers GET /health)",
		Version:   openai.Version(), // --version, and GET /version
		Flags:     slices.Concat(flags, tcli.LogFlags(), chatFlags(), vllmFlags()),
		ErrWriter: stderr,
		Commands:  []*cli.Command{healthCommand()},
		Action:    func(c *cli.Context) error { return serveCommand(c, stderr) },
	}
}

// serveCommand checks the command line and serves until SIGINT or SIGTERM.
func serveCommand(c *cli.Context, stderr io.Writer) error {
	// An unknown command name lands here as an argument: a typo of health
	// must not start a server.
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (the only command is health; one model may be given, as an argument or as --model)", c.Args().Slice())
	}
	cfg, err := engineConfig(c)
	if err != nil {
		return err
	}
	if cfg.Logger, err = tcli.LoggerFromFlags(c, stderr); err != nil {
		return err
	}
	handler, err := handlerOptions(c, cfg, stderr)
	if err != nil {
		return err
	}
	ctx, stop := tcli.SignalContext(c.Context) // a second signal ends the drain at once
	defer stop()
	return run(ctx, cfg, serveOptions{addr: net.JoinHostPort(c.String("host"), strconv.Itoa(c.Int("port"))), drainTimeout: c.Duration("drain-timeout"),
		logger: cfg.Logger, apiKeys: apiKeys(c.StringSlice("api-key"), os.Getenv("VLLM_API_KEY")), handler: handler})
}

// engineConfig reads the engine's settings from c: the engine flags with
// --seed, and vLLM's flags (checked, not stored).
func engineConfig(c *cli.Context) (tinyserve.Config, error) {
	cfg, err := tcli.ReadConfig(c)
	if err != nil {
		return tinyserve.Config{}, err
	}
	return cfg, checkVLLMFlags(c, cfg)
}

// run serves cfg's engine until ctx ends, then drains (openai.Serve).
func run(ctx context.Context, cfg tinyserve.Config, o serveOptions) error {
	lg := o.logger
	// Bind the port before loading the model, as vLLM does: a port in use
	// is then refused at once, not after a load of seconds or minutes.
	// Connections that arrive while the model loads wait in the backlog.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("%w (checked before loading the model: choose another --port, or stop what holds it)", err)
	}
	defer ln.Close() // Serve closes it too; this covers a failed load
	eng, err := tinyserve.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer eng.Close()
	info := eng.Info()
	lg.Info("engine ready", "model", info.ID, "backend", info.Backend, "max_model_len", info.MaxModelLen,
		"kv_blocks", eng.NumKVBlocks(), "prefix_caching", cfg.EnablePrefixCaching, "random_weights", info.RandomWeights)
	// The Go and process collectors belong to the binary, not to the
	// library handler, which a host service may embed beside its own.
	reg := prometheus.NewRegistry()
	if err := errors.Join(reg.Register(collectors.NewGoCollector()), reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))); err != nil {
		return fmt.Errorf("registering runtime metrics: %w", err)
	}
	h := openai.NewHandler(eng, append([]openai.Option{openai.WithLogger(lg), openai.WithRegistry(reg, reg), openai.WithAPIKeys(o.apiKeys...)}, o.handler...)...)
	srv := openai.NewServer(allowAllCORS(h), lg) // the limits a public server needs, and no WriteTimeout
	lg.Info("listening", "addr", ln.Addr().String(), "api_key_required", len(o.apiKeys) > 0, "version", openai.Version())
	if o.ready != nil {
		o.ready(ln.Addr())
	}
	return openai.Serve(ctx, srv, ln, eng, openai.ServeOptions{DrainTimeout: o.drainTimeout, ShutdownGrace: o.shutdownGrace, Logger: lg})
}
