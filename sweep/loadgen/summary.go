package loadgen

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// SLO names the per-request service-level objectives that goodput counts.
// A request meets an SLO when its value is at most the threshold (seconds);
// a request without the value (no text streamed, one output token) does not
// meet it, because nothing shows that it did.
type SLO struct {
	TTFTS    float64 `json:"ttft_s,omitempty"`    // time to first text, 0 = not checked
	TPOTS    float64 `json:"tpot_s,omitempty"`    // approximate time per output token
	LatencyS float64 `json:"latency_s,omitempty"` // end-to-end latency
}

// Empty reports whether no objective is set.
func (s SLO) Empty() bool { return s.TTFTS == 0 && s.TPOTS == 0 && s.LatencyS == 0 }

// ParseSLO parses "name=seconds" items (ttft, tpot, latency; as given to
// --slo) into an SLO. Errors name the offending item.
func ParseSLO(items []string) (SLO, error) {
	var s SLO
	for _, it := range items {
		name, val, ok := strings.Cut(it, "=")
		if !ok {
			return s, fmt.Errorf("slo %q: want name=seconds", it)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		// !(v > 0), not v <= 0: "nan" parses, and a NaN threshold would be
		// met by no request and make the run summary unwritable as JSON.
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return s, fmt.Errorf("slo %q: want a positive number of seconds", it)
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "ttft":
			s.TTFTS = v
		case "tpot":
			s.TPOTS = v
		case "latency", "e2e":
			s.LatencyS = v
		default:
			return s, fmt.Errorf("slo %q: unknown objective %q (want ttft, tpot or latency)", it, name)
		}
	}
	return s, nil
}

// Meets reports whether r succeeded and met every objective in s.
func (s SLO) Meets(r *Record) bool {
	if !r.OK() {
		return false
	}
	within := func(v *float64, limit float64) bool { return limit == 0 || (v != nil && *v <= limit) }
	return within(r.TTFTS, s.TTFTS) && within(r.TPOTS, s.TPOTS) && within(&r.LatencyS, s.LatencyS)
}

// SummaryConfig is the "config" object of a run summary: what was measured.
// The first fields are serving-inference's; the API key is never recorded.
type SummaryConfig struct {
	URL                 string          `json:"url"`
	Model               string          `json:"model"`
	NumRequests         int             `json:"num_requests"`
	Concurrency         int             `json:"concurrency"`
	Stream              bool            `json:"stream"`
	Temperature         float64         `json:"temperature"`
	StoreResponse       bool            `json:"store_response"`
	ResultSchemaVersion string          `json:"result_schema_version"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	ExtraBody           json.RawMessage `json:"extra_body,omitempty"`
	// RequestRate is the open-loop arrival rate in requests per second, 0 for
	// the closed loop.
	RequestRate float64 `json:"request_rate,omitempty"`
	Seed        *int64  `json:"seed,omitempty"`
	TimeoutS    float64 `json:"timeout_s"`
	SLO         *SLO    `json:"slo,omitempty"`
	// WorkloadSHA256 is the SHA-256 of the prompt file, when the caller
	// knew it.
	WorkloadSHA256 string `json:"workload_sha256,omitempty"`
	// ServerVersion is what the server's GET /version said before the run
	// (vLLM and tinyserve answer it); empty when it did not say.
	ServerVersion string `json:"server_version,omitempty"`
	// Session is the invocation of a sweep that measured the run (1 for the
	// first; manifest.json's resumes describe the others); absent outside
	// sweeps.
	Session int `json:"session,omitempty"`
	// API is the API the client spoke: "completions" or "chat" (chosen by
	// the URL); absent in files written before tinyserve recorded it, and
	// in serving-inference's, which speak completions.
	API API `json:"api,omitempty"`
}

// Counts are a run's request and token counts.
type Counts struct {
	Attempted    int `json:"attempted"`     // requests sent
	Successful   int `json:"successful"`    // HTTP 200 with an answer (Record.OK)
	Failed       int `json:"failed"`        // any other status, no response, or a 200 without an answer
	OutputTokens int `json:"output_tokens"` // server-reported, successful requests only
	// WithoutUsage counts successful requests whose server reported no
	// completion_tokens: they add nothing to OutputTokens, so output-token
	// throughput undercounts when it is not zero (and is null when every
	// successful request lacks usage).
	WithoutUsage int `json:"successful_without_usage"`
	// NewConnections counts requests, successful or not, that had to open
	// a connection (connection_reused false): the connection's set-up fell
	// inside their latency.
	NewConnections int `json:"new_connections"`
	// HeldOpen counts streams whose body did not end soon after data:
	// [DONE] (Record.HeldOpenAfterDone).
	HeldOpen int `json:"held_open_after_done,omitempty"`
}

// UsageWarning says, in one sentence, how requests without the server's
// token usage affect output-token throughput; "" when every successful
// request had it.
func (c Counts) UsageWarning() string {
	switch {
	case c.WithoutUsage == 0:
		return ""
	case c.WithoutUsage >= c.Successful:
		return fmt.Sprintf("the server reported no token usage for any of the %d successful requests, so output tokens/s is null (no data)", c.Successful)
	default:
		return fmt.Sprintf("%d of %d successful requests had no token usage from the server; output tokens/s counts them as 0 tokens", c.WithoutUsage, c.Successful)
	}
}

// Goodput is the share of requests that met every SLO.
type Goodput struct {
	SLO             SLO      `json:"slo"`                         // the objectives
	Met             int      `json:"requests_meeting_slo"`        // successful requests meeting all of them
	Fraction        *float64 `json:"fraction_meeting_slo"`        // Met over attempted requests
	RequestsPerS    *float64 `json:"goodput_requests_per_s"`      // Met over the run's duration
	OutputTokensPer *float64 `json:"goodput_output_tokens_per_s"` // their output tokens over the duration
}

// Summary is a run's .summary.json, serving-inference's build_summary keys
// plus ClientQueueS, MeanInFlight and Goodput. Distributions cover
// successful requests only.
type Summary struct {
	Config SummaryConfig `json:"config"`
	Figures
}

// Session is the sweep session that measured the run: its config.session,
// or 1 for a summary written before summaries named their session (the
// manifest's first invocation stands for all of those).
func (s *Summary) Session() int {
	if s.Config.Session == 0 {
		return 1
	}
	return s.Config.Session
}

// Figures are what a run's summary and a sweep level's aggregate both
// report about a set of requests over a duration.
type Figures struct {
	Counts                Counts       `json:"counts"`
	DurationS             float64      `json:"duration_s"`
	RequestThroughput     *float64     `json:"request_throughput_per_s"`
	OutputTokenThroughput *float64     `json:"output_token_throughput_per_s"`
	LatencyS              Distribution `json:"latency_s"`
	TTFTS                 Distribution `json:"ttft_s"`
	TPOTS                 Distribution `json:"approx_time_per_output_token_s"`
	InterChunkS           Distribution `json:"observed_inter_chunk_latency_s"`
	ClientQueueS          Distribution `json:"client_queue_s"`
	// MeanInFlight is the number of requests in flight averaged over the
	// duration: the time every request spent from send to end, over the
	// duration. Below the concurrency, the load did not hold its level
	// (ramp-up and drain are a large share of a run of few requests per
	// slot, and so is a client that cannot keep up).
	MeanInFlight *float64 `json:"mean_in_flight,omitempty"`
	// Goodput is set when there was an SLO.
	Goodput *Goodput `json:"goodput,omitempty"`
}

// FiguresOf computes the Figures of records over durationS seconds, with
// goodput when slo is set. It is a pure function.
func FiguresOf(records []Record, durationS float64, slo *SLO) Figures {
	m := collect(records)
	f := Figures{
		Counts:                m.counts(len(records)),
		DurationS:             durationS,
		RequestThroughput:     perSecond(m.ok, durationS),
		OutputTokenThroughput: m.outputTokenThroughput(durationS),
		LatencyS:              Distribute(m.latency),
		TTFTS:                 Distribute(m.ttft),
		TPOTS:                 Distribute(m.tpot),
		InterChunkS:           Distribute(m.chunks),
		ClientQueueS:          Distribute(m.queue),
		MeanInFlight:          m.meanInFlight(durationS),
	}
	if slo != nil && !slo.Empty() {
		f.Goodput = goodput(*slo, records, durationS)
	}
	return f
}

// metricValues collects the per-request values of successful records, and
// the time in flight and connections of all of them.
type metricValues struct {
	latency, ttft, tpot, chunks, queue []float64
	outputTokens, ok                   int
	// withoutUsage counts the ok records without the server's token usage.
	withoutUsage int
	// busyS is the time every record spent from send to end.
	busyS float64
	// newConns counts records that opened a connection.
	newConns int
	// heldOpen counts records whose stream stayed open after [DONE].
	heldOpen int
}

// meanInFlight is the mean number of requests in flight over durationS.
func (m *metricValues) meanInFlight(durationS float64) *float64 {
	if durationS <= 0 {
		return nil
	}
	v := m.busyS / durationS
	return &v
}

// anyUsage reports whether some successful record carried the server's
// token usage.
func (m *metricValues) anyUsage() bool { return m.ok > m.withoutUsage }

// counts is the Counts of the records collected into m.
func (m *metricValues) counts(attempted int) Counts {
	return Counts{
		Attempted:      attempted,
		Successful:     m.ok,
		Failed:         attempted - m.ok,
		OutputTokens:   m.outputTokens,
		WithoutUsage:   m.withoutUsage,
		NewConnections: m.newConns,
		HeldOpen:       m.heldOpen,
	}
}

// outputTokenThroughput is output tokens per second, or nil when no
// successful request carried the server's token count: then there is no
// data, and 0 would read as a measured zero.
func (m *metricValues) outputTokenThroughput(durationS float64) *float64 {
	if !m.anyUsage() {
		return nil
	}
	return perSecond(m.outputTokens, durationS)
}

// hasUsage reports whether the server reported r's output tokens. A record
// with output_tokens but without server_token_usage_present (written by
// serving-inference, which lacks that field) counts, since output tokens
// only ever come from the server.
func (r *Record) hasUsage() bool { return r.ServerTokenUsagePresent || r.OutputTokens != nil }

func collect(records []Record) metricValues {
	var m metricValues
	for i := range records {
		r := &records[i]
		m.busyS += max(r.EndedOffsetS-r.StartedOffsetS, 0)
		if r.ConnectionReused != nil && !*r.ConnectionReused {
			m.newConns++
		}
		if r.HeldOpenAfterDone != nil && *r.HeldOpenAfterDone {
			m.heldOpen++
		}
		if !r.OK() {
			continue
		}
		m.ok++
		if r.OutputTokens != nil {
			m.outputTokens += *r.OutputTokens
		}
		if !r.hasUsage() {
			m.withoutUsage++
		}
		m.latency = append(m.latency, r.LatencyS)
		if r.TTFTS != nil {
			m.ttft = append(m.ttft, *r.TTFTS)
		}
		if r.TPOTS != nil {
			m.tpot = append(m.tpot, *r.TPOTS)
		}
		m.chunks = append(m.chunks, r.InterChunkS...)
		m.queue = append(m.queue, r.ClientQueueS)
	}
	return m
}

func perSecond(n int, d float64) *float64 {
	if d <= 0 {
		return nil
	}
	v := float64(n) / d
	return &v
}

// Summarize builds the summary of one run from its records and its duration
// in seconds (from the start of the run to the end of its last response).
// It is a pure function: the caller measures the duration.
func Summarize(cfg SummaryConfig, records []Record, durationS float64) Summary {
	return Summary{Config: cfg, Figures: FiguresOf(records, durationS, cfg.SLO)}
}

// goodput counts the records that met every objective of slo, over
// durationS seconds.
func goodput(slo SLO, records []Record, durationS float64) *Goodput {
	g := &Goodput{SLO: slo}
	tokens, withUsage := 0, 0
	for i := range records {
		if slo.Meets(&records[i]) {
			g.Met++
			if records[i].OutputTokens != nil {
				tokens += *records[i].OutputTokens
			}
			if records[i].hasUsage() {
				withUsage++
			}
		}
	}
	if len(records) > 0 {
		f := float64(g.Met) / float64(len(records))
		g.Fraction = &f
	}
	g.RequestsPerS = perSecond(g.Met, durationS)
	// No data only when requests met the objectives but none said how many
	// tokens it made; none meeting them is a measured zero.
	if withUsage > 0 || g.Met == 0 {
		g.OutputTokensPer = perSecond(tokens, durationS)
	}
	return g
}

// ReadSummary reads a .summary.json file.
func ReadSummary(path string) (*Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// AnyUsage reports whether any successful record carries the server's token
// usage: without it, output-token figures are unknown (null), not zero.
func AnyUsage(records []Record) bool {
	m := collect(records)
	return m.anyUsage()
}
