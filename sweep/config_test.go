package sweep

import (
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const validConfig = `{
  "name": "n",
  "prompts": "prompts/mixed.jsonl",
  "url": "http://localhost:8000/v1/completions",
  "model": "m",
  "model_metadata": {"revision": "main", "dtype": "half", "quantization": null, "max_model_len": 2200},
  "server": {"discovery": "explicit", "launch_flags": ["--port", "8000"]},
  "num_requests": 32,
  "concurrency": [1, 2, 4],
  "warmups": 1,
  "repeats": 3,
  "seed": 20260729
}`

func mutate(t *testing.T, f func(m map[string]any)) []byte {
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(validConfig), &m))
	f(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig([]byte(validConfig))
	require.NoError(t, err)
	assert.True(t, c.Stream)
	assert.Equal(t, 300.0, c.Timeout)
	assert.Equal(t, "results/experiments", c.OutputDir)
	assert.Zero(t, c.Temperature)
	assert.False(t, c.Embedded())
	r := c.resolve("/work")
	assert.Equal(t, "/work/prompts/mixed.jsonl", r.Prompts)
	assert.Equal(t, "/work/results/experiments", r.OutputDir)
	assert.Equal(t, "prompts/mixed.jsonl", c.Prompts, "Resolve copies")
}

func TestParseConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		field string
		mod   func(m map[string]any)
	}{
		{"name", func(m map[string]any) { delete(m, "name") }},
		{"name", func(m map[string]any) { m["name"] = "../x" }},
		{"name", func(m map[string]any) { m["name"] = ".." }},
		{"prompts", func(m map[string]any) { delete(m, "prompts") }},
		{"url", func(m map[string]any) { delete(m, "url") }},
		{"url", func(m map[string]any) { m["url"] = "localhost:8000" }},
		{"model", func(m map[string]any) { delete(m, "model") }},
		{"model_metadata", func(m map[string]any) { delete(m, "model_metadata") }},
		{"model_metadata.quantization", func(m map[string]any) { delete(m["model_metadata"].(map[string]any), "quantization") }},
		{"server", func(m map[string]any) { delete(m, "server") }},
		{"server.launch_flags", func(m map[string]any) { delete(m["server"].(map[string]any), "launch_flags") }},
		{"server", func(m map[string]any) { m["server"].(map[string]any)["launch_flags"] = "x" }},
		{"num_requests", func(m map[string]any) { m["num_requests"] = 0 }},
		{"num_requests", func(m map[string]any) { m["num_requests"] = 1.5 }},
		{"num_requests", func(m map[string]any) { m["num_requests"] = "32" }},
		{"concurrency", func(m map[string]any) { m["concurrency"] = []int{} }},
		{"concurrency[1]", func(m map[string]any) { m["concurrency"] = []int{1, 0} }},
		{"concurrency[2]", func(m map[string]any) { m["concurrency"] = []int{1, 2, 1} }},
		{"warmups", func(m map[string]any) { m["warmups"] = -1 }},
		{"repeats", func(m map[string]any) { m["repeats"] = 0 }},
		{"repeats", func(m map[string]any) { m["repeats"] = 1_000_000_000 }},
		{"repeats", func(m map[string]any) { m["warmups"], m["repeats"] = math.MaxInt64, math.MaxInt64 }},
		{"repeats", func(m map[string]any) { m["repeats"] = maxRuns / 3 }}, // three levels, one warmup
		{"seed", func(m map[string]any) { m["seed"] = 1.5 }},
		{"seed", func(m map[string]any) { delete(m, "seed") }},
		{"timeout", func(m map[string]any) { m["timeout"] = 0 }},
		{"timeout", func(m map[string]any) { m["timeout"] = 1e10 }},  // overflows time.Duration
		{"timeout", func(m map[string]any) { m["timeout"] = 1e-10 }}, // rounds to 0 ns, which meant 300 s
		{"temperature", func(m map[string]any) { m["temperature"] = -1 }},
		{"stream", func(m map[string]any) { m["stream"] = "yes" }},
		{"extra_body", func(m map[string]any) { m["extra_body"] = []int{1} }},
		{"extra_body.prompt", func(m map[string]any) { m["extra_body"] = map[string]any{"prompt": "x"} }},
		{"target.kind", func(m map[string]any) { m["target"] = map[string]any{"kind": "remote"} }},
		{"target", func(m map[string]any) { m["target"] = map[string]any{"kind": "embedded", "typo": 1} }},
		{"target.engine", func(m map[string]any) { m["target"] = map[string]any{"kind": "embedded"} }},
		{"slo", func(m map[string]any) { m["slo"] = map[string]any{"ttft": 1} }},
		{"slo", func(m map[string]any) { m["stream"], m["slo"] = false, map[string]any{"ttft_s": 1} }},
		{"bogus_field", func(m map[string]any) { m["bogus_field"] = 1 }},
		// null is not "left out": serving-inference refuses a null seed
		// or warmups, fails on a null temperature or timeout, and reads a
		// null stream as false; taking any of them as the default would
		// make the same config mean something else here.
		{"seed", func(m map[string]any) { m["seed"] = nil }},
		{"warmups", func(m map[string]any) { m["warmups"] = nil }},
		{"stream", func(m map[string]any) { m["stream"] = nil }},
		{"temperature", func(m map[string]any) { m["temperature"] = nil }},
		{"timeout", func(m map[string]any) { m["timeout"] = nil }},
		{"model_metadata", func(m map[string]any) { m["model_metadata"] = nil }},
	}
	for _, c := range cases {
		_, err := parseConfig(mutate(t, c.mod))
		require.Error(t, err, c.field)
		assert.True(t, errors.Is(err, ErrConfig), "%v", err)
		assert.Contains(t, err.Error(), c.field+":", "error should name %s: %v", c.field, err)
	}
	_, err := parseConfig([]byte(`[1]`))
	assert.True(t, errors.Is(err, ErrConfig))
}

func TestParseConfigEmbedded(t *testing.T) {
	b := mutate(t, func(m map[string]any) {
		delete(m, "url")
		delete(m, "model")
		delete(m, "server")
		m["target"] = map[string]any{"kind": "embedded", "engine": map[string]any{"backend": "mock"}}
		m["ignore_eos"] = true
		m["extra_body"] = map[string]any{"top_k": 1}
		m["slo"] = map[string]any{"ttft_s": 0.5}
	})
	c, err := parseConfig(b)
	require.NoError(t, err)
	assert.True(t, c.Embedded())
	assert.JSONEq(t, `{"backend":"mock"}`, string(c.Target.Engine))
	assert.Equal(t, 0.5, c.SLO.TTFTS)
	assert.True(t, c.IgnoreEOS)
}

func TestLoadConfigServingInferenceExample(t *testing.T) {
	c, err := LoadConfig(filepath.Join("..", "testdata", "serving-inference", "experiments", "example.json"))
	if err != nil && strings.Contains(err.Error(), "no such file") {
		t.Skip("fixture not available")
	}
	require.NoError(t, err)
	assert.Equal(t, "rtx-2060-super-range-finding", c.Name)
	assert.Equal(t, []int{1, 2, 4, 8, 12, 16, 24, 32}, c.Concurrency)
	assert.Equal(t, int64(20260729), c.Seed)
}

// TestParseConfigLongTimeout: a timeout that a Duration can hold is
// accepted as written (loadgen's TestTimeoutDuration checks the
// conversion itself).
func TestParseConfigLongTimeout(t *testing.T) {
	c, err := parseConfig(mutate(t, func(m map[string]any) { m["timeout"] = 9e9 }))
	require.NoError(t, err)
	assert.Equal(t, 9e9, c.Timeout)
}
