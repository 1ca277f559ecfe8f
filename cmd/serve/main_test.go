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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/drainwait"
	"github.com/tinyserve/tinyserve/internal/syncbuf"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/openai"
)

// TestDrainOnShutdown: when the context ends (what SIGTERM does), health and
// new requests answer 503 while an accepted stream runs to its end, then run
// returns nil.
func TestDrainOnShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	runErr := make(chan error, 1)
	cfg := tinyserve.Config{Backend: tinyserve.BackendMock, MockLatency: mock.Latency{PerStep: 3 * time.Millisecond}}
	go func() {
		runErr <- run(ctx, cfg, serveOptions{
			addr: "127.0.0.1:0", drainTimeout: 10 * time.Second,
			logger: slog.New(slog.DiscardHandler), ready: func(a net.Addr) { addrc <- a },
		})
	}()
	base := "http://" + (<-addrc).String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	resp, err := client.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"drain me","max_tokens":100,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "data: {"), first)

	cancel() // SIGTERM
	require.Eventually(t, func() bool {
		r, err := client.Get(base + "/health")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 503
	}, 5*time.Second, time.Millisecond, "health turns 503 at once")
	r, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"late"}`))
	require.NoError(t, err, "the listener stays open while accepted requests finish")
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	assert.Equal(t, 503, r.StatusCode, string(b))

	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(rest), "data: [DONE]\n\n"), "the accepted stream ends normally")
	assert.Contains(t, string(rest), `"completion_tokens":100`)
	require.NoError(t, <-runErr)
}

// TestDrainTimeout: requests still running when the drain timeout expires
// end the way a closed engine ends them, not with a torn connection: a
// stream gets an error event and [DONE], a JSON request a 503 error body.
func TestDrainTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	runErr := make(chan error, 1)
	var logs syncbuf.Buffer
	// 3000 tokens at 3 ms a step or more: far longer than the drain timeout.
	cfg := tinyserve.Config{Backend: tinyserve.BackendMock, MockLatency: mock.Latency{PerStep: 3 * time.Millisecond}}
	go func() {
		runErr <- run(ctx, cfg, serveOptions{
			addr: "127.0.0.1:0", drainTimeout: 100 * time.Millisecond,
			logger: slog.New(slog.NewTextHandler(&logs, nil)), ready: func(a net.Addr) { addrc <- a },
		})
	}()
	base := "http://" + (<-addrc).String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	stream, err := client.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"long","max_tokens":3000,"temperature":0,"stream":true}`))
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, 200, stream.StatusCode)
	type reply struct {
		status int
		body   string
		err    error
	}
	plain := make(chan reply, 1)
	go func() {
		r, err := client.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"long too","max_tokens":3000,"temperature":0}`))
		if err != nil {
			plain <- reply{err: err}
			return
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		plain <- reply{r.StatusCode, string(b), err}
	}()
	require.Eventually(t, func() bool { return runningRequests(client, base) == 2 }, 10*time.Second, time.Millisecond,
		"both requests are admitted before the drain starts")

	cancel() // SIGTERM
	rest, err := io.ReadAll(stream.Body)
	require.NoError(t, err, "the stream is not torn")
	evs := strings.Split(strings.TrimSuffix(string(rest), "\n\n"), "\n\n")
	require.GreaterOrEqual(t, len(evs), 2, string(rest))
	assert.Equal(t, "data: [DONE]", evs[len(evs)-1])
	assert.Contains(t, evs[len(evs)-2], `"code":"engine_closed"`)

	p := <-plain
	require.NoError(t, p.err)
	assert.Equal(t, 503, p.status, p.body)
	assert.Contains(t, p.body, `"code":"engine_closed"`)

	require.NoError(t, <-runErr)
	assert.Contains(t, logs.String(), "drain timed out")
	assert.NotContains(t, logs.String(), "client went away", "the clients stayed")
}

// TestDrainWaitsForSlowReaders: the engine finishing a request is not its
// client having it. Events wait in the handler's queue, so a client that
// reads slowly is still taking an answer the engine finished long ago;
// that answer must be written out within --drain-timeout, not cut a short
// grace after the engine drained.
func TestDrainWaitsForSlowReaders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	runErr := make(chan error, 1)
	var logs syncbuf.Buffer
	go func() {
		runErr <- run(ctx, tinyserve.Config{Backend: tinyserve.BackendMock}, serveOptions{
			addr: "127.0.0.1:0", drainTimeout: time.Minute, shutdownGrace: 10 * time.Millisecond,
			logger: slog.New(slog.NewTextHandler(&logs, nil)), ready: func(a net.Addr) { addrc <- a },
		})
	}()
	base := "http://" + (<-addrc).String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	slow := drainwait.SlowClient()
	// Some 9 MB of events: more than twice what the socket buffers hold.
	resp, err := slow.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"slow reader","max_tokens":4000,"n":4,"logprobs":20,"top_k":1,"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Eventually(t, func() bool {
		return runningRequests(client, base) == 0 && metric(client, base, "vllm:num_requests_waiting") == 0
	}, 10*time.Second, time.Millisecond, "the engine finishes the request")
	require.NotContains(t, logs.String(), "method=POST", "the handler is still writing the answer")

	cancel() // SIGTERM: the engine has nothing left, so the drain ends at once
	drainwait.RequireAnswerDelivered(t, runErr, resp.Body)
	assert.NotContains(t, logs.String(), "shutdown cut short")
}

// runningRequests reads vllm:num_requests_running from /metrics, or -1.
func runningRequests(client *http.Client, base string) int {
	return metric(client, base, "vllm:num_requests_running")
}

// metric reads one of the handler's unlabelled (but for model_name) metrics
// from /metrics, as an integer, or -1.
func metric(client *http.Client, base, name string) int {
	r, err := client.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*\} (\d+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestSIGTERM runs the real command line: flags from the environment, the
// runtime collectors on /metrics, and a clean exit on SIGTERM.
func TestSIGTERM(t *testing.T) {
	t.Setenv("TINYSERVE_SERVED_MODEL_NAME", "from-env")
	t.Setenv("TINYSERVE_BACKEND", "mock")
	t.Setenv("TINYSERVE_API_KEY", "s3cret,other") // /v1/ wants one; probes and metrics do not
	var logs syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- newApp(&logs).Run([]string{"tinyserve-serve", "--port", "0", "--log-format", "json", "--drain-timeout", "5s"})
	}()
	addrRE := regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`)
	var addr string
	require.Eventually(t, func() bool {
		m := addrRE.FindStringSubmatch(logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 10*time.Second, time.Millisecond, "logs: %s", logs.String())
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	withKey := func(method, path, body, key string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		r, err := client.Do(req)
		require.NoError(t, err)
		return r
	}
	r := withKey("GET", "/v1/models", "", "")
	r.Body.Close()
	assert.Equal(t, 401, r.StatusCode, "no API key")
	r = withKey("GET", "/v1/models", "", "other")
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&models))
	r.Body.Close()
	require.Len(t, models.Data, 1)
	assert.Equal(t, "from-env", models.Data[0].ID)

	r = withKey("POST", "/v1/completions", `{"prompt":"hi","max_tokens":3,"temperature":0}`, "s3cret")
	r.Body.Close()
	assert.Equal(t, 200, r.StatusCode)
	assert.NotEmpty(t, r.Header.Get("X-Request-ID"))

	r, err := client.Get(base + "/metrics")
	require.NoError(t, err)
	m, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total", `vllm:request_success_total{finished_reason="length",model_name="from-env"} 1`} {
		assert.Contains(t, string(m), want)
	}

	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	require.NoError(t, newApp(io.Discard).Run([]string{"tinyserve-serve", "--host", "0.0.0.0", "--port", port, "health"}),
		"the HEALTHCHECK command sees a healthy server")

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	for _, want := range []string{`"msg":"shutting down: draining"`, `"msg":"stopped"`} {
		assert.Contains(t, logs.String(), want)
	}
	// Every access log line names its request.
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"http request"`) {
			assert.Contains(t, line, `"request_id":`)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  [2]string
		want string
	}{
		{[]string{"--log-format", "xml"}, [2]string{}, "--log-format"},
		{[]string{"--log-level", "loud"}, [2]string{}, "--log-level"},
		{[]string{"--port", "70000"}, [2]string{}, "--port"},
		{[]string{"--drain-timeout", "0s"}, [2]string{}, "--drain-timeout"},
		{nil, [2]string{"TINYSERVE_MAX_NUM_SEQS", "-1"}, "max-num-seqs"},
		{nil, [2]string{"TINYSERVE_LOG_FORMAT", "yaml"}, "--log-format"},
		{[]string{"--backend", "tpu"}, [2]string{}, "unknown backend"},
		// Stray arguments are refused before anything else is checked
		// (so that, without the check, these fail fast rather than serve).
		{[]string{"--backend", "tpu", "stray"}, [2]string{}, `unexpected arguments ["stray"]`},
		{[]string{"healt"}, [2]string{"TINYSERVE_BACKEND", "tpu"}, "the only command is health"},
		{[]string{"health", "extra", "--port", "1"}, [2]string{}, `health: unexpected arguments ["extra" "--port" "1"]`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " ")+tc.env[0], func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			var logs syncbuf.Buffer
			args := append([]string{"tinyserve-serve", "--port", "0"}, tc.args...)
			err := newApp(&logs).Run(args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestHealthCommandFails(t *testing.T) {
	_, port := freeAddr(t)
	err := newApp(io.Discard).Run([]string{"tinyserve-serve", "--port", port, "health"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "health")
}

// TestHealthCommandFlagOrder: --host and --port work before the command
// name, after it (which wins), and from the environment.
func TestHealthCommandFlagOrder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	_, up, _ := net.SplitHostPort(srv.Listener.Addr().String())
	_, down := freeAddr(t)

	tests := []struct {
		name string
		args []string
		env  string // TINYSERVE_PORT, when set
		ok   bool
	}{
		{"before", []string{"--port", up, "health"}, "", true},
		{"after", []string{"health", "--port", up}, "", true},
		{"host and port after", []string{"health", "--host", "127.0.0.1", "--port", up}, "", true},
		{"after wins", []string{"--port", down, "health", "--port", up}, "", true},
		{"after wins when down", []string{"--port", up, "health", "--port", down}, "", false},
		{"environment", []string{"health"}, up, true},
		{"flag after beats environment", []string{"health", "--port", down}, up, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("TINYSERVE_PORT", tc.env)
			}
			err := newApp(io.Discard).Run(append([]string{"tinyserve-serve"}, tc.args...))
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "health")
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	app := newApp(io.Discard)
	app.Writer = &out
	if err := app.Run([]string{"tinyserve-serve", "--version"}); err != nil {
		t.Fatal(err)
	}
	if want := "tinyserve-serve version " + openai.Version() + "\n"; out.String() != want {
		t.Errorf("--version printed %q, want %q", out.String(), want)
	}
}

// TestEnvironmentSettingsNamed: a setting refused because it came from a
// forgotten TINYSERVE_ variable is traceable: the log names every such
// variable set (never its value, which may be an API key) before the error.
func TestEnvironmentSettingsNamed(t *testing.T) {
	t.Setenv("TINYSERVE_BACKEND", "mock")
	t.Setenv("TINYSERVE_DTYPE", "float16")
	t.Setenv("TINYSERVE_API_KEY", "s3cret")
	t.Setenv("TINYSERVE_SWEEP_ENGINE", "backend=cpu") // cmd/sweep's: no setting here
	var logs syncbuf.Buffer
	err := newApp(&logs).Run([]string{"tinyserve-serve", "--port", "0"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dtype (--dtype) float16 does not apply to the mock backend")
	assert.Contains(t, logs.String(), "settings from the environment")
	for _, name := range []string{"TINYSERVE_API_KEY", "TINYSERVE_BACKEND", "TINYSERVE_DTYPE"} {
		assert.Contains(t, logs.String(), name)
	}
	assert.NotContains(t, logs.String(), "s3cret")
	assert.NotContains(t, logs.String(), "TINYSERVE_SWEEP_ENGINE")
}

// TestModelFirst: `tinyserve-serve MODEL [flags]`, as `vllm serve MODEL`,
// reads every flag after the model; so does a model after some or all of
// the flags, which vllm serve also takes; the model given twice is
// refused.
func TestModelFirst(t *testing.T) {
	app := newApp(io.Discard)
	flags := app.Flags
	// main's reordering: cli.Reorder with the model as the first argument.
	modelFirst := func(in []string, flags []cli.Flag) ([]string, error) {
		return tcli.Reorder(in, flags, app.Commands, "model")
	}
	tests := []struct {
		in, want []string
		err      string
	}{
		{[]string{"s"}, []string{"s"}, ""},
		{[]string{"s", "gpt2", "--port", "8001"}, []string{"s", "--model", "gpt2", "--port", "8001"}, ""},
		{[]string{"s", "--port", "8001", "gpt2"}, []string{"s", "--model", "gpt2", "--port", "8001"}, ""},
		{[]string{"s", "--port", "8001", "gpt2", "--max-num-seqs", "4"}, []string{"s", "--model", "gpt2", "--port", "8001", "--max-num-seqs", "4"}, ""},
		{[]string{"s", "--port=8001", "--enable-prefix-caching", "gpt2"}, []string{"s", "--model", "gpt2", "--port=8001", "--enable-prefix-caching"}, ""},
		{[]string{"s", "--served-model-name", "m", "-port", "1"}, []string{"s", "--served-model-name", "m", "-port", "1"}, ""}, // flag values are not the model
		{[]string{"s", "health", "--port", "1"}, []string{"s", "health", "--port", "1"}, ""},
		{[]string{"s", "--port", "8001", "health"}, []string{"s", "--port", "8001", "health"}, ""},
		{[]string{"s", "--enforce-eager", "health"}, []string{"s", "--enforce-eager", "health"}, ""},
		// vLLM's flags: booleans take no value, -tp takes one.
		{[]string{"s", "--disable-log-requests", "--enforce-eager", "gpt2", "-tp", "1"}, []string{"s", "--model", "gpt2", "--disable-log-requests", "--enforce-eager", "-tp", "1"}, ""},
		{[]string{"s", "-tp", "1", "gpt2"}, []string{"s", "--model", "gpt2", "-tp", "1"}, ""},
		{[]string{"s", "--disable-uvicorn-access-log", "--no-enable-log-requests", "gpt2", "--uvicorn-log-level", "warning"}, []string{"s", "--model", "gpt2", "--disable-uvicorn-access-log", "--no-enable-log-requests", "--uvicorn-log-level", "warning"}, ""},
		{[]string{"s", "--uvicorn-log-level", "warning", "--max-logprobs", "20", "--tokenizer-mode", "auto", "--seed", "0", "gpt2"}, []string{"s", "--model", "gpt2", "--uvicorn-log-level", "warning", "--max-logprobs", "20", "--tokenizer-mode", "auto", "--seed", "0"}, ""},
		{[]string{"s", "help"}, []string{"s", "help"}, ""},
		{[]string{"s", "--help"}, []string{"s", "--help"}, ""},
		{[]string{"s", "gpt2", "--model", "tiny-gpt2"}, nil, `the model is given twice: "gpt2" and --model`},
		{[]string{"s", "gpt2", "--model=tiny-gpt2"}, nil, "given twice"},
		{[]string{"s", "--model", "tiny-gpt2", "gpt2"}, nil, "given twice"},
	}
	for _, tt := range tests {
		got, err := modelFirst(tt.in, flags)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("modelFirst(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("modelFirst(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	// The flags after the model are read: a bad one among them is refused.
	for _, in := range [][]string{
		{"tinyserve-serve", "tiny-gpt2", "--port", "0", "--log-format", "xml"},
		{"tinyserve-serve", "--port", "0", "tiny-gpt2", "--log-format", "xml"},
	} {
		args, err := modelFirst(in, flags)
		require.NoError(t, err)
		err = newApp(io.Discard).Run(args)
		require.Error(t, err, "%q", in)
		assert.Contains(t, err.Error(), "--log-format", "%q", in)
	}
}

// TestVLLMFlags: vLLM's flags are accepted with the values tinyserve
// honours (the run then gets as far as opening the engine, whose refusal
// of an unknown backend shows it), and refused, naming the flag and why,
// with any other value or with a tinyserve flag they contradict.
func TestVLLMFlags(t *testing.T) {
	const reachedOpen = "unknown backend"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--disable-log-requests", "--disable-log-stats", "--trust-remote-code", "--enforce-eager", "--enable-chunked-prefill", "--no-enable-prefix-caching"}, reachedOpen},
		{[]string{"-tp", "1", "--pipeline-parallel-size", "1", "-dp", "1", "--kv-cache-dtype", "auto", "--load-format", "auto", "--scheduling-policy", "fcfs"}, reachedOpen},
		{[]string{"--no-enable-prefix-caching", "--enable-prefix-caching"}, "contradict"},
		{[]string{"--enable-log-requests"}, "never logs prompts"},
		{[]string{"-tp", "2"}, "--tensor-parallel-size 2: tinyserve runs one model on one device"},
		{[]string{"--tensor-parallel-size", "4"}, "--tensor-parallel-size 4"},
		{[]string{"-pp", "2"}, "--pipeline-parallel-size 2"},
		{[]string{"--data-parallel-size", "0"}, "--data-parallel-size 0"},
		{[]string{"--kv-cache-dtype", "fp8"}, `--kv-cache-dtype "fp8": only auto`},
		{[]string{"--load-format", "dummy"}, reachedOpen}, // an engine flag: Open reads it
		{[]string{"--scheduling-policy", "priority"}, `--scheduling-policy "priority"`},
		{[]string{"--seed", "0"}, reachedOpen},
		// --flag=false asks for the opposite, refused where tinyserve
		// does not do it.
		{[]string{"--enable-chunked-prefill=false"}, "--enable-chunked-prefill=false: prefill is always chunked"},
		{[]string{"--enable-chunked-prefill=False"}, "--enable-chunked-prefill=false"},
		{[]string{"--enforce-eager=false"}, reachedOpen}, // tinyserve's own flag now: CUDA graphs, the default
		{[]string{"--no-enable-prefix-caching=false"}, "--no-enable-prefix-caching=false"},
		{[]string{"--no-enable-prefix-caching=false", "--enable-prefix-caching"}, reachedOpen},
		{[]string{"--disable-log-requests=false"}, "--disable-log-requests=false: tinyserve never logs prompts"},
		{[]string{"--disable-log-stats=false"}, "--disable-log-stats=false"},
		{[]string{"--trust-remote-code=false", "--enable-log-requests=false"}, reachedOpen},
		{[]string{"--no-enable-log-requests", "--disable-uvicorn-access-log", "--uvicorn-log-level", "warning", "--max-logprobs", "20", "--tokenizer-mode", "auto"}, reachedOpen},
		{[]string{"--tokenizer-mode", "hf", "--uvicorn-log-level", "trace", "--disable-uvicorn-access-log=false"}, reachedOpen},
		{[]string{"--no-enable-log-requests=false"}, "--no-enable-log-requests=false: tinyserve never logs prompts"},
		{[]string{"--max-logprobs", "5"}, "--max-logprobs 5: only 20 is accepted"},
		{[]string{"--max-logprobs", "-1"}, "--max-logprobs -1"},
		{[]string{"--uvicorn-log-level", "verbose"}, `--uvicorn-log-level "verbose"`},
		{[]string{"--tokenizer-mode", "slow"}, `--tokenizer-mode "slow": only auto and hf`},
		{[]string{"--tokenizer-mode", "mistral"}, `--tokenizer-mode "mistral"`},
		{[]string{"--seed", "-1"}, "--seed must not be negative"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"tinyserve-serve", "--port", "0", "--backend", "tpu"}, tc.args...)
			err := newApp(io.Discard).Run(args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestSeedFlag: --seed (or TINYSERVE_SEED) sets the engine's seed, 0
// included; without it the engine seeds from the clock.
func TestSeedFlag(t *testing.T) {
	read := func(args ...string) *uint64 {
		t.Helper()
		var seed *uint64
		app := newApp(io.Discard)
		app.Action = func(c *cli.Context) error {
			cfg, err := engineConfig(c)
			seed = cfg.Seed
			return err
		}
		require.NoError(t, app.Run(append([]string{"tinyserve-serve"}, args...)))
		return seed
	}
	assert.Nil(t, read())
	if s := read("--seed", "0"); assert.NotNil(t, s) {
		assert.Equal(t, uint64(0), *s)
	}
	if s := read("--seed", "42"); assert.NotNil(t, s) {
		assert.Equal(t, uint64(42), *s)
	}
	t.Setenv("TINYSERVE_SEED", "7")
	if s := read(); assert.NotNil(t, s) {
		assert.Equal(t, uint64(7), *s)
	}
}

// TestAccessLogFlags: --disable-uvicorn-access-log, or an
// --uvicorn-log-level above info (uvicorn's access lines are info lines),
// leaves the "http request" lines out of a running server's log, and only
// them; an --uvicorn-log-level given keeps them under a quieter --log-level.
func TestAccessLogFlags(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  bool
	}{
		{nil, true},
		{[]string{"--uvicorn-log-level", "debug"}, true},
		{[]string{"--disable-uvicorn-access-log"}, false},
		{[]string{"--uvicorn-log-level", "warning"}, false},
		{[]string{"--uvicorn-log-level", "critical"}, false},
		// --log-level hides them, unless --uvicorn-log-level asks for them
		// apart from it, as uvicorn's level is apart from vLLM's.
		{[]string{"--log-level", "warn"}, false},
		{[]string{"--log-level", "warn", "--uvicorn-log-level", "info"}, true},
		{[]string{"--log-level", "warn", "--uvicorn-log-level", "debug", "--disable-uvicorn-access-log"}, false},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			var logs syncbuf.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			// A port picked beforehand: under --log-level warn no
			// "listening" line says which one a port 0 got.
			addr, port := freeAddr(t)
			go func() {
				args := append([]string{"tinyserve-serve", "--backend", "mock", "--host", "127.0.0.1", "--port", port, "--log-format", "json", "--drain-timeout", "5s"}, tc.flags...)
				done <- newApp(&logs).RunContext(ctx, args)
			}()
			waitHealthy(t, addr)
			r, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":2}`))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			require.Equal(t, 200, r.StatusCode)
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("no exit after the context ended")
			}
			assert.Equal(t, tc.want, strings.Contains(logs.String(), `"msg":"http request"`), "logs: %s", logs.String())
			if tc.want {
				assert.Regexp(t, `"msg":"http request","request_id":"[0-9a-f]{32}"`, logs.String(), "the access line names its request")
			}
			if !slices.Contains(tc.flags, "warn") {
				assert.Contains(t, logs.String(), `"msg":"stopped"`, "the server's own lines stay")
			}
		})
	}
}

// TestMoreServedNames: the words after --served-model-name NAME, up to the
// next flag, are more names of the model, as vllm serve's flag takes
// several; the = form takes one, and a repeated flag keeps its last.
func TestMoreServedNames(t *testing.T) {
	for _, tc := range []struct {
		in, rest, more []string
	}{
		{[]string{"s", "gpt2", "--served-model-name", "a"}, []string{"s", "gpt2", "--served-model-name", "a"}, nil},
		{[]string{"s", "gpt2", "--served-model-name", "a", "b", "c", "--port", "1"}, []string{"s", "gpt2", "--served-model-name", "a", "--port", "1"}, []string{"b", "c"}},
		{[]string{"s", "--served-model-name", "a", "b"}, []string{"s", "--served-model-name", "a"}, []string{"b"}},
		{[]string{"s", "gpt2", "-served-model-name", "a", "b"}, []string{"s", "gpt2", "-served-model-name", "a"}, []string{"b"}},
		{[]string{"s", "--served-model-name=a", "gpt2"}, []string{"s", "--served-model-name=a", "gpt2"}, nil},
		{[]string{"s", "gpt2", "--served-model-name", "a", "b", "--served-model-name", "c"}, []string{"s", "gpt2", "--served-model-name", "a", "--served-model-name", "c"}, []string{}},
		{[]string{"s", "--served-model-name", "a", "health"}, []string{"s", "--served-model-name", "a", "health"}, nil},
		{[]string{"s", "--served-model-name"}, []string{"s", "--served-model-name"}, nil},
	} {
		rest, more := moreServedNames(tc.in)
		assert.Equal(t, tc.rest, rest, "%q", tc.in)
		assert.Equal(t, len(tc.more), len(more), "%q: %q", tc.in, more)
		if len(tc.more) > 0 {
			assert.Equal(t, tc.more, more, "%q", tc.in)
		}
	}
}

// TestSeveralServedNames: a server given more names answers to each and
// lists each in /v1/models, the first in its responses; more names without
// a model are refused rather than one of them guessed to be the model.
func TestSeveralServedNames(t *testing.T) {
	addr, port := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		app := newApp(io.Discard)
		app.Metadata = map[string]any{moreNamesKey: []string{"beta", "org/gamma"}}
		done <- app.RunContext(ctx, []string{"s", "--model", "mock", "--backend", "mock", "--served-model-name", "alpha",
			"--host", "127.0.0.1", "--port", port, "--drain-timeout", "5s"})
	}()
	waitHealthy(t, addr)
	r, err := http.Get("http://" + addr + "/v1/models")
	require.NoError(t, err)
	var list struct{ Data []struct{ ID string } }
	require.NoError(t, json.NewDecoder(r.Body).Decode(&list))
	r.Body.Close()
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	assert.Equal(t, []string{"alpha", "beta", "org/gamma"}, ids)
	for _, name := range []string{"alpha", "beta", "org/gamma"} {
		r, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":2,"model":"`+name+`"}`))
		require.NoError(t, err)
		var resp struct{ Model string }
		require.NoError(t, json.NewDecoder(r.Body).Decode(&resp))
		r.Body.Close()
		assert.Equal(t, 200, r.StatusCode, name)
		assert.Equal(t, "alpha", resp.Model, "responses carry the first name")
	}
	cancel()
	require.NoError(t, <-done)

	app := newApp(io.Discard)
	app.Metadata = map[string]any{moreNamesKey: []string{"gpt2"}}
	err = app.Run([]string{"s", "--backend", "mock", "--served-model-name", "alpha", "--port", "0"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--served-model-name took ["gpt2"] as more names of the model`)
}

// freeAddr picks a loopback port that nothing listens on now, for a server
// whose log may not say which port 0 got.
func freeAddr(t *testing.T) (addr, port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr = ln.Addr().String()
	_, port, _ = net.SplitHostPort(addr)
	require.NoError(t, ln.Close())
	return addr, port
}

// waitHealthy waits until the server at addr answers GET /health with 200.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	}, 10*time.Second, 5*time.Millisecond, "the server at %s did not start", addr)
}

func TestAPIKeysFallBackToVLLMAPIKey(t *testing.T) {
	assert.Empty(t, apiKeys(nil, ""))
	assert.Empty(t, apiKeys([]string{""}, ""))
	assert.Equal(t, []string{"v"}, apiKeys(nil, "v"), "VLLM_API_KEY alone is required, as vllm serve requires it")
	assert.Equal(t, []string{"a,b"}, apiKeys(nil, "a,b"), "VLLM_API_KEY is one key")
	assert.Equal(t, []string{"a", "b"}, apiKeys([]string{"a", "", "b"}, "v"), "--api-key takes precedence")
}

// TestPortInUseRefusedBeforeLoading: a port already taken is refused before
// the model loads (before, a model loaded for nothing first): the error
// names the address and no "engine ready" line is logged.
func TestPortInUseRefusedBeforeLoading(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	var logs syncbuf.Buffer
	err = run(context.Background(), tinyserve.Config{Backend: tinyserve.BackendMock}, serveOptions{
		addr: held.Addr().String(), drainTimeout: time.Second,
		logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), held.Addr().String())
	assert.Contains(t, err.Error(), "before loading the model")
	assert.NotContains(t, logs.String(), "engine ready", "the model was loaded first")
}

// TestUnknownFlagOneLine: a mistyped flag gets one line naming the nearest
// flag (and the JSON spelling is recognised), not the 68 lines of help
// (internal/clihint's test checks that no help is printed).
func TestUnknownFlagOneLine(t *testing.T) {
	for typed, want := range map[string]string{
		"--max-num-seq":  "did you mean --max-num-seqs?",
		"--max_num_seqs": "the flag is --max-num-seqs",
	} {
		var logs syncbuf.Buffer
		err := newApp(&logs).Run([]string{"tinyserve-serve", typed, "4"})
		require.Error(t, err, typed)
		assert.Contains(t, err.Error(), want, typed)
	}
}
