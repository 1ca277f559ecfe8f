package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"time"
)

// reservedBodyKeys are the request fields extra_body may not set, and why:
// the ones the client sets itself (a second key in the body would
// contradict what the summary records, and the server would take the last
// one), and the ones that change what the client measures. An entry with an
// api applies to that API only; the other API's server does not read the
// key, so extra_body may still carry it there.
var reservedBodyKeys = []struct {
	key string
	api API // "" for both
	why string
}{
	{"model", "", "set by the client"},
	{"prompt", APICompletions, "set by the client"},
	{"messages", APIChat, "set by the client from the prompt file"},
	{"max_tokens", APICompletions, "set by the client from the prompt file"},
	{"max_tokens", APIChat, "the older name of max_completion_tokens, which the client sets from the prompt file"},
	{"max_completion_tokens", APIChat, "set by the client from the prompt file"},
	{"stream", "", "set by the client (the stream setting)"},
	{"stream_options", "", "set by the client"},
	{"temperature", "", "set by the client (the temperature setting)"},
	{"ignore_eos", "", "set by the client (the ignore_eos setting)"},
	{"n", "", "the client reads one choice per request; more would mix their chunks and usage"},
	{"best_of", "", "the client reads one choice per request and best_of changes its cost"},
	{"echo", "", "an echoed prompt would arrive as the first text and count as the first token"},
}

// LoadOptions configure one condition. The zero value is not usable: URL,
// Model and Concurrency (or RequestRate) must be set; other fields document
// what zero means.
type LoadOptions struct {
	// URL is the endpoint, e.g. http://127.0.0.1:8000/v1/completions. A
	// path ending in /chat/completions makes the client speak the chat API
	// (see [APIForURL]).
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
	// set model, stream, stream_options, temperature, ignore_eos, n, best_of
	// or echo, nor prompt and max_tokens (completions) or messages,
	// max_completion_tokens and max_tokens (chat); reservedBodyKeys says why.
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
	// ServerVersion is the server's version (see [ServerVersion]), recorded
	// in the summary; empty records nothing.
	ServerVersion string
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
		ServerVersion:       o.ServerVersion,
		API:                 o.API(),
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

// API is the API the client speaks to URL.
func (o *LoadOptions) API() API { return APIForURL(o.URL) }

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
	case math.IsInf(o.RequestRate, 1):
		// vllm bench serve's default, spelled out by users of that tool:
		// there it means every request at once, which is the closed loop.
		return errors.New("request_rate: inf (every request at once, as in vllm bench serve) is the closed loop here: leave the rate out and set concurrency to the requests in flight wanted (the number of requests for all at once)")
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
	case !o.Stream && (o.SLO.TTFTS > 0 || o.SLO.TPOTS > 0):
		return ErrSLONeedsStream
	}
	_, err := ExtraBodyFragment(o.ExtraBody, o.API())
	return err
}

// ErrSLONeedsStream explains why a TTFT or TPOT objective needs streaming:
// without it no request could show that it met one.
var ErrSLONeedsStream = errors.New("slo: ttft and tpot objectives need streaming (stream: true); without it only latency can be checked")

// ExtraBodyFragment checks extra against the keys api reserves and returns
// its members without the braces, ready to splice into a request body.
func ExtraBodyFragment(extra json.RawMessage, api API) ([]byte, error) {
	if len(bytes.TrimSpace(extra)) == 0 || string(bytes.TrimSpace(extra)) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(extra, &m); err != nil {
		return nil, fmt.Errorf("extra_body: want a JSON object: %w", err)
	}
	for _, r := range reservedBodyKeys {
		if r.api != "" && r.api != api {
			continue
		}
		if _, ok := m[r.key]; ok {
			return nil, fmt.Errorf("extra_body.%s: not allowed: %s", r.key, r.why)
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

// MaxInFlight is the most requests a run of n rows with these options can
// have in flight, the size its HTTP client's connection pool needs: the
// concurrency, or every row for an uncapped open loop (Concurrency 0).
func (o LoadOptions) MaxInFlight(n int) int {
	if o.Concurrency > 0 {
		return min(o.Concurrency, max(n, 1))
	}
	return max(n, 1)
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
		// No idle timeout: a connection is kept for the whole run or sweep,
		// so that a level measured after a long one finds its connections
		// open, as the warm-up left them.
		IdleConnTimeout:    0,
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	return &http.Client{Transport: tr}
}

// TimeoutDuration converts a per-request timeout in seconds (a sweep
// config's timeout, sendrequests' --timeout) to a time.Duration. It refuses
// what a Duration cannot hold instead of letting the conversion go wrong
// silently: more than about 292 years overflows (and failed only at the
// first run, after config.json was written), and less than a nanosecond
// rounds to zero, which LoadOptions reads as the 300 s default.
func TimeoutDuration(seconds float64) (time.Duration, error) {
	ns := seconds * float64(time.Second)
	switch {
	case math.IsNaN(seconds) || seconds <= 0:
		return 0, fmt.Errorf("must be a positive number of seconds, got %v", seconds)
	case ns < 1:
		return 0, fmt.Errorf("must be at least 1 ns (1e-9 s), got %v s", seconds)
	case ns >= math.MaxInt64: // float64(MaxInt64) is 2^63, the first value out of range
		return 0, fmt.Errorf("must be at most %.4g s (the longest time.Duration), got %v s", float64(math.MaxInt64)/float64(time.Second), seconds)
	}
	return time.Duration(ns), nil
}
