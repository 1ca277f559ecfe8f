package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ScrapedMetrics returns the names of the server metrics kept beside each
// run: the gauges and counters that explain a plateau (queueing, running
// batch, KV usage, preemptions, the server's queue, prefill and decode
// times) or a result too good to be true (prompt tokens served from the
// prefix cache). Names are vLLM's; tinyserve serves the same
// ones. A function, so that no caller can change the list for everyone.
func ScrapedMetrics() []string { return slices.Clone(scrapedMetrics) }

var scrapedMetrics = []string{
	"vllm:num_requests_running",
	"vllm:num_requests_waiting",
	"vllm:kv_cache_usage_perc",
	"vllm:gpu_cache_usage_perc", // older vLLM name of kv_cache_usage_perc
	"vllm:num_preemptions_total",
	"vllm:prompt_tokens_total",
	"vllm:generation_tokens_total",
	"vllm:request_success_total",
	"vllm:prefix_cache_queries_total",
	"vllm:prefix_cache_hits_total",
	// The server's own account of where a request's time went: the sums
	// and counts of vLLM's phase histograms, whose change across a run
	// gives the run's mean queue, prefill and decode times.
	"vllm:request_queue_time_seconds_sum",
	"vllm:request_queue_time_seconds_count",
	"vllm:request_prefill_time_seconds_sum",
	"vllm:request_prefill_time_seconds_count",
	"vllm:request_decode_time_seconds_sum",
	"vllm:request_decode_time_seconds_count",
}

// MetricsSnapshot is one scrape of /metrics.
type MetricsSnapshot struct {
	// Time is when the scrape finished (RFC 3339, UTC).
	Time string `json:"time"`
	// Available is false when the server has no /metrics (or it failed);
	// Error then says why.
	Available bool   `json:"available"`
	Error     string `json:"error,omitempty"`
	// Values holds each metric of ScrapedMetrics that the server exposes,
	// summed over its label sets.
	Values map[string]float64 `json:"values,omitempty"`
}

// RunMetrics is a run's .metrics.json: the server's metrics just before and
// just after the run, and the largest value of each seen while it ran
// (gauges such as running requests and KV usage are back at zero by the time
// a run ends, so before and after alone would hide the peak).
type RunMetrics struct {
	URL    string          `json:"url"`
	Before MetricsSnapshot `json:"before"`
	After  MetricsSnapshot `json:"after"`
	// DuringMax is the maximum of each metric over the scrapes made while
	// the run was in flight; DuringSamples counts those scrapes.
	DuringMax     map[string]float64 `json:"during_max,omitempty"`
	DuringSamples int                `json:"during_samples"`
	// AfterScrapes counts the scrapes made for After: more than one when
	// the server's vllm:request_success_total had not yet counted every
	// request the run saw answered, as a server that updates its counters
	// after the last byte (vLLM's stats follow its outputs) shows for a
	// moment. AfterUnsettled is true when it still had not after
	// settleTimeout: After may then undercount the run's last requests.
	AfterScrapes   int  `json:"after_scrapes,omitempty"`
	AfterUnsettled bool `json:"after_unsettled,omitempty"`
}

// successMetric is the counter settledAfter waits on.
const successMetric = "vllm:request_success_total"

// settledAfter scrapes /metrics after a run until the server's
// request_success_total has grown since before by at least answered, the
// requests the client saw answered in full (each finished on the server, so
// each is counted there), or until timeout. Without the wait, the token
// counters, phase histograms and prefix-cache counters of the run's last
// requests could land after the scrape and be missed. A server without
// the counter gets one scrape. It returns the last scrape, how many were
// made and whether the counter was there but never caught up.
func settledAfter(ctx context.Context, before MetricsSnapshot, answered int, timeout, poll time.Duration,
	scrape func() MetricsSnapshot) (MetricsSnapshot, int, bool) {
	deadline := time.Now().Add(timeout)
	for n := 1; ; n++ {
		s := scrape()
		start, okBefore := before.Values[successMetric]
		end, okAfter := s.Values[successMetric]
		if !s.Available || !before.Available || !okBefore || !okAfter || end-start >= float64(answered) {
			return s, n, false
		}
		if !time.Now().Add(poll).Before(deadline) {
			return s, n, true
		}
		select {
		case <-ctx.Done():
			return s, n, true
		case <-time.After(poll):
		}
	}
}

// watchMetrics scrapes base/metrics every interval until ctx ends and
// returns the per-metric maxima and the number of successful scrapes.
func watchMetrics(ctx context.Context, client *http.Client, base, apiKey string, interval time.Duration, now func() time.Time) (map[string]float64, int) {
	maxima := map[string]float64{}
	n := 0
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return maxima, n
		case <-t.C:
		}
		s := ScrapeMetrics(ctx, client, base, apiKey, now)
		if !s.Available {
			continue
		}
		n++
		for k, v := range s.Values {
			if cur, ok := maxima[k]; !ok || v > cur {
				maxima[k] = v
			}
		}
	}
}

// ParsePrometheusText reads the Prometheus text exposition format and
// returns, for each metric in names, the sum of its samples over all label
// sets. Metrics not present are absent from the map. Lines it cannot read
// are skipped: metrics are context, never a reason to fail a sweep.
func ParsePrometheusText(r io.Reader, names []string) map[string]float64 {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !want[name] {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out
}

// ServerBase returns the server's root URL from a completions or chat
// completions URL: http://h:8000/v1/completions -> http://h:8000.
// Credentials and queries are dropped.
func ServerBase(completionsURL string) (string, error) {
	u, err := url.Parse(completionsURL)
	if err != nil {
		return "", err
	}
	p := u.Path
	if i := strings.LastIndex(p, "/v1/"); i >= 0 {
		p = p[:i]
	} else if q, ok := strings.CutSuffix(p, "/chat/completions"); ok {
		p = q
	} else {
		p = strings.TrimSuffix(p, "/completions")
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}).String(), nil
}

// GetText GETs url with the bearer token (if any), returning at most limit
// bytes of a 200 body.
func GetText(ctx context.Context, client *http.Client, u, apiKey string, limit int64) ([]byte, error) {
	resp, cancel, err := get(ctx, client, u, apiKey, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return b, nil
}

// get GETs u with the bearer token (if any) within timeout, which also
// bounds reading the body: the caller reads it, closes it, then calls
// cancel. On error nothing is left to close or cancel.
func get(ctx context.Context, client *http.Client, u, apiKey string, timeout time.Duration) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// ScrapeMetrics fetches base/metrics and keeps ScrapedMetrics. now stamps
// the snapshot.
func ScrapeMetrics(ctx context.Context, client *http.Client, base, apiKey string, now func() time.Time) MetricsSnapshot {
	b, err := GetText(ctx, client, base+"/metrics", apiKey, 16<<20)
	s := MetricsSnapshot{Time: now().UTC().Format(time.RFC3339Nano)}
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Available = true
	s.Values = ParsePrometheusText(strings.NewReader(string(b)), scrapedMetrics)
	return s
}

// ServerVersion asks base/version for the server's version, which vLLM and
// tinyserve serve as {"version": "..."}; "" when the server does not say
// (no such route, an error, another shape). A run records it as evidence of
// what software it measured.
func ServerVersion(ctx context.Context, client *http.Client, base, apiKey string) string {
	b, err := GetText(ctx, client, base+"/version", apiKey, 64<<10)
	if err != nil {
		return ""
	}
	var v struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &v) != nil || len(v.Version) > 256 {
		return ""
	}
	return v.Version
}

// ServedModels asks base/v1/models which models the server serves and
// returns their ids in the server's order; an error when it gives no answer,
// answers with an error status, or lists none.
func ServedModels(ctx context.Context, client *http.Client, base, apiKey string) ([]string, error) {
	b, err := GetText(ctx, client, base+"/v1/models", apiKey, 1<<20)
	if err != nil {
		return nil, err
	}
	ids := ServedModelIDs(b)
	if len(ids) == 0 {
		return nil, fmt.Errorf("GET %s/v1/models: no model listed", base)
	}
	return ids, nil
}

// ServedModelIDs returns the model ids of a /v1/models answer, or nil when b
// is not one.
func ServedModelIDs(b []byte) []string {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &list) != nil {
		return nil
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
