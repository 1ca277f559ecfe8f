// Command embed shows tinyserve inside an existing Go service: the service
// has its own mux, routes and middleware (an access log and a bearer-token
// check), and mounts the OpenAI-compatible handler under /llm/ with
// http.StripPrefix. Clients then use http://host:port/llm/v1 as their
// OpenAI base URL.
//
//	go run ./examples/embed            # mock backend on 127.0.0.1:8080, token "secret"
//	curl -H 'Authorization: Bearer secret' localhost:8080/llm/v1/completions \
//	     -d '{"prompt":"Hello","max_tokens":8}'
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/openai"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	eng, err := tinyserve.Open(ctx, tinyserve.Config{Backend: tinyserve.BackendMock, Logger: logger})
	if err != nil {
		return err
	}
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newService(eng, "secret", prometheus.NewRegistry(), logger),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	logger.Info("listening", "addr", ln.Addr().String())
	// Drain, then shut down, and return only once the answers accepted
	// before the signal are written out.
	return openai.Serve(ctx, srv, ln, eng, openai.ServeOptions{DrainTimeout: 30 * time.Second, Logger: logger})
}

// newService is the host service's routing: its own routes, tinyserve under
// /llm/, and the service's middleware around all of it. tinyserve registers
// its metrics (labelled model_name) in the service's registry, beside the
// service's own; /llm/metrics serves that registry.
func newService(eng llm.Engine, token string, reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "service ok")
	})
	llmHandler := openai.NewHandler(eng,
		openai.WithLogger(logger.With("component", "tinyserve")),
		openai.WithRegistry(reg, reg),
	)
	mux.Handle("/llm/", requireToken(token, http.StripPrefix("/llm", llmHandler)))
	return accessLog(logger, mux)
}

// requireToken is the service's own authentication.
func requireToken(token string, next http.Handler) http.Handler {
	want := "Bearer " + token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":{"message":"missing or wrong bearer token","type":"invalid_request_error","param":null,"code":"unauthorized"}}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// accessLog is the service's logging middleware. Its writer wrapper has
// Unwrap, so tinyserve's streaming (Flush, SetWriteDeadline through
// http.ResponseController) still reaches the connection.
func accessLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		logger.Info("service request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"duration", time.Since(start))
	})
}

// statusRecorder is the service's ResponseWriter wrapper for its access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status for the access log.
func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController find the connection's writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
