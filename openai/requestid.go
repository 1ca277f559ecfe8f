package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// RequestIDHeader carries a request's id: honoured when the client sends a
// sane one, generated otherwise, and echoed in the response.
const RequestIDHeader = "X-Request-ID"

// maxRequestIDLen bounds a client-sent id so that logs and engine request
// ids stay small.
const maxRequestIDLen = 128

type ctxKey struct{}

// reqInfo is what the middleware hands the routes through the context.
type reqInfo struct {
	id  string
	log *slog.Logger
}

// validRequestID accepts printable ASCII without spaces, so an id can never
// forge a log line or a header.
func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

// withRequestID is the handler's outer middleware: it settles the request
// id, echoes it, gives the routes a logger that carries it, and logs one
// access line per request, to access (base when nil), unless accessLog is
// false.
func withRequestID(base, access *slog.Logger, accessLog bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		lg := base.With("request_id", id)
		ri := &reqInfo{id: id, log: lg}
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri))
		defer func() {
			// A panic below (an engine's, a tokenizer's) is logged with its
			// stack and answers 500 with the OpenAI body when nothing was sent
			// yet; after that, the connection is aborted so the client cannot
			// take a cut response for a whole one.
			v := recover()
			if v != nil && v != http.ErrAbortHandler {
				lg.Error("panic serving the request", "panic", v, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, r, &apiError{status: http.StatusInternalServerError, Type: typeServer,
						Code: "internal_error", Message: "internal error"})
					v = nil
				}
			}
			switch {
			case sw.status != 0:
			case r.Context().Err() != nil:
				// Nothing was sent, and the client is gone: 200 would
				// claim an answer it never got.
				sw.status = statusClientClosed
			default:
				sw.status = http.StatusOK
			}
			if accessLog {
				alg := lg
				if access != nil {
					alg = access.With("request_id", id)
				}
				alg.LogAttrs(r.Context(), slog.LevelInfo, "http request",
					slog.String("method", r.Method), slog.String("path", r.URL.Path),
					slog.Int("status", sw.status), slog.Int64("bytes", sw.bytes),
					slog.Duration("duration", time.Since(start)))
			}
			if v != nil {
				panic(http.ErrAbortHandler)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusClientClosed is what the access log records for a request whose
// client went away before any answer was sent: nginx's 499, "client closed
// request", which log tools already know. It is never sent.
const statusClientClosed = 499

func requestInfo(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(ctxKey{}).(*reqInfo); ok {
		return ri
	}
	// Only reachable when a route is called without the middleware (tests).
	return &reqInfo{id: newRequestID(), log: slog.New(slog.DiscardHandler)}
}

func requestLogger(r *http.Request) *slog.Logger { return requestInfo(r).log }

// statusWriter records the status and size for the access log. Unwrap lets
// http.ResponseController reach the connection's Flush and SetWriteDeadline.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

// WriteHeader records the first status written.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write counts the body bytes; a write before WriteHeader means 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setWriteDeadline pushes the connection's write deadline d forward. A
// writer that cannot (a test recorder, some wrappers) is fine: there is
// then no deadline to push.
func setWriteDeadline(rc *http.ResponseController, d time.Duration) {
	t := time.Now().Add(d)
	// An error means no deadline can be set (http.ErrNotSupported) or the
	// connection is gone, which the write that follows reports anyway.
	_ = rc.SetWriteDeadline(t)
}

// writeJSON writes v with status under the handler's write deadline.
func (h *handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, r, &apiError{status: http.StatusInternalServerError, Type: typeServer,
			Code: "internal_error", Message: "encoding the response: " + err.Error()})
		return
	}
	body = append(body, '\n')
	// net/http clears the deadline once the response is flushed, before the
	// connection serves its next request.
	setWriteDeadline(http.NewResponseController(w), h.cfg.writeTimeout)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		requestLogger(r).Info("writing response", "err", err)
	}
}
