package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// Runs written by serving-inference itself (no tinyserve fields) count as
// complete, so a sweep started with the Python tool can be resumed here.
func TestCheckRunAcceptsServingInferenceFiles(t *testing.T) {
	root := t.TempDir()
	spec := analysis.RunSpec{Kind: analysis.KindRepeat, Index: 1, Concurrency: 2}
	require.NoError(t, os.MkdirAll(filepath.Join(root, spec.Dir()), 0o755))
	var lines []string
	for i := range 2 {
		lines = append(lines, fmt.Sprintf(`{"schema_version": "1.0", "id": "mixed_%06d", "request_index": %d, "workload": "mixed", "prompt_tokens": 128, "target_prompt_tokens": 128, "target_output_tokens": 64, "status": 200, "started_offset_s": 0.0, "ended_offset_s": 1.5, "latency_s": 1.5, "ttft_s": 0.05, "approx_time_per_output_token_s": 0.02, "observed_inter_chunk_latency_s": [0.02, 0.02], "output_tokens": 64, "server_token_usage_present": true, "finish_reason": "length", "stream_text_event_count": 64, "malformed_stream_events": 0}`, i, i))
	}
	require.NoError(t, os.WriteFile(spec.RawPath(root), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	summary := `{
  "config": {"url": "http://localhost:8000/v1/completions", "model": "Qwen/Qwen2.5-0.5B-Instruct", "num_requests": 2, "concurrency": 2, "stream": true, "temperature": 0.0, "store_response": false, "result_schema_version": "1.0"},
  "counts": {"attempted": 2, "successful": 2, "failed": 0, "output_tokens": 128},
  "duration_s": 1.6,
  "request_throughput_per_s": 1.25,
  "output_token_throughput_per_s": 80.0,
  "latency_s": {"count": 2, "mean": 1.5, "p50": 1.5, "p90": 1.5, "p99": 1.5},
  "ttft_s": {"count": 2, "mean": 0.05, "p50": 0.05, "p90": 0.05, "p99": 0.05},
  "approx_time_per_output_token_s": {"count": 2, "mean": 0.02, "p50": 0.02, "p90": 0.02, "p99": 0.02},
  "observed_inter_chunk_latency_s": {"count": 4, "mean": 0.02, "p50": 0.02, "p90": 0.02, "p99": 0.02}
}
`
	require.NoError(t, os.WriteFile(spec.SummaryPath(root), []byte(summary), 0o644))
	complete, err := runIsComplete(root, spec, 2)
	require.NoError(t, err)
	assert.True(t, complete)
	s, err := loadgen.ReadSummary(spec.SummaryPath(root))
	require.NoError(t, err)
	assert.Equal(t, 1.5, *s.LatencyS.P99)
	assert.Nil(t, s.LatencyS.P999, "keys the Python tool does not write stay null")

	// A failed Python record ("status": "error") is recognised as a failure.
	bad := strings.Replace(lines[1], `"status": 200`, `"status": "error"`, 1)
	require.NoError(t, os.WriteFile(spec.RawPath(root), []byte(lines[0]+"\n"+bad+"\n"), 0o644))
	_, err = runIsComplete(root, spec, 2)
	assert.ErrorContains(t, err, "failed requests")
}
