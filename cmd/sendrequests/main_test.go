package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

func fakeServer(t *testing.T, fail bool) (*httptest.Server, *atomic.Int64, *atomic.Value) {
	var n atomic.Int64
	var auth atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"data":[{"id":"served"}]}`)
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"version":"0.9.1"}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if body["model"] != "served" {
			http.Error(w, "wrong model", 404)
			return
		}
		if fail && k == 2 {
			http.Error(w, `{"error":"boom"}`, 500)
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		var body struct {
			Model               string           `json:"model"`
			Messages            []map[string]any `json:"messages"`
			MaxCompletionTokens int              `json:"max_completion_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if body.Model != "served" || len(body.Messages) != 1 || body.MaxCompletionTokens != 2 {
			http.Error(w, `{"error":{"message":"not a chat request"}}`, 400)
			return
		}
		const head = `data: {"choices":[{"index":0,"delta":`
		fmt.Fprint(w, head+`{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, head+`{"content":"a"},"finish_reason":null}]}`+"\n\n"+head+`{"content":"b"},"finish_reason":"length"}]}`+"\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &n, &auth
}

// TestSendRequestsChat: a URL ending in /chat/completions makes the client
// speak chat, and the summary says so.
func TestSendRequestsChat(t *testing.T) {
	dir := t.TempDir()
	srv, n, _ := fakeServer(t, false)
	out := filepath.Join(dir, "chat.jsonl")
	stdout, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 3), "--url", srv.URL+"/v1/chat/completions",
		"--num-requests", "3", "--concurrency", "2", "--output", out, "--store-response")
	require.NoError(t, err, stdout)
	assert.Equal(t, int64(3), n.Load())
	recs, err := loadgen.ReadRecords(out)
	require.NoError(t, err)
	for _, r := range recs {
		require.True(t, r.OK(), r.FailureReason())
		assert.Equal(t, "ab", *r.Response)
		assert.Equal(t, 2, *r.StreamTextEventCount)
		assert.Equal(t, 9, *r.PromptTokens)
	}
	s, err := loadgen.ReadSummary(filepath.Join(dir, "chat.summary.json"))
	require.NoError(t, err)
	assert.Equal(t, loadgen.APIChat, s.Config.API)
	assert.Equal(t, "served", s.Config.Model, "the model came from /v1/models, found from the chat URL")

	_, err = runApp(t, nil, "--prompts", writePrompts(t, dir, 3), "--url", srv.URL+"/v1/chat/completions",
		"--num-requests", "1", "--output", filepath.Join(dir, "x.jsonl"), "--extra-body", `{"messages":[]}`)
	assert.ErrorContains(t, err, "--extra-body.messages: not allowed")
}

func writePrompts(t *testing.T, dir string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"bucket":"short","id":"p_%06d","prompt":"hello %d","prompt_tokens":2,"target_output_tokens":2,"target_prompt_tokens":2,"workload":"w"}`+"\n", i, i)
	}
	p := filepath.Join(dir, "p.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

func runApp(t *testing.T, env map[string]string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	app := newApp(&out, &errb, func(k string) string { return env[k] })
	err := app.RunContext(context.Background(), append([]string{"sendrequests"}, args...))
	return out.String(), err
}

func TestSendRequests(t *testing.T) {
	dir := t.TempDir()
	srv, n, auth := fakeServer(t, false)
	out := filepath.Join(dir, "out", "c2.jsonl")
	stdout, err := runApp(t, map[string]string{"MY_KEY": "s3cret"}, "--prompts", writePrompts(t, dir, 5), "--url", srv.URL+"/v1/completions",
		"--num-requests", "4", "--concurrency", "2", "--output", out, "--api-key-env", "MY_KEY", "--slo", "ttft=1")
	require.NoError(t, err)
	assert.Equal(t, int64(4), n.Load())
	assert.Equal(t, "Bearer s3cret", auth.Load())
	assert.Contains(t, stdout, "Summary: "+filepath.Join(dir, "out", "c2.summary.json"))
	// The human summary ends the output, as vllm bench serve's does.
	assert.Regexp(t, `(?s)Requests: +4 \(0 failed\).*Request throughput \(req/s\): +[0-9.]+\n.*TTFT p50 / p99 \(ms\): +[0-9.]+ / [0-9.]+\n.*Latency p50 / p99 \(ms\): +[0-9.]+ / [0-9.]+\n$`, stdout)
	raw, _ := os.ReadFile(out)
	assert.Equal(t, 4, strings.Count(string(raw), "\n"))
	sum, _ := os.ReadFile(filepath.Join(dir, "out", "c2.summary.json"))
	assert.Contains(t, string(sum), `"successful": 4`)
	assert.Contains(t, string(sum), `"goodput"`)
	assert.Contains(t, string(sum), `"server_version": "0.9.1"`, "the server's GET /version is kept")
	assert.NotContains(t, string(raw)+string(sum)+stdout, "s3cret")

	// The evidence is never overwritten.
	_, err = runApp(t, nil, "--prompts", writePrompts(t, dir, 5), "--url", srv.URL+"/v1/completions", "--model", "served", "--num-requests", "1", "--output", out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refusing to overwrite")
	assert.Equal(t, int64(4), n.Load())
}

func TestSendRequestsFailureExitsTwo(t *testing.T) {
	dir := t.TempDir()
	srv, _, _ := fakeServer(t, true)
	_, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 3), "--url", srv.URL+"/v1/completions", "--model", "served",
		"--num-requests", "3", "--output", filepath.Join(dir, "r.jsonl"))
	var ec exitCoder
	require.True(t, errors.As(err, &ec), "%v", err)
	assert.Equal(t, 2, ec.code)
	assert.Contains(t, err.Error(), "(the first: request ", "the error says why")
	assert.Contains(t, err.Error(), ": HTTP 500")
	raw, _ := os.ReadFile(filepath.Join(dir, "r.jsonl"))
	assert.Contains(t, string(raw), `"status":500`)
	assert.FileExists(t, filepath.Join(dir, "r.summary.json"))
}

func TestSendRequestsTooFewRowsSendsNothing(t *testing.T) {
	dir := t.TempDir()
	srv, n, _ := fakeServer(t, false)
	_, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 2), "--url", srv.URL+"/v1/completions", "--model", "served",
		"--num-requests", "3", "--output", filepath.Join(dir, "r.jsonl"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only 2")
	assert.Equal(t, int64(0), n.Load())
	assert.NoFileExists(t, filepath.Join(dir, "r.jsonl"))
}

func TestSendRequestsBadFlags(t *testing.T) {
	dir := t.TempDir()
	p := writePrompts(t, dir, 2)
	for _, args := range [][]string{
		{"--slo", "bogus=1"},
		{"--extra-body", "{"},
		{"--extra-body", `{"max_tokens":1}`},
		{"--api-key-env", "UNSET_VAR"},
		{"--num-requests", "0"},
		{"--timeout", "1e10"},  // overflows time.Duration
		{"--timeout", "1e-12"}, // rounds to 0 ns, which meant the 300 s default
	} {
		_, err := runApp(t, nil, append([]string{"--prompts", p, "--model", "m", "--url", "http://127.0.0.1:1/v1/completions", "--output", filepath.Join(dir, "x.jsonl")}, args...)...)
		assert.Error(t, err, "%v", args)
	}
	assert.NoFileExists(t, filepath.Join(dir, "x.jsonl"))
}

// TestSendRequestsSameOutputAndSummary: --summary naming the --output file,
// however spelled, is refused before anything is sent, so the summary can
// never replace the per-request records.
func TestSendRequestsSameOutputAndSummary(t *testing.T) {
	dir := t.TempDir()
	srv, n, _ := fakeServer(t, false)
	prompts := writePrompts(t, dir, 2)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "link")))
	out := filepath.Join(dir, "sub", "r.jsonl")
	for _, summary := range []string{out, filepath.Join(dir, "sub", "..", "sub", "r.jsonl"), filepath.Join(dir, "link", "r.jsonl")} {
		_, err := runApp(t, nil, "--prompts", prompts, "--url", srv.URL+"/v1/completions", "--model", "served",
			"--num-requests", "2", "--output", out, "--summary", summary)
		require.Error(t, err, summary)
		assert.Contains(t, err.Error(), "--output and --summary both name")
		assert.NoFileExists(t, out)
	}
	assert.Equal(t, int64(0), n.Load(), "nothing is sent")
}

// TestSendRequestsSummaryNeverReplacesAFile: a file that appears at the
// summary's path while the run is in flight is kept; the summary is printed
// and the error says where the records are.
func TestSendRequestsSummaryNeverReplacesAFile(t *testing.T) {
	dir := t.TempDir()
	summary := filepath.Join(dir, "r.summary.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r) // the reachability check's GET /v1/models
			return
		}
		os.WriteFile(summary, []byte("someone else's\n"), 0o644)
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	stdout, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 1), "--url", srv.URL+"/v1/completions", "--model", "served",
		"--num-requests", "1", "--output", filepath.Join(dir, "r.jsonl"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refusing to overwrite")
	assert.Contains(t, err.Error(), filepath.Join(dir, "r.jsonl"))
	assert.Contains(t, stdout, `"successful": 1`, "the summary is printed all the same")
	b, _ := os.ReadFile(summary)
	assert.Equal(t, "someone else's\n", string(b))
}

// TestSendRequestsBadFlagsNamedWithoutModel: with no --model, a bad flag
// is still named as the flag, not hidden behind the model lookup on a
// server that is not there.
func TestSendRequestsBadFlagsNamedWithoutModel(t *testing.T) {
	dir := t.TempDir()
	p := writePrompts(t, dir, 2)
	for _, tc := range []struct{ flag, value string }{
		{"--concurrency", "-1"},
		{"--request-rate", "-2"},
		{"--temperature", "-1"},
		{"--url", "ftp://x"},
	} {
		_, err := runApp(t, nil, "--prompts", p, "--num-requests", "2", "--url", "http://127.0.0.1:1/v1/completions", "--output", filepath.Join(dir, "x.jsonl"), tc.flag, tc.value)
		require.Error(t, err, tc.flag)
		assert.True(t, strings.HasPrefix(err.Error(), tc.flag+":"), "%s %s: %v", tc.flag, tc.value, err)
	}
	assert.NoFileExists(t, filepath.Join(dir, "x.jsonl"))
}

// TestSendRequestsUnreachableServer: a server that is not there is an
// error before any output file exists, so the same command works once the
// server is up.
func TestSendRequestsUnreachableServer(t *testing.T) {
	dir := t.TempDir()
	_, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 2), "--num-requests", "2", "--url", "http://127.0.0.1:1/v1/completions",
		"--model", "m", "--output", filepath.Join(dir, "r.jsonl"))
	require.ErrorIs(t, err, loadgen.ErrUnreachable)
	// The advice is this command's, not the sweep's (which has a config).
	assert.NotContains(t, err.Error(), "sweep")
	assert.NotContains(t, err.Error(), "config")
	assert.NoFileExists(t, filepath.Join(dir, "r.jsonl"))
}

// TestSendRequestsExistingOutputRefusedFirst: an --output or summary that
// is already there is refused before the server is contacted, so a
// command that could not keep its results neither waits on a server nor
// sends it anything.
func TestSendRequestsExistingOutputRefusedFirst(t *testing.T) {
	dir := t.TempDir()
	prompts := writePrompts(t, dir, 2)
	out := filepath.Join(dir, "r.jsonl")
	for _, existing := range []string{out, filepath.Join(dir, "r.summary.json")} {
		require.NoError(t, os.WriteFile(existing, []byte("kept\n"), 0o644))
		// No server listens on port 1: had it been asked, the error would
		// be ErrUnreachable.
		_, err := runApp(t, nil, "--prompts", prompts, "--num-requests", "2", "--url", "http://127.0.0.1:1/v1/completions",
			"--model", "m", "--output", out)
		require.Error(t, err, existing)
		assert.NotErrorIs(t, err, loadgen.ErrUnreachable)
		assert.Contains(t, err.Error(), "refusing to overwrite "+existing)
		b, _ := os.ReadFile(existing)
		assert.Equal(t, "kept\n", string(b))
		require.NoError(t, os.Remove(existing))
	}
}

// --request-rate without --concurrency is an open loop with no cap, as
// vllm bench serve's --request-rate without --max-concurrency: the closed
// loop's default of one request in flight would queue every other arrival
// in the client. A --concurrency given (or set through its variable) still
// caps it.
func TestSendRequestsRequestRateUncappedByDefault(t *testing.T) {
	dir := t.TempDir()
	srv, _, _ := fakeServer(t, false)
	prompts := writePrompts(t, dir, 4)
	concurrencyOf := func(name string, env map[string]string, extra ...string) float64 {
		t.Helper()
		out := filepath.Join(dir, name+".jsonl")
		args := append([]string{"--prompts", prompts, "--url", srv.URL + "/v1/completions", "--num-requests", "4",
			"--request-rate", "1000", "--seed", "1", "--output", out}, extra...)
		_, err := runApp(t, env, args...)
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, name+".summary.json"))
		require.NoError(t, err)
		var sum struct {
			Config struct {
				Concurrency float64 `json:"concurrency"`
			} `json:"config"`
		}
		require.NoError(t, json.Unmarshal(b, &sum))
		return sum.Config.Concurrency
	}
	assert.Equal(t, 0.0, concurrencyOf("open", nil), "no cap unless asked for")
	assert.Equal(t, 2.0, concurrencyOf("capped", nil, "--concurrency", "2"))
	t.Setenv("TINYSERVE_CONCURRENCY", "1")
	assert.Equal(t, 1.0, concurrencyOf("env", nil))
}

// The summary keeps what it records as written, as the sweep's run
// summaries and serving-inference's do: encoding/json's HTML escaping
// turned an extra_body stop string and a URL's query into \u003c/s\u003e
// and \u0026, in the file and on stdout.
func TestSendRequestsSummaryNotHTMLEscaped(t *testing.T) {
	dir := t.TempDir()
	srv, _, _ := fakeServer(t, false)
	out := filepath.Join(dir, "c1.jsonl")
	stdout, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 1), "--url", srv.URL+"/v1/completions?a=1&b=2",
		"--num-requests", "1", "--output", out, "--extra-body", `{"stop":["</s>"]}`)
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(dir, "c1.summary.json"))
	require.NoError(t, err)
	for name, text := range map[string]string{"summary file": string(sum), "stdout": stdout} {
		assert.Contains(t, text, `"</s>"`, name)
		assert.Contains(t, text, `/v1/completions?a=1&b=2"`, name)
		assert.NotContains(t, text, `\u00`, name)
	}
	assert.True(t, strings.HasPrefix(stdout, string(sum)), "stdout starts with the file's bytes")
}

// vllm bench serve users spell its default rate, inf (every request at
// once): the error says that this is the closed loop here and which flags
// give it, rather than that inf is not a positive number.
func TestSendRequestsRequestRateInf(t *testing.T) {
	dir := t.TempDir()
	srv, n, _ := fakeServer(t, false)
	_, err := runApp(t, nil, "--prompts", writePrompts(t, dir, 2), "--url", srv.URL+"/v1/completions",
		"--num-requests", "2", "--request-rate", "inf", "--output", filepath.Join(dir, "o.jsonl"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--request-rate: inf (every request at once, as in vllm bench serve) is the closed loop here: leave the rate out and set concurrency")
	assert.Equal(t, int64(0), n.Load())
}
