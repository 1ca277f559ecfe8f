package openai

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
	"github.com/tinyserve/tinyserve/llm"
)

// flushOnlyWriter is a middleware's ResponseWriter wrapper in a common
// shape: it passes Flush through but has no Unwrap.
type flushOnlyWriter struct{ http.ResponseWriter }

func (w flushOnlyWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// unwrapWriter is the shape docs/server.md asks for.
type unwrapWriter struct{ http.ResponseWriter }

func (w unwrapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestStreamWarnsWithoutWriteDeadline: a wrapper that can flush but hides
// the connection streams fine, but the per-event write deadline is lost;
// the handler says so, as it does for a wrapper that cannot flush.
func TestStreamWarnsWithoutWriteDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(http.ResponseWriter) http.ResponseWriter
		warn string
	}{
		{"flush only", func(w http.ResponseWriter) http.ResponseWriter { return flushOnlyWriter{w} }, "cannot set a write deadline"},
		{"unwrap", func(w http.ResponseWriter) http.ResponseWriter { return unwrapWriter{w} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncbuf.Buffer
			h := NewHandler(newFake(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(tc.wrap(w), r)
			}))
			defer srv.Close()
			resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json",
				strings.NewReader(`{"prompt":"a","max_tokens":3,"stream":true}`))
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(string(b), "data: [DONE]\n\n"), "the stream is whole")
			if tc.warn == "" {
				assert.NotContains(t, logs.String(), "level=WARN")
			} else {
				assert.Contains(t, logs.String(), tc.warn)
			}
		})
	}
}

// TestDrainingRejectionLoggedAsInfo: docs/server.md logs rejections at
// info and failures at error. A draining engine turning requests away is
// a rejection (retry on another replica), seen on every rollout, so it
// must not fill the error log; a dead engine is a failure.
func TestDrainingRejectionLoggedAsInfo(t *testing.T) {
	for _, tc := range []struct {
		err   error
		level string
	}{
		{llm.ErrDraining, "level=INFO"},
		{fmt.Errorf("%w: boom", llm.ErrEngineDead), "level=ERROR"},
	} {
		var logs syncbuf.Buffer
		f := newFake()
		f.genErr = tc.err
		rec := serve(t, NewHandler(f, WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))),
			"POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`)
		require.Equal(t, 503, rec.Code)
		var line string
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "status=503") && !strings.Contains(l, `msg="http request"`) {
				line = l
			}
		}
		assert.Contains(t, line, tc.level, "%v: %s", tc.err, logs.String())
	}
}

// TestAccessLogOff: WithAccessLog(false) drops the "http request" line of
// every request, and only it: a failure is still logged, with its id.
func TestAccessLogOff(t *testing.T) {
	for _, on := range []bool{true, false} {
		var logs syncbuf.Buffer
		f := newFake()
		f.genErr = fmt.Errorf("%w: boom", llm.ErrEngineDead)
		h := NewHandler(f, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithAccessLog(on))
		require.Equal(t, 200, serve(t, h, "GET", "/v1/models", "").Code)
		require.Equal(t, 503, serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`).Code)
		assert.Equal(t, on, strings.Contains(logs.String(), `msg="http request"`), "access log %v: %s", on, logs.String())
		assert.Contains(t, logs.String(), "level=ERROR", "the failure is logged whatever the access log")
		assert.Contains(t, logs.String(), "request_id=")
	}
}
