package sweep

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// TestRunMetricsIncludeLastRequests runs against a server whose success
// counter shows a run's requests one scrape late: the after scrape is
// repeated until it counts them all, so the run's metrics cover the run.
func TestRunMetricsIncludeLastRequests(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{LagSuccess: true})
	prompts := writePrompts(t, dir, 8, 2)
	cfgJSON := sweepConfigJSON(f.URL(), prompts, []int{2}, 8, 0, 1)
	res, err := runTestSweep(t, context.Background(), cfgJSON, dir, func(o *SweepOptions) { o.MetricsInterval = -1 })
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(res.Root, "repeat-01/concurrency-002.metrics.json"))
	require.NoError(t, err)
	var rm loadgen.RunMetrics
	require.NoError(t, json.Unmarshal(b, &rm))
	assert.Equal(t, float64(f.Answered.Load()), rm.After.Values["vllm:request_success_total"], "every answer counted: %s", b)
	assert.Equal(t, 2, rm.AfterScrapes, "the first after scrape still showed the counter as before")
	assert.False(t, rm.AfterUnsettled)
}
