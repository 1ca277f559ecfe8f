package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tinyserve/tinyserve/internal/pyrandom"
)

// reservedBodyKeys are the request fields the client sets itself; extra_body
// may not override them, or a record's target_output_tokens would lie.
var reservedBodyKeys = []string{"model", "prompt", "max_tokens", "stream", "stream_options"}

// LoadOptions configure one condition. The zero value is not usable: URL,
// Model and Concurrency (or RequestRate) must be set; other fields document
// what zero means.
type LoadOptions struct {
	// URL is the completions endpoint, e.g. http://127.0.0.1:8000/v1/completions.
	URL string
	// Model is sent as the request's model.
	Model string
	// Concurrency is the number of requests in flight. In the closed loop it
	// must be at least 1; with RequestRate it caps requests in flight, and 0
	// means no cap.
	Concurrency int
	// RequestRate, when positive, switches to an open loop: requests are
	// sent at Poisson arrival times with this mean rate (requests per
	// second), drawn from an RNG seeded with Seed.
	RequestRate float64
	// Seed seeds the open-loop arrival times.
	Seed int64
	// Temperature is sent with every request (0 = greedy).
	Temperature float64
	// Timeout bounds each request from send to the end of its response;
	// zero means 300 s, serving-inference's default.
	Timeout time.Duration
	// Stream requests SSE streaming with usage in the last chunk; without it
	// there is no TTFT, TPOT or inter-chunk data.
	Stream bool
	// IgnoreEOS sends vLLM's ignore_eos, so outputs have the requested length.
	IgnoreEOS bool
	// StoreResponse keeps the generated text (or raw body) in each record.
	StoreResponse bool
	// ExtraBody is merged into every request body (a JSON object); it may not
	// set model, prompt, max_tokens, stream or stream_options.
	ExtraBody json.RawMessage
	// APIKey, when set, is sent as a bearer token. It is never written to a
	// record, a summary or a log.
	APIKey string
	// SLO, when not empty, adds goodput to the summary.
	SLO SLO
	// WorkloadSHA256 is the SHA-256 of the prompt file the rows come from,
	// recorded in the summary so that a run names its workload by content;
	// empty records nothing.
	WorkloadSHA256 string
	// RequestIDPrefix starts every X-Request-Id; empty means one made from
	// the run's start time, so that two runs never share ids in a server's
	// logs.
	RequestIDPrefix string
	// Client sends the requests; nil means a client sized for Concurrency
	// with no overall timeout (Timeout applies per request).
	Client *http.Client
	// Progress, when set, is called after each record is written with the
	// number of records done so far. It is called from one goroutine.
	Progress func(done int)
}

// SummaryConfig returns the config object recorded in the run's summary.
func (o *LoadOptions) SummaryConfig(numRequests int) SummaryConfig {
	c := SummaryConfig{
		URL:                 sanitizeURL(o.URL), // credentials in a URL never reach a file
		Model:               o.Model,
		NumRequests:         numRequests,
		Concurrency:         o.Concurrency,
		Stream:              o.Stream,
		Temperature:         o.Temperature,
		StoreResponse:       o.StoreResponse,
		ResultSchemaVersion: ResultSchemaVersion,
		IgnoreEOS:           o.IgnoreEOS,
		ExtraBody:           o.ExtraBody,
		RequestRate:         o.RequestRate,
		TimeoutS:            o.timeout().Seconds(),
		WorkloadSHA256:      o.WorkloadSHA256,
	}
	if o.RequestRate > 0 {
		seed := o.Seed
		c.Seed = &seed
	}
	if !o.SLO.Empty() {
		s := o.SLO
		c.SLO = &s
	}
	return c
}

func (o *LoadOptions) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 300 * time.Second
	}
	return o.Timeout
}

// Validate checks the options; errors name the field.
func (o *LoadOptions) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("url: required")
	case !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://"):
		return fmt.Errorf("url: want an http(s) URL, got %q", o.URL)
	case o.Model == "":
		return errors.New("model: required")
	case o.RequestRate < 0 || math.IsNaN(o.RequestRate) || math.IsInf(o.RequestRate, 0):
		return fmt.Errorf("request_rate: must be a positive number of requests per second, got %v", o.RequestRate)
	case o.RequestRate == 0 && o.Concurrency < 1:
		return fmt.Errorf("concurrency: must be at least 1, got %d", o.Concurrency)
	case o.Concurrency < 0:
		return fmt.Errorf("concurrency: must not be negative, got %d", o.Concurrency)
	case math.IsNaN(o.Temperature) || o.Temperature < 0:
		return fmt.Errorf("temperature: must be non-negative, got %v", o.Temperature)
	case o.Timeout < 0:
		return fmt.Errorf("timeout: must not be negative, got %v", o.Timeout)
	}
	_, err := extraBodyFragment(o.ExtraBody)
	return err
}

// extraBodyFragment checks extra and returns its members without the
// braces, ready to splice into a request body.
func extraBodyFragment(extra json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(extra)) == 0 || string(bytes.TrimSpace(extra)) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(extra, &m); err != nil {
		return nil, fmt.Errorf("extra_body: want a JSON object: %w", err)
	}
	for _, k := range reservedBodyKeys {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("extra_body.%s: set by the client, may not be overridden", k)
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m) // sorted keys: the body is the same every run
	if err != nil {
		return nil, fmt.Errorf("extra_body: %w", err)
	}
	return b[1 : len(b)-1], nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type completionBody struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
}

// NewHTTPClient returns a client for a load run: enough idle connections
// for the concurrency, no compression (it would add client CPU time to every
// measurement) and no overall timeout (the per-request deadline applies).
func NewHTTPClient(concurrency int) *http.Client {
	if concurrency < 1 {
		concurrency = 1
	}
	tr := &http.Transport{
		Proxy:               nil, // a benchmark must hit the endpoint it names
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency + 16,
		MaxIdleConnsPerHost: concurrency + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}

// job is one request to send and when it became eligible to be sent.
type job struct {
	index    int
	row      *Row
	eligible time.Time
}

// sent is a worker's finished request: its record, and whether the run
// had been interrupted by the time it ended.
type sent struct {
	record      Record
	interrupted bool
}

// RunCondition runs one condition over rows: every row is sent once, records
// are written to out as JSONL in completion order (one Write per record, so
// a reader of a file never sees half a line), and the summary is returned.
// A nil out writes nothing. It returns the records too. Requests that
// failed (an HTTP error, no answer) are evidence, not an error: they are in
// the records and Summary.Counts.Failed (RunSweep is what stops on them,
// with ErrFailedRequests). When ctx ends before every request finished, it
// returns an error wrapping ctx's and the records written so far; the
// caller must not treat that as a complete run.
func RunCondition(ctx context.Context, opts LoadOptions, rows []Row, out io.Writer) (*Summary, []Record, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	if out == nil {
		out = io.Discard
	}
	if len(rows) == 0 {
		return nil, nil, fmt.Errorf("prompts: %w: no rows", ErrTooFewRows)
	}
	extra, _ := extraBodyFragment(opts.ExtraBody)
	client := opts.Client
	if client == nil {
		client = NewHTTPClient(max(opts.Concurrency, 1))
		defer client.CloseIdleConnections()
	}
	started := time.Now()
	prefix := opts.RequestIDPrefix
	if prefix == "" {
		// The start time in nanoseconds tells runs apart in a server's logs
		// without an unseeded random source.
		prefix = "sweep-" + strconv.FormatInt(started.UnixNano(), 36)
	}
	s := &sender{opts: opts, extra: extra, client: client, prefix: prefix, started: started}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Room for every record: a worker hands its record over and sends its
	// next request at once, so writing the evidence (a slow disk, a lagging
	// pipe) never holds a concurrency slot.
	results := make(chan sent, len(rows))
	jobs := make(chan job)
	var wg sync.WaitGroup

	workers := opts.Concurrency
	if opts.RequestRate > 0 && workers == 0 {
		workers = len(rows) // no cap: every arrival gets a sender at once
	}
	workers = min(workers, len(rows))
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				r := s.send(ctx, j)
				// Whether the run was interrupted is decided here, when the
				// request ended, not when the collector gets to the record:
				// a record handed over just before an interruption is
				// evidence like any other.
				results <- sent{record: r, interrupted: ctx.Err() != nil}
			}
		})
	}
	go func() {
		defer close(jobs)
		var arrivals *pyrandom.Rand
		if opts.RequestRate > 0 {
			arrivals = pyrandom.New(opts.Seed)
		}
		var offset float64
		for i := range rows {
			eligible := started
			if arrivals != nil {
				offset += arrivals.Expovariate(opts.RequestRate)
				eligible = started.Add(time.Duration(offset * float64(time.Second)))
				if d := time.Until(eligible); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
						return
					}
				}
			}
			select {
			case jobs <- job{index: i, row: &rows[i], eligible: eligible}:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	records := make([]Record, 0, len(rows))
	var writeErr error
	var line bytes.Buffer
	for res := range results {
		if res.interrupted || writeErr != nil {
			continue // these records are not evidence of the server
		}
		r := res.record
		records = append(records, r)
		line.Reset()
		enc := json.NewEncoder(&line)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&r); err != nil {
			writeErr = err
			cancel()
			continue
		}
		if _, err := out.Write(line.Bytes()); err != nil {
			writeErr = fmt.Errorf("writing records: %w", err)
			cancel()
			continue
		}
		if opts.Progress != nil {
			opts.Progress(len(records))
		}
	}
	if writeErr != nil {
		return nil, records, writeErr
	}
	if err := ctx.Err(); err != nil || len(records) != len(rows) {
		if err == nil {
			err = context.Canceled
		}
		return nil, records, fmt.Errorf("run interrupted after %d of %d requests: %w", len(records), len(rows), err)
	}
	// The run lasts from its start to the end of its last response; the
	// time spent writing records after that is not the server's.
	var duration float64
	for i := range records {
		duration = max(duration, records[i].EndedOffsetS)
	}
	sum := Summarize(opts.SummaryConfig(len(rows)), records, duration)
	return &sum, records, nil
}

// sender sends requests of one run; it is shared by the workers and read
// only.
type sender struct {
	opts    LoadOptions
	extra   []byte
	client  *http.Client
	prefix  string
	started time.Time
}

func (s *sender) body(row *Row) ([]byte, error) {
	b := completionBody{
		Model:       s.opts.Model,
		Prompt:      row.Prompt,
		MaxTokens:   row.MaxTokens(),
		Temperature: s.opts.Temperature,
		Stream:      s.opts.Stream,
		IgnoreEOS:   s.opts.IgnoreEOS,
	}
	if s.opts.Stream {
		b.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&b); err != nil {
		return nil, err
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(s.extra) > 0 {
		out = append(out[:len(out)-1], ',')
		out = append(out, s.extra...)
		out = append(out, '}')
	}
	return out, nil
}

func (s *sender) send(ctx context.Context, j job) Record {
	row := j.row
	rec := Record{
		SchemaVersion:      ResultSchemaVersion,
		ID:                 row.ID,
		RequestIndex:       j.index,
		PromptTokens:       row.PromptTokens,
		TargetPromptTokens: row.TargetPromptTokens,
		TargetOutputTokens: row.MaxTokens(),
		InterChunkS:        []float64{},
		XRequestID:         fmt.Sprintf("%s-%06d", s.prefix, j.index),
	}
	if row.Workload != "" {
		w := row.Workload
		rec.Workload = &w
	}
	if row.Bucket != "" {
		b := row.Bucket
		rec.Bucket = &b
	}
	body, err := s.body(row)
	start := time.Now()
	rec.ClientQueueS = max(start.Sub(j.eligible).Seconds(), 0)
	rec.StartedOffsetS = start.Sub(s.started).Seconds()
	finish := func() {
		end := time.Now()
		rec.EndedOffsetS = end.Sub(s.started).Seconds()
		rec.LatencyS = end.Sub(start).Seconds()
	}
	fail := func(err error) Record {
		finish()
		rec.Status = StatusError
		msg := fmt.Sprintf("%T: %v", err, err)
		rec.Error = &msg
		rec.StreamTextEventCount, rec.MalformedStreamEvents = nil, nil
		return rec
	}
	if err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.timeout())
	defer cancel()
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			reused := info.Reused
			rec.ConnectionReused = &reused
		},
	})
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.opts.URL, bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", rec.XRequestID)
	if s.opts.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	if s.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.APIKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	rec.Status = Status(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		text, truncated, rerr := readErrorBody(resp.Body)
		if rerr != nil {
			return fail(rerr)
		}
		finish()
		rec.ErrorBody, rec.ErrorBodyTruncated = &text, &truncated
		return rec
	}
	// A 200 only says the server accepted the request. One whose body is not
	// an answer keeps its status as evidence, gets an error and counts as
	// failed, so near-instant non-answers never enter the latency
	// percentiles or the throughput.
	notAnswer := func(msg string) Record {
		rec.Error = &msg
		return rec
	}
	if s.opts.Stream {
		sr, err := ParseStream(resp.Body, time.Now)
		if err != nil {
			return fail(err)
		}
		finish()
		if sr.Done {
			drainBody(resp.Body, cancel)
		}
		n, m := sr.TextEvents, sr.Malformed
		rec.StreamTextEventCount, rec.MalformedStreamEvents = &n, &m
		rec.FinishReason = sr.FinishReason
		s.usage(&rec, sr.Usage)
		if sr.TextEvents > 0 {
			ttft := sr.FirstText.Sub(start).Seconds()
			rec.TTFTS = &ttft
		}
		if sr.TextEvents > 1 && rec.OutputTokens != nil && *rec.OutputTokens > 1 {
			tpot := sr.LastText.Sub(sr.FirstText).Seconds() / float64(*rec.OutputTokens-1)
			rec.TPOTS = &tpot
		}
		for _, g := range sr.Gaps {
			rec.InterChunkS = append(rec.InterChunkS, g.Seconds())
		}
		if s.opts.StoreResponse {
			rec.Response = &sr.Text
		}
		switch {
		case sr.Error != "":
			return notAnswer(ErrPrefixServer + sr.Error)
		case !sr.Done && sr.TextEvents == 0 && isJSON(resp.Header):
			// The server ignored stream: true and sent one body: nothing
			// it says can be timed, and "no [DONE]" would hide why.
			return notAnswer(ErrPrefixNotStream + fmt.Sprintf("Content-Type %q", resp.Header.Get("Content-Type")))
		case !sr.Done:
			// A connection closed cleanly mid-answer reads like a short
			// answer; only [DONE] says the server finished.
			return notAnswer(ErrNoDone)
		case sr.TextEvents == 0 && sr.FinishReason == nil && rec.TargetOutputTokens >= 1:
			// No text and no finish reason: nothing answered. (An empty
			// text that finished, an immediate EOS or stop string, is an
			// answer.)
			return notAnswer(ErrNoContent)
		}
		return rec
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fail(err)
	}
	finish()
	var parsed struct {
		Usage   *Usage `json:"usage"`
		Choices []struct {
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Error json.RawMessage `json:"error"`
	}
	perr := json.Unmarshal(raw, &parsed)
	if perr == nil {
		if parsed.Usage != nil {
			s.usage(&rec, *parsed.Usage)
		}
		if len(parsed.Choices) > 0 {
			rec.FinishReason = parsed.Choices[0].FinishReason
		}
	}
	if s.opts.StoreResponse {
		str := string(raw)
		rec.Response = &str
	}
	switch {
	case perr != nil:
		return notAnswer(ErrPrefixNotCompletion + "invalid JSON: " + perr.Error())
	case errorMessage(parsed.Error) != "":
		return notAnswer(ErrPrefixServer + errorMessage(parsed.Error))
	case len(parsed.Choices) == 0:
		return notAnswer(ErrPrefixNotCompletion + "no choices")
	case parsed.Choices[0].Text == "" && parsed.Choices[0].FinishReason == nil && rec.TargetOutputTokens >= 1:
		return notAnswer(ErrNoContent)
	}
	return rec
}

// After data: [DONE], drainBody waits at most drainWait for the rest of the
// body and reads at most maxDrain bytes of it.
const (
	drainWait = 100 * time.Millisecond
	maxDrain  = 64 << 10
)

// drainBody reads what is left of a streamed body after data: [DONE],
// normally only the chunked-encoding terminator, which a server may send as
// a separate write (uvicorn, behind vLLM, does). net/http keeps a connection
// only when its body was read to the end; closing it at [DONE] would drop
// the connection, and the worker's next request would pay for a new one
// (a TCP, perhaps a TLS, handshake) inside its TTFT and latency. vLLM's
// benchmark also reads every response to its end. The wait is bounded by
// stop, the request's cancel: a server that keeps the body open after
// [DONE] costs drainWait and that connection, never the run.
func drainBody(body io.Reader, stop context.CancelFunc) {
	t := time.AfterFunc(drainWait, stop)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, maxDrain)
}

// The error texts of a 200 response that was not an answer, recorded in a
// record's error field. They are constants so that readers of the records
// can group failures by cause.
const (
	// ErrNoContent: neither text nor a finish reason arrived although at
	// least one token was asked for (vLLM's benchmark calls this "Never
	// received a valid chunk").
	ErrNoContent = "no content received"
	// ErrNoDone: the stream ended without data: [DONE].
	ErrNoDone = "stream ended without [DONE]"
	// ErrPrefixServer starts the message of an error object the server sent
	// in the body or in the stream.
	ErrPrefixServer = "server error: "
	// ErrPrefixNotCompletion starts the reason a non-streamed body is not a
	// completion (not JSON, no choices).
	ErrPrefixNotCompletion = "response is not a completion: "
	// ErrPrefixNotStream starts the reason a streamed request got a JSON
	// body instead of an SSE stream, followed by the Content-Type.
	ErrPrefixNotStream = "response is not an SSE stream: "
)

// isJSON reports whether a response's Content-Type is application/json.
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// usage copies the server's token counts into rec: output tokens come from
// the server, never from counting chunks, and the prompt tokens the server
// saw replace the prompt file's figure.
func (s *sender) usage(rec *Record, u Usage) {
	rec.OutputTokens = u.CompletionTokens
	rec.ServerTokenUsagePresent = u.CompletionTokens != nil
	if u.PromptTokens != nil {
		rec.PromptTokens = u.PromptTokens
	}
}

// readErrorBody reads a failed response's body, keeping its first
// MaxErrorBodyChars characters.
func readErrorBody(r io.Reader) (string, bool, error) {
	const maxRead = 1 << 20
	b, err := io.ReadAll(io.LimitReader(r, maxRead+1))
	if err != nil {
		return "", false, err
	}
	truncated := len(b) > maxRead
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	if utf8.RuneCountInString(text) > MaxErrorBodyChars {
		n := 0
		for i := range text {
			if n == MaxErrorBodyChars {
				text = text[:i]
				break
			}
			n++
		}
		truncated = true
	}
	return text, truncated, nil
}
