package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/internal/drainwait"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/openai"
)

func TestEmbedded(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: 20 * time.Millisecond}}, engine.Config{})
	require.NoError(t, err)
	defer eng.Close()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	srv := httptest.NewServer(newService(eng, "secret", prometheus.NewRegistry(), logger))
	defer srv.Close()
	do := func(method, path, body string, auth bool) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if auth {
			req.Header.Set("Authorization", "Bearer secret")
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		return resp
	}
	read := func(resp *http.Response) string {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	tests := []struct {
		method, path, body string
		auth               bool
		status             int
		contains           string
	}{
		{"GET", "/status", "", false, 200, "service ok"},
		{"GET", "/llm/v1/models", "", false, 401, "bearer token"},
		{"GET", "/llm/v1/models", "", true, 200, `"id":"mock"`},
		{"GET", "/llm/health", "", true, 200, `{"status":"ok"}`},
		{"POST", "/llm/v1/completions", `{"prompt":"hi","max_tokens":2,"temperature":0}`, true, 200, `"completion_tokens":2`},
		{"POST", "/llm/v1/completions", `{"prompt":"hi","model":"nope"}`, true, 404, "invalid_request_error"},
		{"GET", "/llm/nothing", "", true, 404, "invalid_request_error"},
		{"GET", "/llm/metrics", "", true, 200, `vllm:request_success_total{finished_reason="length",model_name="mock"} 1`},
	}
	for _, tc := range tests {
		resp := do(tc.method, tc.path, tc.body, tc.auth)
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
		assert.Contains(t, read(resp), tc.contains, tc.path)
	}

	// Streaming through StripPrefix and the service's middleware: the first
	// event arrives while the request is still running, so flushes reach
	// the connection through the middleware's writer.
	resp := do("POST", "/llm/v1/completions", `{"prompt":"hi","max_tokens":60,"temperature":0,"stream":true}`, true)
	require.Equal(t, 200, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	var chunk struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &chunk))
	// Unflushed, ~150-byte chunks would sit in net/http's 4 KiB buffer
	// until about 27 of them were written.
	assert.Less(t, eng.Stats().GenerationTokens, uint64(2+20), "the first event came at once")
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	assert.True(t, strings.HasSuffix(string(rest), "data: [DONE]\n\n"))

	// Both logs carry the request: the service's line and tinyserve's own.
	assert.Contains(t, logs.String(), `msg="service request" method=POST path=/llm/v1/completions status=200`)
	assert.Contains(t, logs.String(), "component=tinyserve request_id=")
	assert.NotContains(t, logs.String(), "cannot flush")
}

// TestServeWaitsForAnswers: openai.Serve, whose return ends the program, returns
// only once the answers accepted before the signal are written out, even
// when the engine finished them long before a slow client takes them.
func TestServeWaitsForAnswers(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
	require.NoError(t, err)
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: newService(eng, "secret", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- openai.Serve(ctx, srv, ln, eng, openai.ServeOptions{DrainTimeout: time.Minute}) }()

	slow := drainwait.SlowClient()
	// Some 9 MB of events: more than twice what the socket buffers hold.
	req, err := http.NewRequest("POST", "http://"+ln.Addr().String()+"/llm/v1/completions",
		strings.NewReader(`{"prompt":"slow reader","max_tokens":4000,"n":4,"logprobs":20,"top_k":1,"stream":true}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := slow.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Eventually(t, func() bool {
		s := eng.Stats()
		return s.Finished == 4 && s.Running == 0 && s.Waiting == 0
	}, 10*time.Second, time.Millisecond, "the engine finishes the request")

	cancel() // the signal: the engine has nothing left, so the drain ends at once
	drainwait.RequireAnswerDelivered(t, served, resp.Body)
}
