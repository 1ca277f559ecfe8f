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
// vLLM flags it accepts have none. On
// SIGINT or SIGTERM the server drains: /health turns 503, new requests get
// 503, accepted requests finish (up to --drain-timeout), then it exits 0; a
// second signal during the drain ends the process at once.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/openai"
)

// envPrefix makes every flag readable from the environment, for containers.
const envPrefix = "TINYSERVE_"

// Server limits: a client that sends its headers or body slowly, or holds an
// idle connection, cannot hold the server. There is deliberately no
// WriteTimeout: it would cut long streams; the handler pushes a write
// deadline forward before each event instead.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
	// shutdownGrace is how long the HTTP server waits at least, after the
	// drain, for handlers to write their last bytes: the rest of a response,
	// or, when the drain timed out and the engine was closed, the
	// engine_closed error that ends each request still running. Only then
	// are connections cut.
	shutdownGrace = 5 * time.Second
)

func main() {
	args, more := moreServedNames(os.Args)
	args, err := modelFirst(args, newApp(io.Discard).Flags)
	if err == nil {
		app := newApp(os.Stderr)
		app.Metadata = map[string]any{moreNamesKey: more}
		err = app.Run(args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinyserve-serve:", err)
		os.Exit(1)
	}
}

// modelFirst lets the model be given as `vllm serve MODEL [flags]` takes
// it: the command line's first argument that is neither a flag nor a
// flag's value, when it is not a command, becomes --model, wherever it is
// (before the flags, as vLLM's help shows it, or after some or all of
// them, which vLLM's argument parser also takes). The flag parser would
// stop at it and leave every flag after it unread. flags are the app's,
// to tell the flags that take a value from the boolean ones. The model
// given both ways is an error rather than a silent choice.
func modelFirst(args []string, flags []cli.Flag) ([]string, error) {
	boolean := map[string]bool{"help": true, "h": true, "version": true, "v": true}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			for _, n := range f.Names() {
				boolean[n] = true
			}
		}
	}
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && !boolean[name] {
			i++ // its value
		}
	}
	if i >= len(args) || args[i] == "--" || args[i] == "health" || args[i] == "help" || args[i] == "h" {
		return args, nil
	}
	model := args[i]
	rest := slices.Concat(args[1:i], args[i+1:])
	for _, a := range rest {
		if a == "--" {
			break
		}
		if a == "--model" || a == "-model" || strings.HasPrefix(a, "--model=") || strings.HasPrefix(a, "-model=") {
			return nil, fmt.Errorf("the model is given twice: %q and %s", model, a)
		}
	}
	return slices.Concat(args[:1], []string{"--model", model}, rest), nil
}

// moreNamesKey is the key of cli.App.Metadata under which main passes the
// served names that follow the first (moreServedNames).
const moreNamesKey = "more-served-names"

// moreServedNames takes out of args the words that follow
// "--served-model-name NAME" up to the next flag: vllm serve's
// --served-model-name takes several names, the first the one responses
// carry, and launch scripts give them so. The flag parser would stop at
// the second. The "=" form takes one name, as in vLLM, and a repeated flag
// keeps its last, as vLLM's parser does.
func moreServedNames(args []string) (rest, more []string) {
	rest = make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		rest = append(rest, args[i])
		if i == 0 || (args[i] != "--served-model-name" && args[i] != "-served-model-name") || i+1 >= len(args) {
			continue
		}
		i++
		rest = append(rest, args[i]) // the first name: the flag's value
		more = more[:0]              // a repeated flag replaces the names
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !slices.Contains([]string{"health", "help", "h"}, args[i+1]) {
			i++
			more = append(more, args[i])
		}
	}
	return rest, more
}

// serveOptions are the flags of this binary beyond the engine's.
type serveOptions struct {
	addr         string
	drainTimeout time.Duration
	logger       *slog.Logger
	apiKeys      []string // required on /v1/ routes when any (--api-key)
	noAccessLog  bool     // no "http request" lines (--disable-uvicorn-access-log)
	// servedNames, when set, are every name of the model, the first the
	// one responses carry (--served-model-name NAME NAME...).
	servedNames []string
	// accessLogger, when set, logs the access lines in place of logger
	// (an --uvicorn-log-level given apart from --log-level).
	accessLogger *slog.Logger
	// ready, when set, is called with the listening address once the
	// server accepts connections (tests use port 0).
	ready func(net.Addr)
	// shutdownGrace, when positive, replaces the shutdownGrace constant
	// (tests shorten it).
	shutdownGrace time.Duration
	// chat are the chat endpoint's options (--tool-call-parser, ...).
	chat []openai.Option
}

func newApp(stderr io.Writer) *cli.App {
	env := func(name string) []string { return []string{envPrefix + tinyserve.EnvName(name)} }
	flags := append(tinyserve.EngineFlags(envPrefix),
		&cli.StringFlag{Name: "host", Value: "127.0.0.1", EnvVars: env("host"), Usage: "address to listen on (0.0.0.0 in a container)"},
		&cli.IntFlag{Name: "port", Value: 8000, EnvVars: env("port"), Usage: "port to listen on (0: any free port)"},
		&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, EnvVars: env("drain-timeout"), Usage: "how long accepted requests may run on after SIGTERM"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: env("log-format"), Usage: "text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: env("log-level"), Usage: "debug, info, warn or error"},
		&cli.Int64Flag{Name: "seed", EnvVars: env("seed"), Usage: "seed of the seeds of requests that give none, as vLLM's --seed: the same seed and requests sent one at a time sample the same text (default: from the clock)"},
		&cli.StringSliceFlag{Name: "api-key", EnvVars: env("api-key"), Usage: "require \"Authorization: Bearer <key>\" on /v1/ routes (repeat for several keys; the variable takes them comma-separated; without either, VLLM_API_KEY as vllm serve reads it)"},
	)
	flags = append(flags, chatFlags()...)
	flags = append(flags, vllmFlags()...)
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		Name:         "tinyserve-serve",
		Usage:        "serve a model over the OpenAI completions and chat completions API",
		UsageText: "tinyserve-serve [MODEL] [options]     (MODEL as in vllm serve MODEL, or as --model)\n" +
			"tinyserve-serve [options] health     (exit 0 when the server answers GET /health)",
		Version: openai.Version(), // --version, and GET /version

		Flags:     flags,
		ErrWriter: stderr,
		Commands: []*cli.Command{{
			Name:  "health",
			Usage: "exit 0 when the server on --host/--port answers GET /health with 200 (a container HEALTHCHECK without curl)",
			// Its own --host and --port, so that they may also follow the
			// command name (health --port 8001); without them there, the
			// server's flags (before the name, or from the environment)
			// apply.
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "host", Usage: "the server's --host"},
				&cli.IntFlag{Name: "port", Usage: "the server's --port"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return fmt.Errorf("health: unexpected arguments %q", c.Args().Slice())
				}
				app := c.Lineage()[1]
				host, port := app.String("host"), app.Int("port")
				if c.IsSet("host") {
					host = c.String("host")
				}
				if c.IsSet("port") {
					port = c.Int("port")
				}
				return checkHealth(c.Context, host, port)
			},
		}},
		Action: func(c *cli.Context) error {
			// An unknown command name lands here as an argument: a typo of
			// health must not start a server.
			if c.NArg() > 0 {
				return fmt.Errorf("unexpected arguments %q (the only command is health; one model may be given, as an argument or as --model)", c.Args().Slice())
			}
			cfg, err := engineConfig(c)
			if err != nil {
				return err
			}
			logger, err := newLogger(stderr, c.String("log-format"), c.String("log-level"))
			if err != nil {
				return err
			}
			cfg.Logger = logger
			accessLogger, err := accessLoggerFor(c, stderr)
			if err != nil {
				return err
			}
			var names []string
			if more, _ := c.App.Metadata[moreNamesKey].([]string); len(more) > 0 {
				if !c.IsSet(tinyserve.FlagModel) {
					// vllm serve reads these words as names too; taking the
					// last for the model would be a guess.
					return fmt.Errorf("--served-model-name took %q as more names of the model, as vllm serve does, and no model is given: give the model first (tinyserve-serve MODEL --served-model-name NAME...) or with --model", more)
				}
				names = append([]string{cfg.ServedModelName}, more...)
			}
			if vars := settingsFromEnv(os.Environ(), c.App.Flags); len(vars) > 0 {
				// A setting refused or mistaken below may come from a
				// variable the operator forgot about rather than a flag.
				logger.Info("settings from the environment", "variables", vars)
			}
			port := c.Int("port")
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port must be in [0, 65535], got %d", port)
			}
			if c.Duration("drain-timeout") <= 0 {
				return fmt.Errorf("--drain-timeout must be positive, got %v", c.Duration("drain-timeout"))
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				// After the first signal starts the drain, a second one gets
				// the default behaviour: an impatient operator's second
				// Ctrl-C ends the process at once.
				<-ctx.Done()
				stop()
			}()
			chat, err := chatOptions(c)
			if err != nil {
				return err
			}
			return run(ctx, cfg, serveOptions{
				chat:         chat,
				addr:         net.JoinHostPort(c.String("host"), strconv.Itoa(port)),
				drainTimeout: c.Duration("drain-timeout"),
				logger:       logger,
				apiKeys:      apiKeys(c.StringSlice("api-key"), os.Getenv("VLLM_API_KEY")),
				noAccessLog:  !accessLog(c),
				accessLogger: accessLogger,
				servedNames:  names,
			})
		},
	}
}

// engineConfig reads the engine's settings from c: the shared engine
// flags, this binary's --seed and vLLM's flags (checked, not stored).
func engineConfig(c *cli.Context) (tinyserve.Config, error) {
	cfg, err := tinyserve.ConfigFromFlags(c)
	if err != nil {
		return tinyserve.Config{}, err
	}
	if err := checkVLLMFlags(c, cfg); err != nil {
		return tinyserve.Config{}, err
	}
	if c.IsSet("seed") {
		s := c.Int64("seed")
		if s < 0 {
			return tinyserve.Config{}, fmt.Errorf("--seed must not be negative, got %d", s)
		}
		cfg.Seed = new(uint64(s))
	}
	return cfg, nil
}

// settingsFromEnv lists the names of the variables set in env that are
// flags' variables (a flag given on the command line wins over its own).
// Other TINYSERVE_ variables, such as cmd/sweep's, set nothing here and
// are left out.
func settingsFromEnv(env []string, flags []cli.Flag) []string {
	vars := map[string]bool{}
	for _, f := range flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, v := range ev.GetEnvVars() {
				vars[v] = true
			}
		}
	}
	var names []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); vars[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// run serves cfg's engine until ctx ends, then drains: engine.Drain first
// (health and new requests answer 503 while accepted ones finish), bounded
// by the drain timeout; when that expires, the engine is closed, so the
// requests still running end with an engine_closed error; then srv.Shutdown
// lets handlers finish writing, until the drain timeout ends and for at
// least shutdownGrace. It returns nil
// after a drain, even one cut short by the timeout, which it logs.
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
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering runtime metrics: %w", err)
		}
	}
	opts := []openai.Option{openai.WithLogger(lg), openai.WithRegistry(reg, reg), openai.WithAPIKeys(o.apiKeys...),
		openai.WithAccessLog(!o.noAccessLog), openai.WithAccessLogger(o.accessLogger)}
	if len(o.servedNames) > 0 {
		opts = append(opts, openai.WithServedModelNames(o.servedNames...))
	}
	opts = append(opts, o.chat...)
	h := openai.NewHandler(eng, opts...)

	srv := &http.Server{
		Handler:           allowAllCORS(h),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(lg.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	lg.Info("listening", "addr", ln.Addr().String(), "api_key_required", len(o.apiKeys) > 0, "version", openai.Version())
	if o.ready != nil {
		o.ready(ln.Addr())
	}

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	lg.Info("shutting down: draining", "timeout", o.drainTimeout)
	drainEnd := time.Now().Add(o.drainTimeout)
	dctx, cancel := context.WithDeadline(context.Background(), drainEnd)
	err = eng.Drain(dctx)
	cancel()
	if err != nil {
		// Closing the engine first ends each request still running with an
		// abort event, which its handler turns into an engine_closed error
		// (an error event and [DONE] on a stream, a 503 otherwise); cutting
		// the connections first would leave clients a torn response.
		lg.Warn("drain timed out: closing the engine; requests still running end with an error", "err", err)
		_ = eng.Close()
	}
	// The engine being done is not every answer delivered: a request's
	// events wait in its handler's queue, so a client that reads slowly may
	// still be taking an answer the engine finished long ago. Handlers keep
	// the rest of the drain timeout to write, and at least the grace: a
	// fresh context, since the drain's may have expired already, and
	// Shutdown with it would return at once and leave srv.Close to cut
	// responses that are being written.
	grace := o.shutdownGrace
	if grace <= 0 {
		grace = shutdownGrace
	}
	shutdownEnd := time.Now().Add(grace)
	if shutdownEnd.Before(drainEnd) {
		shutdownEnd = drainEnd
	}
	sctx, cancel := context.WithDeadline(context.Background(), shutdownEnd)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		lg.Warn("shutdown cut short: closing the remaining connections", "err", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	lg.Info("stopped")
	return nil
}

// checkHealth asks a running server for GET /health. A wildcard listen
// address is probed on loopback.
func checkHealth(ctx context.Context, host string, port int) error {
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// apiKeys returns the keys the /v1/ routes require: those of --api-key (or
// TINYSERVE_API_KEY), else VLLM_API_KEY as one key, as vllm serve reads it
// (its --api-key takes precedence over the variable). Without the fallback a
// deployment moved from vLLM with its key in VLLM_API_KEY would serve
// without authentication and not say so.
func apiKeys(flagKeys []string, vllmKey string) []string {
	keys := slices.DeleteFunc(slices.Clone(flagKeys), func(k string) bool { return k == "" })
	if len(keys) == 0 && vllmKey != "" {
		keys = []string{vllmKey}
	}
	return keys
}
