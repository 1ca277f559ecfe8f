// Package cli is the plumbing the tinyserve commands share, written once:
// the engine flags built from tinyserve.Settings and read back into a
// tinyserve.Config, the sampling flags of a command that generates, the
// TINYSERVE_ environment variables, the order of a command line's
// arguments (Reorder), loggers, signals, and the exit statuses. It
// is internal and links urfave/cli, so that the root package, which every
// embedder imports, links no CLI library. (internal/clihint, which turns
// urfave/cli's usage errors into one line, stays its own package: the
// commands that use it need nothing else from here.)
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"
)

// EnvPrefix starts the environment variable of every flag the commands
// read from the environment, for containers: TINYSERVE_MAX_NUM_SEQS.
const EnvPrefix = "TINYSERVE_"

// EnvName is the environment spelling of a flag name: max-num-seqs ->
// MAX_NUM_SEQS (EnvVar adds the prefix).
func EnvName(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// EnvVar is the variable that sets --flag: EnvPrefix + EnvName(flag).
func EnvVar(flag string) string { return EnvPrefix + EnvName(flag) }

// EnvVars is a flag's EnvVars field: the one variable EnvVar names.
func EnvVars(flag string) []string { return []string{EnvVar(flag)} }

// SettingsFromEnv lists the names of the variables set in env (os.Environ's
// form) that are flags' variables, sorted: a setting refused or mistaken
// may come from a variable the operator forgot about rather than a flag,
// and a log line naming them says so. Other TINYSERVE_ variables, such as
// another command's, set nothing and are left out.
func SettingsFromEnv(env []string, flags []ucli.Flag) []string {
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

// Exit statuses of the tinyserve commands. A script tells a failed command
// (a bad flag, a model that does not load) from a measurement that ran but
// whose requests failed, which it may want to keep and inspect.
const (
	ExitOK             = 0
	ExitFailure        = 1
	ExitFailedRequests = 2
)

// exitError carries an exit status through urfave/cli's error return.
type exitError struct {
	error
	code int
}

// Unwrap lets errors.Is and errors.As see the cause.
func (e exitError) Unwrap() error { return e.error }

// WithExitCode makes err end the process with code (ExitFailedRequests)
// rather than ExitFailure; nil stays nil.
func WithExitCode(err error, code int) error {
	if err == nil {
		return nil
	}
	return exitError{err, code}
}

// ExitCode is the status the process ends with for err: ExitOK for nil,
// the code WithExitCode gave, else ExitFailure.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec exitError
	if errors.As(err, &ec) {
		return ec.code
	}
	return ExitFailure
}

// Exit ends a command's main: it prints err as "program: err" on stderr
// and exits with ExitCode(err); with a nil err it returns, and main
// returns normally (status 0).
func Exit(program string, err error) {
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, program+":", err)
	os.Exit(ExitCode(err))
}

// NewLogger is the logger of --log-format (text or json) and --log-level
// (debug, info, warn or error), writing to w.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
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

// StartupLogger is a text logger on w that shows an in-process engine's
// start-up lines with --verbose and only its warnings without.
func StartupLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// SignalContext is parent until the first SIGINT or SIGTERM, which ends
// it, so that the command stops gracefully (a server drains); after that
// the signals get their default behaviour again, so that an impatient
// operator's second Ctrl-C ends the process at once. stop releases the
// signals.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// LogFlags are --log-format and --log-level, with their variables, for
// LoggerFromFlags.
func LogFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "log-format", Value: "text", EnvVars: EnvVars("log-format"), Usage: "text or json"},
		&ucli.StringFlag{Name: "log-level", Value: "info", EnvVars: EnvVars("log-level"), Usage: "debug, info, warn or error"},
	}
}

// LoggerFromFlags is NewLogger for c's LogFlags. It also logs, at info,
// the names (never the values, which may be keys) of the flags' variables
// set in the environment: a setting refused or mistaken later may come
// from a variable the operator forgot about rather than a flag.
func LoggerFromFlags(c *ucli.Context, w io.Writer) (*slog.Logger, error) {
	lg, err := NewLogger(w, c.String("log-format"), c.String("log-level"))
	if err != nil {
		return nil, err
	}
	if vars := SettingsFromEnv(os.Environ(), c.App.Flags); len(vars) > 0 {
		lg.Info("settings from the environment", "variables", vars)
	}
	return lg, nil
}

// CheckRange refuses a flag's value outside [lo, hi], naming the flag: a
// flag's Action, so that the check sits beside the flag it checks.
func CheckRange(flag string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s must be in [%d, %d], got %d", flag, lo, hi, v)
	}
	return nil
}

// CheckPositive refuses a duration flag's value that is not above zero.
func CheckPositive(flag string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s must be positive, got %v", flag, d)
	}
	return nil
}
