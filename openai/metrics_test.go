package openai

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm"
)

var metricNames = []string{
	"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
	"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total",
	"vllm:request_success_total", "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
	"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
	"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
	"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds",
	"vllm:request_prompt_tokens", "vllm:request_generation_tokens",
	"vllm:request_params_max_tokens", "vllm:request_params_n", "vllm:iteration_tokens_total",
	"vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds",
	"vllm:request_max_num_generation_tokens",
}

// TestMetricsExposition compares the whole exposition, after one request on
// the fake's fixed timestamps, with testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	f := newFake()
	f.stats = llm.Stats{Running: 2, Waiting: 3, KVBlocksTotal: 8, KVBlocksUsed: 2, KVUsage: 0.25,
		Preemptions: 1, PromptTokens: 40, GenerationTokens: 7, PrefixCacheQueries: 48, PrefixCacheHits: 16}
	for _, n := range []int{1, 1, 40, 7, 20000} { // 1, 1, (32, 64], (1, 8], above 16384
		f.stats.StepTokens.Observe(n)
	}
	reg := prometheus.NewPedanticRegistry()
	h := NewHandler(f, WithRegistry(reg, reg), WithServedModelNames("tiny"))
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":3}`)
	require.Equal(t, 200, rec.Code)

	want, err := os.Open("testdata/metrics.txt")
	require.NoError(t, err)
	defer want.Close()
	require.NoError(t, testutil.GatherAndCompare(reg, want, metricNames...))

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	for _, p := range problems {
		// vLLM's names need the colon, and vLLM named a histogram
		// iteration_tokens_total; nothing else may be flagged.
		if p.Metric == "vllm:iteration_tokens_total" && strings.Contains(p.Text, `"_total" suffix`) {
			continue
		}
		assert.Equal(t, "metric names should not contain ':'", p.Text, p.Metric)
	}
	assert.Len(t, problems, len(metricNames)+1)

	// GET /metrics serves the same registry in the text format.
	rec = serve(t, h, "GET", "/metrics", "")
	require.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Body.String(), `vllm:kv_cache_usage_perc{model_name="tiny"} 0.25`)
}

// TestMetricsSharedRegistry: two handlers on one registry — same model
// reuses the collectors, another model adds its own series — and a fresh
// registry per handler by default, so nothing collides or panics.
func TestMetricsSharedRegistry(t *testing.T) {
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	a := NewHandler(newFake(), WithRegistry(reg, reg), WithServedModelNames("m1"), WithLogger(lg))
	b := NewHandler(newFake(), WithRegistry(reg, reg), WithServedModelNames("m1"), WithLogger(lg))
	c := NewHandler(newFake(), WithRegistry(reg, reg), WithServedModelNames("m2"), WithLogger(lg))
	for _, h := range []http.Handler{a, b, b, c} {
		rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`)
		require.Equal(t, 200, rec.Code)
	}
	_ = NewHandler(newFake()) // its own registry
	_ = NewHandler(newFake())
	out, err := testutil.GatherAndCount(reg, "vllm:request_success_total")
	require.NoError(t, err)
	assert.Equal(t, 2, out, "one series per model")
	assert.Equal(t, 3.0, successCount(t, reg, "m1"), "a and b share the m1 collectors")
	assert.Equal(t, 1.0, successCount(t, reg, "m2"))
	assert.NotContains(t, logs.String(), "level=ERROR", "reusing a collector is not an error")
}

func successCount(t *testing.T, reg prometheus.Gatherer, model string) float64 {
	t.Helper()
	v, ok := successTotal(t, reg, "model_name", model)
	if !ok {
		t.Fatalf("no series for %s", model)
	}
	return v
}

// successTotal is vllm:request_success_total for the first series whose
// label has the given value, and whether there is one.
func successTotal(t *testing.T, g prometheus.Gatherer, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "vllm:request_success_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// failingGatherer makes promhttp report an error through ErrorLog.
type failingGatherer struct{}

func (failingGatherer) Gather() ([]*dto.MetricFamily, error) { return nil, errors.New("gather broke") }

func TestMetricsErrorLog(t *testing.T) {
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	h := NewHandler(newFake(), WithRegistry(prometheus.NewRegistry(), failingGatherer{}), WithLogger(lg))
	rec := serve(t, h, "GET", "/metrics", "")
	assert.Equal(t, 500, rec.Code)
	assert.True(t, strings.Contains(logs.String(), "gather broke"), logs.String())
	assert.Contains(t, logs.String(), "request_id=")
}

func TestRegistryOptions(t *testing.T) {
	reg := prometheus.NewRegistry()
	// A nil gatherer serves the registry itself when it is one.
	h := NewHandler(newFake(), WithRegistry(reg, nil), WithServedModelNames("m"))
	rec := serve(t, h, "GET", "/metrics", "")
	require.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Body.String(), `vllm:num_requests_running{model_name="m"} 0`)
	// A registerer that is no gatherer: the host serves metrics, /metrics is empty.
	wrapped := prometheus.WrapRegistererWithPrefix("host_", reg)
	h = NewHandler(newFake(), WithRegistry(wrapped, nil), WithServedModelNames("w"))
	rec = serve(t, h, "GET", "/metrics", "")
	require.Equal(t, 200, rec.Code)
	assert.NotContains(t, rec.Body.String(), "vllm:")
	n, err := testutil.GatherAndCount(reg, "host_vllm:num_requests_running")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "registered through the host's registerer")
}

// TestRequestParamsHistograms: n is observed once per prompt and
// max_tokens once per choice (as it ran), as vLLM counts the requests a
// list of prompts splits into; a rejected request is not observed.
func TestRequestParamsHistograms(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := NewHandler(newFake(), WithRegistry(reg, reg))
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":["a","b"],"n":3,"max_tokens":4}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1000}`)
	require.Equal(t, 400, rec.Code, "context length")
	// max_tokens null is observed as each prompt ran: 62 and 60 of the
	// fake's 64-token context.
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":["ab","abcd"],"max_tokens":null}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string][2]float64{}
	for _, mf := range mfs {
		if hs := mf.GetMetric(); len(hs) == 1 && hs[0].GetHistogram() != nil {
			got[mf.GetName()] = [2]float64{float64(hs[0].GetHistogram().GetSampleCount()), hs[0].GetHistogram().GetSampleSum()}
		}
	}
	assert.Equal(t, [2]float64{4, 8}, got["vllm:request_params_n"], "two prompts of n=3, two of n=1")
	assert.Equal(t, [2]float64{8, 24 + 62 + 60}, got["vllm:request_params_max_tokens"], "six choices of max_tokens 4, then 62 and 60")
	assert.Equal(t, [2]float64{4, 8 + 62 + 60}, got["vllm:request_max_num_generation_tokens"], "two prompts, each with choices of 4 tokens, then 62 and 60")
}

// TestRequestTPOTSingleToken: a choice of one token is observed as 0 in
// vllm:request_time_per_output_token_seconds, as vLLM does, so the
// histogram counts every finished choice like the e2e one.
func TestRequestTPOTSingleToken(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := NewHandler(newFake(), WithRegistry(reg, reg))
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	sums := map[string]float64{}
	for _, mf := range mfs {
		if hs := mf.GetMetric(); len(hs) == 1 && hs[0].GetHistogram() != nil {
			counts[mf.GetName()] = hs[0].GetHistogram().GetSampleCount()
			sums[mf.GetName()] = hs[0].GetHistogram().GetSampleSum()
		}
	}
	assert.Equal(t, uint64(1), counts["vllm:request_time_per_output_token_seconds"])
	assert.Equal(t, 0.0, sums["vllm:request_time_per_output_token_seconds"])
	assert.Equal(t, counts["vllm:e2e_request_latency_seconds"], counts["vllm:request_time_per_output_token_seconds"])
}

// TestPartlyAdmittedRequestCountsNothing: an engine that accepts some of a
// request's choices and refuses the next answers the client 429, and the
// choices it had accepted (then aborted) must not show in /metrics as
// aborted requests: for the client and in vLLM, where the n choices are
// one request admitted whole or not at all, nothing was admitted.
func TestPartlyAdmittedRequestCountsNothing(t *testing.T) {
	f := newFake()
	f.genErr, f.admit = llm.ErrOverloaded, 2
	reg := prometheus.NewPedanticRegistry()
	h := NewHandler(f, WithRegistry(reg, reg))
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","n":3,"max_tokens":4}`)
	require.Equal(t, 429, rec.Code, rec.Body.String())
	f.wg.Wait() // the two admitted choices were cancelled
	require.Len(t, f.requests(), 3)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				assert.Zero(t, m.GetCounter().GetValue(), "%s %v", mf.GetName(), m.GetLabel())
			case m.GetHistogram() != nil:
				assert.Zero(t, m.GetHistogram().GetSampleCount(), mf.GetName())
			}
		}
	}
}
