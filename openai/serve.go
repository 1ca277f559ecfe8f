package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tinyserve/tinyserve/llm"
)

// Defaults of ServeOptions.
const (
	// DefaultDrainTimeout is how long accepted requests may run on after
	// the serving context ends (tinyserve-serve's --drain-timeout).
	DefaultDrainTimeout = 30 * time.Second
	// DefaultShutdownGrace is how long handlers keep at least, after the
	// drain, to write their last bytes.
	DefaultShutdownGrace = 5 * time.Second
)

// The limits NewServer sets: a client that sends its headers or body slowly, or
// holds an idle connection, cannot hold the server.
const (
	ServerReadHeaderTimeout = 10 * time.Second
	ServerReadTimeout       = 60 * time.Second
	ServerIdleTimeout       = 120 * time.Second
	ServerMaxHeaderBytes    = 64 << 10
)

// NewServer is an http.Server for h facing clients it does not control
// (tinyserve-serve's): it sets the Server* limits above, and deliberately no
// WriteTimeout, which would cut long streams; the handler pushes a write
// deadline forward before each event instead. The server's own errors go
// to lg (nil: discarded) as warnings.
func NewServer(h http.Handler, lg *slog.Logger) *http.Server {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(lg.Handler(), slog.LevelWarn),
	}
}

// ServeOptions tune Serve's shutdown. The zero value is valid.
type ServeOptions struct {
	// DrainTimeout bounds the engine's drain; 0 means
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// ShutdownGrace is how long the HTTP server waits at least, after the
	// drain, for handlers to write their last bytes: the rest of a
	// response, or, when the drain timed out and the engine was closed,
	// the engine_closed error that ends each request still running. Only
	// then are connections cut. 0 means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Logger receives the shutdown's progress; nil discards it.
	Logger *slog.Logger
}

// Serve serves srv (whose Handler serves eng, usually through NewHandler)
// on ln until ctx ends, then shuts down in the order the handler needs,
// and returns only when that is done, so that a program may exit when it
// returns: Serve returns ErrServerClosed as soon as Shutdown starts, and
// exiting then would cut the answers still being written.
//
// The order: eng.Drain first (health and new requests answer 503 while
// accepted ones finish), bounded by DrainTimeout; when that expires, the
// engine is closed, so the requests still running end with an
// engine_closed error their clients can read instead of a torn
// connection. Then srv.Shutdown lets handlers finish writing, until the
// drain timeout ends and for at least ShutdownGrace, with a fresh
// context: the engine being done is not every answer delivered, since a
// client that reads slowly may still be taking an answer the engine
// finished long ago. Connections left after that are closed.
//
// Serve returns nil after a drain, even one cut short by the timeout
// (logged), and an error when srv stops serving by itself. It does not
// close eng (but after a drain that timed out): the caller opened it, and
// closes it.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, eng llm.Engine, o ServeOptions) error {
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	drainTimeout := o.DrainTimeout
	if drainTimeout <= 0 {
		drainTimeout = DefaultDrainTimeout
	}
	grace := o.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	lg.Info("shutting down: draining", "timeout", drainTimeout)
	drainEnd := time.Now().Add(drainTimeout)
	dctx, cancel := context.WithDeadline(context.Background(), drainEnd)
	err := eng.Drain(dctx)
	cancel()
	if err != nil {
		// Closing the engine first ends each request still running with an
		// abort event, which its handler turns into an engine_closed error
		// (an error event and [DONE] on a stream, a 503 otherwise); cutting
		// the connections first would leave clients a torn response.
		lg.Warn("drain timed out: closing the engine; requests still running end with an error", "err", err)
		_ = eng.Close()
	}
	// A fresh context: the drain's may have expired already, and Shutdown
	// with it would return at once and leave srv.Close to cut responses
	// that are being written.
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
