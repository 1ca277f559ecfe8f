package loadgen

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keysInOrder returns the top-level keys of a JSON object in file order.
func keysInOrder(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	_, err := dec.Token()
	require.NoError(t, err)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

// A successful record starts with serving-inference's keys in its order
// (send_one in scripts/send_requests.py) and only appends tinyserve's.
func TestRecordKeysFollowServingInference(t *testing.T) {
	n, m := 3, 0
	rec := Record{SchemaVersion: "1.0", Status: 200, InterChunkS: []float64{}, StreamTextEventCount: &n, MalformedStreamEvents: &m}
	b, err := json.Marshal(&rec)
	require.NoError(t, err)
	python := []string{"schema_version", "id", "request_index", "workload", "prompt_tokens", "target_prompt_tokens",
		"target_output_tokens", "status", "started_offset_s", "ended_offset_s", "latency_s", "ttft_s",
		"approx_time_per_output_token_s", "observed_inter_chunk_latency_s", "output_tokens",
		"server_token_usage_present", "finish_reason", "stream_text_event_count", "malformed_stream_events"}
	keys := keysInOrder(t, b)
	assert.Equal(t, python, keys[:len(python)])
	assert.Equal(t, []string{"bucket", "x_request_id", "client_queue_s", "connection_reused"}, keys[len(python):])

	s := Summarize(SummaryConfig{}, nil, 1)
	b, err = json.Marshal(&s)
	require.NoError(t, err)
	keys = keysInOrder(t, b)
	assert.Equal(t, []string{"config", "counts", "duration_s", "request_throughput_per_s", "output_token_throughput_per_s",
		"latency_s", "ttft_s", "approx_time_per_output_token_s", "observed_inter_chunk_latency_s"}, keys[:9])
}
