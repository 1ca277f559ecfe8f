package openai

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// TestServeDrainsThenReturns: when ctx ends, Serve drains the engine (new
// requests get 503) while an accepted stream runs to [DONE], and returns
// nil only after the HTTP server has shut down. (cmd/serve's shutdown
// tests and examples/embed's check the timeout and slow-reader cases
// through it.)
func TestServeDrainsThenReturns(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: 2 * time.Millisecond}}, engine.Config{})
	require.NoError(t, err)
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, NewServer(NewHandler(eng), lg), ln, eng, ServeOptions{DrainTimeout: 10 * time.Second, Logger: lg})
	}()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"drain me","max_tokens":60,"temperature":0,"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	_, err = br.ReadString('\n')
	require.NoError(t, err)

	cancel()
	require.Eventually(t, func() bool {
		r, err := client.Get(base + "/health")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusServiceUnavailable
	}, 5*time.Second, time.Millisecond, "health turns 503 during the drain")
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(rest), "data: [DONE]\n\n"), "the accepted stream ends normally")
	require.NoError(t, <-served)
	assert.Contains(t, logs.String(), "shutting down: draining")
	assert.Contains(t, logs.String(), "stopped")
	_, err = client.Get(base + "/health")
	assert.Error(t, err, "the listener is closed once Serve returns")
}

// TestServeListenerFails: a server that stops by itself (its listener
// closed) is an error, not a shutdown.
func TestServeListenerFails(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
	require.NoError(t, err)
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	err = Serve(context.Background(), NewServer(NewHandler(eng), nil), ln, eng, ServeOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "serving:")
}
