package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

func combinedOf(name string, levels []int, tps, p99 []float64) *Combined {
	c := &Combined{Config: map[string]any{"name": name}}
	var points []LevelPoint
	for i, l := range levels {
		a := LevelAggregate{Concurrency: l, RepeatMedians: RepeatMedians{OutputTokenThroughput: f64(tps[i]), LatencyP99S: f64(p99[i]), RequestThroughput: f64(tps[i] / 10)}}
		c.ByConcurrency = append(c.ByConcurrency, a)
		points = append(points, LevelPoint{Concurrency: l, OutputTokensPerS: a.RepeatMedians.OutputTokenThroughput, LatencyP99S: a.RepeatMedians.LatencyP99S})
	}
	c.Saturation = Saturation(points, DefaultThroughputGain, DefaultP99Rise)
	return c
}

func TestCompare(t *testing.T) {
	a := combinedOf("vllm", []int{1, 2, 4}, []float64{100, 103, 104}, []float64{1, 1.25, 1.55})
	b := combinedOf("tinyserve", []int{1, 2, 8}, []float64{50, 100, 120}, []float64{2, 2, 3})
	a.ServerVersions = []string{"0.9.1"}
	cmp := Compare(a, b)
	require.Len(t, cmp.Rows, 4)
	assert.Equal(t, []int{1, 2, 4, 8}, []int{cmp.Rows[0].Concurrency, cmp.Rows[1].Concurrency, cmp.Rows[2].Concurrency, cmp.Rows[3].Concurrency})
	tok := cmp.Rows[0].Metrics[0]
	assert.Equal(t, "output tok/s", tok.Name)
	assert.InDelta(t, 0.5, *tok.Ratio, 1e-12)
	assert.InDelta(t, 2.0, *cmp.Rows[0].Metrics[2].Ratio, 1e-12)
	assert.Nil(t, cmp.Rows[2].Metrics[0].B, "level 4 only in A")
	assert.Nil(t, cmp.Rows[2].Metrics[0].Ratio)
	assert.Nil(t, cmp.Rows[0].Metrics[3].Ratio, "missing TTFT never divides")

	var sb strings.Builder
	require.NoError(t, cmp.WriteTable(&sb))
	out := sb.String()
	assert.Contains(t, out, "A: vllm (server 0.9.1)\nB: tinyserve\n")
	assert.Contains(t, out, "0.500x")
	assert.Contains(t, out, "saturation candidate: A 2, B not demonstrated")
}

func TestReadCombinedDirOrFile(t *testing.T) {
	dir := t.TempDir()
	c := combinedOf("x", []int{1}, []float64{1}, []float64{1})
	b, err := files.MarshalIndent(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, files.SummaryFile), b, 0o644))
	for _, p := range []string{dir, filepath.Join(dir, files.SummaryFile)} {
		got, err := ReadCombined(p)
		require.NoError(t, err)
		assert.Equal(t, 1, got.ByConcurrency[0].Concurrency)
	}
	_, err = ReadCombined(filepath.Join(dir, "missing"))
	assert.Error(t, err)
}

// TestReadCombinedRejectsNonSummaries: a JSON file that is not a sweep's
// summary.json is an error, not a comparison of blank names and n/a.
func TestReadCombinedRejectsNonSummaries(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty object":           `{}`,
		"null":                   `null`,
		"no by_concurrency":      `{"config":{"name":"x"},"saturation":{}}`,
		"empty by_concurrency":   `{"config":{"name":"x"},"by_concurrency":[]}`,
		"no config":              `{"by_concurrency":[{"concurrency":1}]}`,
		"config not an object":   `{"config":"x","by_concurrency":[{"concurrency":1}]}`,
		"run summary, not sweep": `{"config":{"url":"u"},"counts":{"attempted":1}}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := ReadCombined(p)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrNotSweepSummary, name)
		assert.Contains(t, err.Error(), p, name)
	}
}

// TestCompareWarnsOfIncomparableSweeps: every setting that makes ratios
// measure something other than the servers gets a warning; identical
// settings get none.
func TestCompareWarnsOfIncomparableSweeps(t *testing.T) {
	mk := func(mod func(cfg map[string]any, c *Combined)) *Combined {
		c := combinedOf("s", []int{1, 2}, []float64{100, 150}, []float64{1, 1.2})
		c.Config = map[string]any{"name": "s", "model": "m", "url": "http://a", "num_requests": 64.0, "stream": true,
			"ignore_eos": true, "temperature": 0.0, "extra_body": map[string]any{"top_k": 5.0, "seed": 1.0}}
		c.Workload = &ManifestWorkload{Path: "p.jsonl", SHA256: "aaa"}
		for i := range c.ByConcurrency {
			c.ByConcurrency[i].Counts = loadgen.Counts{Attempted: 64, Successful: 64, OutputTokens: 64 * 32}
		}
		if mod != nil {
			mod(c.Config.(map[string]any), c)
		}
		return c
	}
	base := mk(nil)
	same := mk(func(cfg map[string]any, _ *Combined) {
		cfg["url"], cfg["model"], cfg["name"] = "http://b", "other", "t" // what a comparison is about
		cfg["extra_body"] = map[string]any{"seed": 1.0, "top_k": 5.0}
	})
	assert.Empty(t, Compare(base, same).Warnings)

	cases := []struct {
		name string
		mod  func(cfg map[string]any, c *Combined)
		want string
	}{
		{"workload", func(_ map[string]any, c *Combined) { c.Workload.SHA256 = "bbb" }, "different workloads: prompt file SHA-256 A aaa, B bbb"},
		{"workload unknown", func(_ map[string]any, c *Combined) { c.Workload = nil }, "workload SHA-256 not recorded"},
		{"num_requests", func(cfg map[string]any, _ *Combined) { cfg["num_requests"] = 32.0 }, "different num_requests: A 64, B 32"},
		{"stream", func(cfg map[string]any, _ *Combined) { cfg["stream"] = false }, "different stream: A true, B false"},
		{"ignore_eos", func(cfg map[string]any, _ *Combined) { delete(cfg, "ignore_eos") }, "different ignore_eos: A true, B false"},
		{"temperature", func(cfg map[string]any, _ *Combined) { cfg["temperature"] = 0.2 }, "different temperature: A 0, B 0.2"},
		{"extra_body", func(cfg map[string]any, _ *Combined) { delete(cfg, "extra_body") }, "different extra_body"},
		{"output tokens", func(_ map[string]any, c *Combined) { c.ByConcurrency[1].Counts.OutputTokens = 64 * 20 }, "different output tokens per request (concurrency 2: A 32, B 20)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmp := Compare(base, mk(tc.mod))
			require.Len(t, cmp.Warnings, 1, "%q", cmp.Warnings)
			assert.Contains(t, cmp.Warnings[0], tc.want)
			var sb strings.Builder
			require.NoError(t, cmp.WriteTable(&sb))
			assert.Contains(t, sb.String(), "warning: "+tc.want)
		})
	}
}

// serving-inference's summary.json does not record the workload, but its
// manifest.json does: comparing a sweep folder of that tool reads it there,
// instead of warning that the prompt files could not be compared (and
// missing that they differ).
func TestReadCombinedWorkloadFromManifest(t *testing.T) {
	write := func(sha string) string {
		dir := t.TempDir()
		b, err := files.MarshalIndent(combinedOf("si", []int{1}, []float64{1}, []float64{1}))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, files.SummaryFile), b, 0o644))
		m := `{"schema_version": "1.0", "workload": {"path": "/x/prompts/mixed.jsonl", "sha256": "` + sha + `"}}`
		require.NoError(t, os.WriteFile(filepath.Join(dir, files.ManifestFile), []byte(m), 0o644))
		return dir
	}
	sha := strings.Repeat("a", 64)
	a, err := ReadCombined(write(sha))
	require.NoError(t, err)
	require.NotNil(t, a.Workload)
	assert.Equal(t, sha, a.Workload.SHA256)
	b, err := ReadCombined(filepath.Join(write(strings.Repeat("b", 64)), files.SummaryFile))
	require.NoError(t, err)
	assert.Contains(t, Compare(a, b).Warnings, "different workloads: prompt file SHA-256 A "+sha+", B "+strings.Repeat("b", 64))

	// A summary.json that records its workload keeps it.
	c := combinedOf("ts", []int{1}, []float64{1}, []float64{1})
	c.Workload = &ManifestWorkload{Path: "p", SHA256: strings.Repeat("c", 64)}
	dir := t.TempDir()
	cb, err := files.MarshalIndent(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, files.SummaryFile), cb, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, files.ManifestFile), []byte(`{"workload": {"sha256": "`+sha+`"}}`), 0o644))
	got, err := ReadCombined(dir)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("c", 64), got.Workload.SHA256)
}
