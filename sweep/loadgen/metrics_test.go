package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePrometheusText(t *testing.T) {
	text := `# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 3
vllm:num_requests_running{model_name="b"} 1
vllm:kv_cache_usage_perc{model_name="a",engine="0"} 0.25
vllm:num_preemptions_total 7 1700000000000
vllm:num_requests_waiting{model_name="a"} NaN-ish
other_metric 9
vllm:generation_tokens_total{label="with } brace"} 12
`
	got := ParsePrometheusText(strings.NewReader(text), ScrapedMetrics())
	assert.Equal(t, 4.0, got["vllm:num_requests_running"])
	assert.Equal(t, 0.25, got["vllm:kv_cache_usage_perc"])
	assert.Equal(t, 7.0, got["vllm:num_preemptions_total"])
	assert.Equal(t, 12.0, got["vllm:generation_tokens_total"])
	assert.NotContains(t, got, "vllm:num_requests_waiting")
	assert.NotContains(t, got, "other_metric")
}

func TestServedModelsAndVersion(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
	}{
		"/list/v1/models":    {200, `{"object":"list","data":[{"id":""},{"id":"a"},{"id":"b/c"}]}`},
		"/empty/v1/models":   {200, `{"object":"list","data":[]}`},
		"/broken/v1/models":  {500, `{"error":{}}`},
		"/list/version":      {200, `{"version":"0.9.1"}`},
		"/empty/version":     {200, `{"version":7}`},
		"/broken/version":    {500, `{"version":"0.9.1"}`},
		"/long/version":      {200, `{"version":"` + strings.Repeat("x", 300) + `"}`},
		"/notjson/v1/models": {200, `<html>`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	ctx := context.Background()
	ids, err := ServedModels(ctx, srv.Client(), srv.URL+"/list", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b/c"}, ids, "empty ids are skipped")
	for _, base := range []string{"/empty", "/broken", "/notjson", "/missing"} {
		_, err := ServedModels(ctx, srv.Client(), srv.URL+base, "")
		assert.Error(t, err, base)
	}
	assert.Equal(t, "0.9.1", ServerVersion(ctx, srv.Client(), srv.URL+"/list", ""))
	for _, base := range []string{"/empty", "/broken", "/long", "/missing"} {
		assert.Empty(t, ServerVersion(ctx, srv.Client(), srv.URL+base, ""), base)
	}
}
