package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "line %s", l)
		out = append(out, m)
	}
	return out
}

func TestRunConditionStreaming(t *testing.T) {
	f := newFakeServer(t, &fakeServer{TokenTime: time.Millisecond})
	var out bytes.Buffer
	var progress []int
	opts := LoadOptions{URL: f.URL(), Model: "m", Concurrency: 3, Stream: true, IgnoreEOS: true,
		APIKey: "sekret-key", ExtraBody: json.RawMessage(`{"top_k":5}`), Progress: func(d int) { progress = append(progress, d) },
		SLO: SLO{TTFTS: 10}}
	sum, recs, err := RunCondition(context.Background(), opts, testRows(7, 4), &out)
	require.NoError(t, err)
	require.Len(t, recs, 7)
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, progress)
	// Three slots open three connections, and keep them for the rest.
	assert.Equal(t, Counts{Attempted: 7, Successful: 7, Failed: 0, OutputTokens: 28, NewConnections: 3}, sum.Counts)
	require.NotNil(t, sum.MeanInFlight)
	assert.True(t, *sum.MeanInFlight > 0 && *sum.MeanInFlight <= 3, "mean in flight %g", *sum.MeanInFlight)
	assert.Equal(t, 3, sum.Config.Concurrency)
	assert.Equal(t, 7, sum.LatencyS.Count)
	assert.Equal(t, 7, sum.TTFTS.Count)
	assert.Equal(t, 7, sum.TPOTS.Count)
	assert.Equal(t, 21, sum.InterChunkS.Count)
	require.NotNil(t, sum.Goodput)
	assert.Equal(t, 7, sum.Goodput.Met)
	assert.NotContains(t, out.String(), "sekret")

	lines := decodeLines(t, out.Bytes())
	require.Len(t, lines, 7)
	seen := map[float64]bool{}
	for _, l := range lines {
		seen[l["request_index"].(float64)] = true
		assert.Equal(t, "1.0", l["schema_version"])
		assert.Equal(t, 200.0, l["status"])
		assert.Equal(t, 4.0, l["output_tokens"])
		assert.Equal(t, 3.0, l["prompt_tokens"], "server usage replaces the file's prompt_tokens")
		assert.Equal(t, 10.0, l["target_prompt_tokens"])
		assert.Equal(t, 4.0, l["target_output_tokens"])
		assert.Equal(t, true, l["server_token_usage_present"])
		assert.Equal(t, "length", l["finish_reason"])
		assert.Equal(t, 4.0, l["stream_text_event_count"])
		assert.Equal(t, 0.0, l["malformed_stream_events"])
		assert.Equal(t, "short", l["bucket"])
		assert.Equal(t, "w", l["workload"])
		assert.Len(t, l["observed_inter_chunk_latency_s"], 3)
		assert.NotContains(t, l, "response")
		assert.NotContains(t, l, "error")
		lat, ttft := l["latency_s"].(float64), l["ttft_s"].(float64)
		assert.Greater(t, lat, 0.0)
		assert.LessOrEqual(t, ttft, lat)
		assert.InDelta(t, l["ended_offset_s"].(float64)-l["started_offset_s"].(float64), lat, 1e-6)
		assert.GreaterOrEqual(t, l["client_queue_s"].(float64), 0.0)
		assert.True(t, strings.HasPrefix(l["x_request_id"].(string), "sweep-"))
	}
	assert.Len(t, seen, 7, "every request index exactly once")

	require.Len(t, f.Bodies, 7)
	b := f.Bodies[0]
	assert.Equal(t, "m", b["model"])
	assert.Equal(t, 4.0, b["max_tokens"])
	assert.Equal(t, true, b["ignore_eos"])
	assert.Equal(t, 5.0, b["top_k"])
	assert.Equal(t, map[string]any{"include_usage": true}, b["stream_options"])
	assert.Equal(t, "Bearer sekret-key", f.Headers[0].Get("Authorization"))
	assert.NotEmpty(t, f.Headers[0].Get("X-Request-Id"))
}

func TestRunConditionConcurrencyBound(t *testing.T) {
	var inFlight, peak int64
	var mu = make(chan struct{}, 1)
	f := &fakeServer{TokenTime: 2 * time.Millisecond}
	f.Hook = func(int64) {
		mu <- struct{}{}
		inFlight++
		peak = max(peak, inFlight)
		<-mu
		time.Sleep(5 * time.Millisecond)
		mu <- struct{}{}
		inFlight--
		<-mu
	}
	newFakeServer(t, f)
	_, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 2, Stream: true}, testRows(8, 2), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), peak)
	queued := 0
	for _, r := range recs {
		if r.ClientQueueS > 0.004 {
			queued++
		}
	}
	assert.GreaterOrEqual(t, queued, 5, "later requests wait for a slot and say so")
}

func TestRunConditionFailures(t *testing.T) {
	f := newFakeServer(t, &fakeServer{Fail: func(n int64, b map[string]any) int {
		if strings.HasSuffix(b["prompt"].(string), " 1") {
			return 400
		}
		return 0
	}})
	var out bytes.Buffer
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 1, Stream: true}, testRows(3, 2), &out)
	require.NoError(t, err, "HTTP failures are evidence, not a client error")
	assert.Equal(t, 1, sum.Counts.Failed)
	assert.Equal(t, 2, sum.Counts.Successful)
	var failed map[string]any
	for _, l := range decodeLines(t, out.Bytes()) {
		if l["status"] != 200.0 {
			failed = l
		}
	}
	require.NotNil(t, failed)
	assert.Equal(t, 400.0, failed["status"])
	assert.Contains(t, failed["error_body"], "injected failure")
	assert.Equal(t, false, failed["error_body_truncated"])
	assert.Nil(t, failed["ttft_s"])
	assert.Equal(t, false, failed["server_token_usage_present"])
	_ = recs
}

// TestRunConditionNonAnswers: a 200 whose body is not an answer is a
// failure with a clear error, never a fast success that would enter the
// latency percentiles and raise the request rate. Its status stays 200 and
// its stream counts stay, as evidence.
func TestRunConditionNonAnswers(t *testing.T) {
	const text = "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n"
	const usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n"
	const done = "data: [DONE]\n\n"
	cases := []struct {
		name   string
		stream bool
		body   string
		err    string // "" for a success
	}{
		{"stream ok", true, text + usage + done, ""},
		{"stream only done", true, done, ErrNoContent},
		{"stream usage but no text", true, usage + done, ErrNoContent},
		{"stream error object", true, text + "data: {\"error\":{\"object\":\"error\",\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\n" + done, ErrPrefixServer + "engine died"},
		{"stream without done", true, text + text + usage, ErrNoDone},
		{"stream empty body", true, "", ErrNoDone},
		// A chunk the client cannot read may have held the first token: its
		// TTFT would be wrong without saying so.
		{"stream malformed chunk", true, "data: {\"choices\":[{\"text\":\"a\"\n\n" + text + usage + done, ErrPrefixMalformed + "1 data line was not a JSON object"},
		{"json ok", false, `{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"completion_tokens":1}}`, ""},
		{"json error object", false, `{"error":{"message":"bad things","type":"BadRequestError"}}`, ErrPrefixServer + "bad things"},
		{"json not json", false, `<html>ok</html>`, ErrPrefixNotCompletion + "invalid JSON"},
		{"json no choices", false, `{"choices":[]}`, ErrPrefixNotCompletion + "no choices"},
		{"json null", false, `null`, ErrPrefixNotCompletion + "no choices"},
		{"json empty text unfinished", false, `{"choices":[{"text":"","finish_reason":null}]}`, ErrNoContent},
		// An empty answer that finished (an immediate EOS or stop string)
		// is an answer, as in vLLM's benchmark.
		{"json empty text finished", false, `{"choices":[{"text":"","finish_reason":"stop"}]}`, ""},
		{"stream empty text finished", true, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n" + done, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			var out bytes.Buffer
			sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1, Stream: c.stream, SLO: SLO{LatencyS: 60}}, testRows(1, 2), &out)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			r := recs[0]
			assert.Equal(t, Status(200), r.Status, "the HTTP status is kept")
			if c.err == "" {
				assert.True(t, r.OK())
				assert.Nil(t, r.Error)
				assert.Equal(t, 1, sum.Counts.Successful)
				return
			}
			assert.False(t, r.OK())
			require.NotNil(t, r.Error)
			assert.True(t, strings.HasPrefix(*r.Error, c.err), "error %q, want it to start with %q", *r.Error, c.err)
			assert.Equal(t, Counts{Attempted: 1, Failed: 1, NewConnections: 1}, sum.Counts)
			assert.Zero(t, sum.LatencyS.Count, "a non-answer never enters the latency distribution")
			assert.Zero(t, *sum.RequestThroughput)
			assert.Zero(t, sum.Goodput.Met)
			if c.stream {
				assert.NotNil(t, r.StreamTextEventCount, "stream evidence is kept")
			}
			line := decodeLines(t, out.Bytes())[0]
			assert.Equal(t, 200.0, line["status"])
			assert.Equal(t, *r.Error, line["error"])
		})
	}
}

// A server that ignores stream: true and answers with one JSON body: no
// TTFT or gaps can be measured, and the recorded reason says why rather
// than blaming a missing [DONE].
func TestRunConditionStreamAnsweredWithJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"completion_tokens":1}}`)
	}))
	defer srv.Close()
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1, Stream: true}, testRows(1, 1), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Counts.Failed)
	require.NotNil(t, recs[0].Error)
	assert.Equal(t, ErrPrefixNotStream+`Content-Type "application/json; charset=utf-8"`, *recs[0].Error)
	assert.Equal(t, Status(200), recs[0].Status)
}

// TestRunConditionZeroTokensAskedIsNotEmpty: a row that asks for no
// tokens cannot be blamed for receiving none.
func TestRunConditionZeroTokensAskedIsNotEmpty(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	sum, _, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1, Stream: true}, testRows(1, 0), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Counts.Successful)
}

func TestRunConditionTransportErrorAndTimeout(t *testing.T) {
	// The answer would take 5 s; the 50 ms timeout ends each request long
	// before (the bound leaves room for a loaded machine).
	slow := newFakeServer(t, &fakeServer{TokenTime: time.Second})
	var out bytes.Buffer
	sum, _, err := RunCondition(context.Background(), LoadOptions{URL: slow.URL(), Model: "m", Concurrency: 2, Stream: true, Timeout: 50 * time.Millisecond}, testRows(2, 5), &out)
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Counts.Failed)
	for _, l := range decodeLines(t, out.Bytes()) {
		assert.Equal(t, "error", l["status"])
		assert.Contains(t, l["error"], "deadline")
		assert.Less(t, l["latency_s"].(float64), 0.9)
	}

	// A closed port: connection refused, recorded per request.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/v1/completions"
	dead.Close()
	sum, _, err = RunCondition(context.Background(), LoadOptions{URL: url, Model: "m", Concurrency: 1}, testRows(2, 1), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Counts.Failed)
}

func TestRunConditionLongErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		w.Write([]byte(strings.Repeat("é", MaxErrorBodyChars+10)))
	}))
	defer srv.Close()
	_, recs, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1}, testRows(1, 1), &bytes.Buffer{})
	require.NoError(t, err)
	require.NotNil(t, recs[0].ErrorBody)
	assert.Equal(t, MaxErrorBodyChars, len([]rune(*recs[0].ErrorBody)), "truncated in characters, not bytes")
	assert.True(t, *recs[0].ErrorBodyTruncated)
}

func TestRunConditionNonStreamingAndStore(t *testing.T) {
	f := newFakeServer(t, &fakeServer{})
	var out bytes.Buffer
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 2, StoreResponse: true}, testRows(3, 3), &out)
	require.NoError(t, err)
	assert.Equal(t, 9, sum.Counts.OutputTokens)
	assert.Equal(t, 0, sum.TTFTS.Count)
	for _, l := range decodeLines(t, out.Bytes()) {
		assert.Nil(t, l["ttft_s"])
		assert.Nil(t, l["stream_text_event_count"])
		assert.Contains(t, l["response"], `"ttt"`)
	}
	assert.NotContains(t, f.Bodies[0], "stream_options")
	_ = recs
}

func TestSummaryConfigHidesURLCredentials(t *testing.T) {
	o := LoadOptions{URL: "http://user:secret@127.0.0.1:1/v1/completions?token=abc", APIKey: "k"}
	c := o.SummaryConfig(1)
	assert.NotContains(t, c.URL, "secret")
	assert.NotContains(t, c.URL, "abc")
	assert.Contains(t, c.URL, "127.0.0.1:1/v1/completions")
}

func TestRunConditionNoUsage(t *testing.T) {
	f := newFakeServer(t, &fakeServer{NoUsage: true})
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 1, Stream: true}, testRows(1, 3), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Nil(t, sum.OutputTokenThroughput, "no usage is no data, not 0 tokens/s")
	assert.Equal(t, 1, sum.Counts.WithoutUsage)
	assert.False(t, recs[0].ServerTokenUsagePresent)
	assert.Nil(t, recs[0].OutputTokens)
	assert.Nil(t, recs[0].TPOTS, "no TPOT without the server's token count")
	assert.NotNil(t, recs[0].TTFTS)
}

func TestRunConditionOpenLoop(t *testing.T) {
	f := newFakeServer(t, &fakeServer{})
	start := time.Now()
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", RequestRate: 200, Seed: 1, Stream: true}, testRows(10, 1), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 10, sum.Counts.Successful)
	assert.Equal(t, 200.0, sum.Config.RequestRate)
	require.NotNil(t, sum.Config.Seed)
	// Arrivals are spread out: the last request is sent well after the first.
	var first, last float64 = 1e9, 0
	for _, r := range recs {
		first, last = min(first, r.StartedOffsetS), max(last, r.StartedOffsetS)
	}
	assert.Greater(t, last-first, 0.005)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestRunConditionCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFakeServer(t, &fakeServer{Slots: 1, TokenTime: 5 * time.Millisecond})
	f.Hook = func(n int64) {
		if n == 3 {
			cancel()
		}
	}
	var out bytes.Buffer
	sum, recs, err := RunCondition(ctx, LoadOptions{URL: f.URL(), Model: "m", Concurrency: 1, Stream: true}, testRows(6, 2), &out)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled))
	assert.Nil(t, sum)
	assert.Len(t, recs, 2, "only requests that finished before the interruption are kept")
	assert.Len(t, decodeLines(t, out.Bytes()), 2)
}

// blockingWriter holds its first Write until release is closed.
type blockingWriter struct {
	release chan struct{}
	once    sync.Once
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { <-w.release })
	return w.buf.Write(p)
}

// TestRunConditionCancelKeepsHandedOver: a request that ended before the
// interruption is kept even when the collector, held up by a slow writer,
// only reads its record afterwards.
func TestRunConditionCancelKeepsHandedOver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFakeServer(t, &fakeServer{Slots: 1, TokenTime: time.Millisecond})
	out := &blockingWriter{release: make(chan struct{})}
	f.Hook = func(n int64) {
		if n == 3 {
			cancel()
			close(out.release)
		}
	}
	_, recs, err := RunCondition(ctx, LoadOptions{URL: f.URL(), Model: "m", Concurrency: 1, Stream: true}, testRows(6, 2), out)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, recs, 2)
	assert.Equal(t, []int{0, 1}, []int{recs[0].RequestIndex, recs[1].RequestIndex})
	assert.Len(t, decodeLines(t, out.buf.Bytes()), 2)
}

func TestLoadOptionsValidate(t *testing.T) {
	ok := LoadOptions{URL: "http://127.0.0.1:1/v1/completions", Model: "m", Concurrency: 1}
	require.NoError(t, ok.Validate())
	latencyOnly := ok
	latencyOnly.SLO = SLO{LatencyS: 1}
	require.NoError(t, latencyOnly.Validate(), "a latency objective needs no streaming")
	cases := []struct {
		field string
		mod   func(*LoadOptions)
	}{
		{"url", func(o *LoadOptions) { o.URL = "" }},
		{"url", func(o *LoadOptions) { o.URL = "ftp://x" }},
		{"model", func(o *LoadOptions) { o.Model = "" }},
		{"concurrency", func(o *LoadOptions) { o.Concurrency = 0 }},
		{"request_rate", func(o *LoadOptions) { o.RequestRate = -1 }},
		{"request_rate", func(o *LoadOptions) { o.RequestRate = math.Inf(1) }},
		{"temperature", func(o *LoadOptions) { o.Temperature = -1 }},
		{"extra_body", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`[1]`) }},
		{"extra_body.max_tokens", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`{"max_tokens":3}`) }},
		{"extra_body.temperature", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`{"temperature":1}`) }},
		{"extra_body.ignore_eos", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`{"ignore_eos":false}`) }},
		{"extra_body.n", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`{"n":2}`) }},
		{"extra_body.best_of", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`{"best_of":2}`) }},
		{"extra_body.echo", func(o *LoadOptions) { o.ExtraBody = json.RawMessage(`{"echo":true}`) }},
		{"slo", func(o *LoadOptions) { o.Stream, o.SLO = false, SLO{TTFTS: 1} }},
		{"slo", func(o *LoadOptions) { o.Stream, o.SLO = false, SLO{TPOTS: 1} }},
	}
	for _, c := range cases {
		o := ok
		c.mod(&o)
		err := o.Validate()
		require.Error(t, err, c.field)
		assert.True(t, strings.HasPrefix(err.Error(), c.field+":"), "%q should name %s", err, c.field)
	}
}

func TestDecodeRows(t *testing.T) {
	in := `{"bucket":"short","id":"a","prompt":"p1","prompt_tokens":1,"target_output_tokens":5,"target_prompt_tokens":1,"workload":"w"}

{"bucket":"short","id":"b","prompt":"p2","prompt_tokens":1,"target_output_tokens":6,"target_prompt_tokens":1,"workload":"w"}
`
	rows, err := DecodeRows(strings.NewReader(in), 2)
	require.NoError(t, err)
	assert.Equal(t, 6, rows[1].MaxTokens())
	_, err = DecodeRows(strings.NewReader(in), 3)
	assert.True(t, errors.Is(err, ErrTooFewRows))
	assert.Contains(t, err.Error(), "only 2")
	_, err = DecodeRows(strings.NewReader("{bad"), 1)
	assert.ErrorContains(t, err, "line 1")
	for _, bad := range []string{"0", "-5"} {
		_, err = DecodeRows(strings.NewReader(in+`{"id":"c","prompt":"p3","target_output_tokens":`+bad+"}\n"), 0)
		assert.ErrorContains(t, err, "line 4: target_output_tokens must be at least 1, got "+bad)
	}
	r := Row{Prompt: "x"}
	assert.Equal(t, DefaultMaxTokens, r.MaxTokens())
}

func TestRowsFromServingInference(t *testing.T) {
	rows, err := ReadRows("../../testdata/serving-inference/prompts/mixed.jsonl", 32)
	if err != nil {
		t.Skipf("compat prompts not available: %v", err)
	}
	assert.Len(t, rows, 32)
	assert.Equal(t, "mixed_000000", rows[0].ID)
	assert.Equal(t, 64, rows[0].MaxTokens())
}

// doneThenServer streams one text chunk, usage and data: [DONE], flushes,
// then runs tail before the handler returns and net/http writes the
// chunked-encoding terminator. It counts the connections it accepts.
func doneThenServer(t *testing.T, tail func(r *http.Request)) (url string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		tail(r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/completions", conns
}

// A server whose chunked terminator arrives a little after data: [DONE]
// (uvicorn, behind vLLM, sends it as a separate write) must not cost a new
// connection per request: the client reads the body to its end, so the
// transport keeps the connection, and no request pays for a handshake
// inside its TTFT.
func TestRunConditionReusesConnectionAfterDone(t *testing.T) {
	url, conns := doneThenServer(t, func(*http.Request) { time.Sleep(10 * time.Millisecond) })
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: url, Model: "m", Concurrency: 1, Stream: true}, testRows(5, 1), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 5, sum.Counts.Successful)
	assert.Equal(t, int64(1), conns.Load(), "one connection for five sequential requests")
	for _, r := range recs {
		require.NotNil(t, r.ConnectionReused)
		assert.Equal(t, r.RequestIndex > 0, *r.ConnectionReused, "request %d", r.RequestIndex)
	}
}

// A server that keeps the body open after data: [DONE] costs the client a
// bounded wait and that connection, never the request or the run.
func TestRunConditionBodyOpenAfterDone(t *testing.T) {
	url, _ := doneThenServer(t, func(r *http.Request) { <-r.Context().Done() })
	start := time.Now()
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: url, Model: "m", Concurrency: 1, Stream: true, Timeout: 30 * time.Second}, testRows(2, 1), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Counts.Successful)
	for _, r := range recs {
		assert.Less(t, r.LatencyS, 1.0, "latency ends at [DONE], not when the wait gives up")
	}
	assert.Less(t, time.Since(start), 10*time.Second, "the wait after [DONE] is bounded well below the request timeout")
}

// slowWriter takes d for every Write, like records written to a slow disk,
// a network file system or a pipe whose reader lags.
type slowWriter struct{ d time.Duration }

func (w slowWriter) Write(b []byte) (int, error) { time.Sleep(w.d); return len(b), nil }

// Writing the evidence must not hold a concurrency slot: a worker whose
// request finished sends the next one at once, whatever the record writer
// is doing, and the run's duration (hence its throughput) ends with its
// last response. (When each worker waited for its record to be written,
// requests 3 and 4 here were sent a write's time apart and concurrency 2
// ran at 1; and the duration counted every write.)
func TestRunConditionSlowWriterKeepsConcurrency(t *testing.T) {
	f := newFakeServer(t, &fakeServer{TokenTime: 5 * time.Millisecond})
	// Writing takes 600 ms a record: a worker held by it would send its next
	// request 600 ms late, far past the bound, which leaves room for a
	// loaded machine.
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 2, Stream: true}, testRows(4, 2), slowWriter{600 * time.Millisecond})
	require.NoError(t, err)
	for _, r := range recs {
		assert.Less(t, r.StartedOffsetS, 0.45, "request %d was sent late", r.RequestIndex)
	}
	assert.Less(t, sum.DurationS, 0.45, "the duration ends with the last response, not with the last record written")
}

// scriptedServer streams chunks[i] tokens in its i-th text chunk, the first
// after ttft and then one every gap, then usage with their total and
// [DONE].
func scriptedServer(t *testing.T, ttft, gap time.Duration, chunks []int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		total := 0
		for i, n := range chunks {
			if i == 0 {
				time.Sleep(ttft)
			} else {
				time.Sleep(gap)
			}
			total += n
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":%q,\"finish_reason\":null}]}\n\n", strings.Repeat("t", n))
			fl.Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", total)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/completions"
}

// The timing definitions, checked end to end against a server with a known
// schedule: TTFT from the send (so never less than the server's delay before
// its first chunk), one inter-chunk gap per chunk whatever its token count,
// and TPOT = (last text - first text) / (output tokens - 1) with the
// server's token count, not the chunk count. The identities are exact; the
// times only have lower bounds, so a loaded machine cannot fail it.
func TestRunConditionTimingDefinitions(t *testing.T) {
	const ttft, gap = 30 * time.Millisecond, 40 * time.Millisecond
	url := scriptedServer(t, ttft, gap, []int{1, 2, 3, 2, 2}) // 10 tokens in 5 chunks
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: url, Model: "m", Concurrency: 2, Stream: true}, testRows(2, 10), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 2, sum.Counts.Successful)
	for _, r := range recs {
		require.NotNil(t, r.TTFTS)
		require.NotNil(t, r.TPOTS)
		require.Equal(t, 10, *r.OutputTokens)
		require.Len(t, r.InterChunkS, 4, "one gap per chunk, not per token")
		span := 0.0
		for _, g := range r.InterChunkS {
			span += g
		}
		assert.InDelta(t, span/9, *r.TPOTS, 1e-9, "TPOT divides by output tokens - 1, not chunks - 1")
		assert.GreaterOrEqual(t, *r.TTFTS, ttft.Seconds(), "TTFT starts at the send")
		assert.GreaterOrEqual(t, r.LatencyS, *r.TTFTS+span)
		assert.GreaterOrEqual(t, r.LatencyS, (ttft + 4*gap).Seconds())
	}
	assert.InDelta(t, float64(sum.Counts.OutputTokens)/sum.DurationS, *sum.OutputTokenThroughput, 1e-9)
	assert.GreaterOrEqual(t, sum.DurationS, max(recs[0].EndedOffsetS, recs[1].EndedOffsetS))

	// One output token: a TTFT, no gaps, no TPOT (vLLM leaves it out of its
	// TPOT statistics too).
	url = scriptedServer(t, ttft, gap, []int{1})
	_, recs, err = RunCondition(context.Background(), LoadOptions{URL: url, Model: "m", Concurrency: 1, Stream: true}, testRows(1, 1), &bytes.Buffer{})
	require.NoError(t, err)
	require.True(t, recs[0].OK())
	assert.NotNil(t, recs[0].TTFTS)
	assert.Empty(t, recs[0].InterChunkS)
	assert.Nil(t, recs[0].TPOTS)
}

// Stream framing that real servers produce: a data line split across TCP
// writes, CRLF line ends, comment keep-alives, event: and id: fields, and
// [DONE] itself split. All of it is one well-formed answer.
func TestRunConditionStreamFraming(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, p := range []string{
			"data: {\"choi", "ces\":[{\"text\":\"a\"}]}\r", "\n\r\n",
			": keepalive\r\n\r\n",
			"event: message\r\nid: 1\r\ndata: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n",
			"data: {\"choices\":[{\"text\":\"c\",\"finish_reason\":\"length\"}]}\r\n\r\n",
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3}}\r\n\r\n",
			"data: [DO", "NE]\r\n\r\n",
		} {
			io.WriteString(w, p)
			fl.Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	defer srv.Close()
	_, recs, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1, Stream: true, StoreResponse: true}, testRows(1, 3), &bytes.Buffer{})
	require.NoError(t, err)
	r := recs[0]
	require.True(t, r.OK(), "error: %v", r.Error)
	assert.Equal(t, "abc", *r.Response)
	assert.Equal(t, 3, *r.StreamTextEventCount)
	assert.Equal(t, 0, *r.MalformedStreamEvents)
	assert.Len(t, r.InterChunkS, 2)
	assert.Equal(t, 3, *r.OutputTokens)
}

// A connection cut mid-stream (no chunked terminator) is a failure with
// the transport's reason, never a short success.
func TestRunConditionStreamCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		chunk := "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk)
		bw.Flush()
	}))
	defer srv.Close()
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1, Stream: true}, testRows(1, 3), &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Counts.Failed)
	assert.Equal(t, StatusError, recs[0].Status)
	require.NotNil(t, recs[0].Error)
	assert.Contains(t, *recs[0].Error, "unexpected EOF")
	assert.Zero(t, sum.LatencyS.Count)
}

// TestRunConditionNilWriter: a library caller that wants only the summary
// and records passes no writer; that used to panic on the first record.
func TestRunConditionNilWriter(t *testing.T) {
	f := newFakeServer(t, &fakeServer{})
	sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 2, Stream: true}, testRows(3, 2), nil)
	require.NoError(t, err)
	assert.Equal(t, 3, sum.Counts.Successful)
	assert.Len(t, recs, 3)
}

// TestMaxInFlight: the connection pool is sized for the most requests a
// run can have in flight; an uncapped open loop can have every row in
// flight, and a pool sized for one request would close and reopen
// connections inside the measured latencies.
func TestMaxInFlight(t *testing.T) {
	for _, c := range []struct {
		concurrency, rows, want int
	}{{8, 100, 8}, {8, 3, 3}, {0, 100, 100}, {0, 0, 1}} {
		o := LoadOptions{Concurrency: c.concurrency}
		assert.Equal(t, c.want, o.MaxInFlight(c.rows), "concurrency %d, %d rows", c.concurrency, c.rows)
	}
	tr := NewHTTPClient(LoadOptions{}.MaxInFlight(300)).Transport.(*http.Transport)
	assert.GreaterOrEqual(t, tr.MaxIdleConnsPerHost, 300)
	assert.Zero(t, tr.IdleConnTimeout, "the client never closes a pooled connection for being idle")
}

// TestHeldOpenAfterDone: a stream whose body stays open after data: [DONE],
// or goes on past what the client drains, is marked and counted, and the
// request still succeeds; a stream that ends is not marked.
func TestHeldOpenAfterDone(t *testing.T) {
	for _, c := range []struct {
		hold bool // keep the body open after [DONE]
		tail int  // bytes sent after [DONE]
	}{{false, 0}, {true, 0}, {true, maxDrain + 8<<10}} { // past what the parser buffered, too
		hold := c.hold
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
			w.Write(bytes.Repeat([]byte(":"), c.tail))
			w.(http.Flusher).Flush()
			if hold && c.tail == 0 {
				select {
				case <-time.After(time.Second):
				case <-r.Context().Done():
				}
			}
		}))
		sum, recs, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", Concurrency: 1, Stream: true}, testRows(1, 1), nil)
		srv.Close()
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.True(t, recs[0].OK())
		if hold {
			require.NotNil(t, recs[0].HeldOpenAfterDone)
			assert.True(t, *recs[0].HeldOpenAfterDone)
			assert.Equal(t, 1, sum.Counts.HeldOpen)
		} else {
			assert.Nil(t, recs[0].HeldOpenAfterDone)
			assert.Zero(t, sum.Counts.HeldOpen)
		}
	}
}

// TestOpenLoopKeepsItsConnections: an uncapped open loop sizes its
// connection pool for every row it may have in flight. Here 60 requests
// are in flight at once and half of them finish first: their connections
// must stay open for later requests, not be closed for want of room in
// the pool (with room for one request's worth, 13 of them were).
func TestOpenLoopKeepsItsConnections(t *testing.T) {
	const rows, first = 60, 30
	var arrived, finished, closed atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) > first {
			<-release
		}
		io.WriteString(w, `{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"completion_tokens":1}}`)
		finished.Add(1)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	done := make(chan error, 1)
	go func() {
		_, _, err := RunCondition(context.Background(), LoadOptions{URL: srv.URL, Model: "m", RequestRate: 1e6, Seed: 1}, testRows(rows, 1), nil)
		done <- err
	}()
	require.Eventually(t, func() bool { return finished.Load() >= first && arrived.Load() >= rows },
		10*time.Second, 5*time.Millisecond, "every request in flight, the first %d answered", first)
	time.Sleep(100 * time.Millisecond) // time for a closed connection to be seen
	assert.Zero(t, closed.Load(), "connections closed while the run still had requests in flight")
	close(release)
	require.NoError(t, <-done)
}

// serving-inference's first prompt files (its send_requests.py default,
// prompts/generated_prompts.jsonl) name a row's workload "category";
// send_requests.py records row.get("workload") or row.get("category"), and
// so must this client, or the same file gives records without a workload.
func TestRecordWorkloadFallsBackToCategory(t *testing.T) {
	f := newFakeServer(t, &fakeServer{})
	in := `{"id": "prompt_000000", "prompt": "Write a short technical summary of CUDA shared memory.", "category": "systems_inference", "target_output_tokens": 2}
{"id": "b", "prompt": "p", "category": "c", "workload": "w", "target_output_tokens": 2}
{"id": "c", "prompt": "p", "target_output_tokens": 2}
`
	rows, err := DecodeRows(strings.NewReader(in), 0)
	require.NoError(t, err)
	var out bytes.Buffer
	_, _, err = RunCondition(context.Background(), LoadOptions{URL: f.URL(), Model: "m", Concurrency: 1, Stream: true}, rows, &out)
	require.NoError(t, err)
	got := map[string]any{}
	for _, l := range decodeLines(t, out.Bytes()) {
		got[l["id"].(string)] = l["workload"]
	}
	assert.Equal(t, map[string]any{"prompt_000000": "systems_inference", "b": "w", "c": nil}, got)
}

func TestServerBase(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:8000/v1/completions":     "http://localhost:8000",
		"http://u:p@h:1/prefix/v1/completions?x=1": "http://h:1/prefix",
		"https://h/completions":                    "https://h",
	} {
		got, err := ServerBase(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
}

func TestServerBaseOfChatURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:8000/v1/chat/completions": "http://h:8000",
		"http://h/openai/chat/completions":  "http://h/openai",
		"http://h/openai/completions":       "http://h/openai",
	} {
		got, err := ServerBase(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
}
