package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/openai"
)

// TestCORS: as vllm serve's default CORS settings answer, a browser's
// preflight is 200 for any origin, method and headers (before the API-key
// check, which a preflight cannot pass), answers to cross-origin requests
// allow any origin, and requests without an Origin are left alone.
func TestCORS(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
	require.NoError(t, err)
	defer eng.Close()
	h := allowAllCORS(openai.NewHandler(eng, openai.WithAPIKeys("sk-test")))
	do := func(method, path, body string, hdr ...string) *http.Response {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}

	pre := do("OPTIONS", "/v1/completions", "", "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	assert.Equal(t, 200, pre.StatusCode)
	assert.Equal(t, "*", pre.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT", pre.Header.Get("Access-Control-Allow-Methods"))
	assert.Equal(t, "authorization,content-type", pre.Header.Get("Access-Control-Allow-Headers"))
	assert.Equal(t, "600", pre.Header.Get("Access-Control-Max-Age"))
	b, _ := io.ReadAll(pre.Body)
	assert.Equal(t, "OK", string(b))

	post := do("POST", "/v1/completions", `{"prompt":"ab","max_tokens":2}`, "Origin", "https://app.example", "Authorization", "Bearer sk-test")
	assert.Equal(t, 200, post.StatusCode)
	assert.Equal(t, "*", post.Header.Get("Access-Control-Allow-Origin"))

	// A refusal is readable by the page too, or it could not show why.
	denied := do("POST", "/v1/completions", `{"prompt":"ab"}`, "Origin", "https://app.example")
	assert.Equal(t, 401, denied.StatusCode)
	assert.Equal(t, "*", denied.Header.Get("Access-Control-Allow-Origin"))

	withCookie := do("GET", "/health", "", "Origin", "https://app.example", "Cookie", "a=b")
	assert.Equal(t, "https://app.example", withCookie.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, withCookie.Header.Values("Vary"), "Origin")

	plain := do("GET", "/health", "")
	assert.Equal(t, 200, plain.StatusCode)
	assert.Empty(t, plain.Header.Get("Access-Control-Allow-Origin"))
	// An OPTIONS that is not a preflight still gets the handler's 405.
	assert.Equal(t, 405, do("OPTIONS", "/v1/completions", "", "Origin", "https://app.example", "Authorization", "Bearer sk-test").StatusCode)
}

// TestServerAllowsCORS: the server tinyserve-serve runs answers a browser's
// preflight, API key or not, as vllm serve does by default.
func TestServerAllowsCORS(t *testing.T) {
	addr, port := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- newApp(io.Discard).RunContext(ctx, []string{"s", "--backend", "mock", "--api-key", "sk-test",
			"--host", "127.0.0.1", "--port", port, "--drain-timeout", "5s"})
	}()
	waitHealthy(t, addr)
	req, err := http.NewRequest("OPTIONS", "http://"+addr+"/v1/completions", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, 200, r.StatusCode)
	assert.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
	cancel()
	require.NoError(t, <-done)
}
