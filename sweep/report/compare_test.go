package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

func TestCompare(t *testing.T) {
	a := combinedOf("vllm", []int{1, 2, 4}, []float64{100, 103, 104}, []float64{1, 1.25, 1.55})
	b := combinedOf("tinyserve", []int{1, 2, 8}, []float64{50, 100, 120}, []float64{2, 2, 3})
	a.ServerVersions = []string{"0.9.1"}
	cmp := analysis.Compare(a, b)
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
	require.NoError(t, WriteComparison(&sb, cmp))
	out := sb.String()
	assert.Contains(t, out, "A: vllm (server 0.9.1)\nB: tinyserve\n")
	assert.Contains(t, out, "0.500x")
	assert.Contains(t, out, "saturation candidate: A 2, B not demonstrated")
}

// TestCompareWarnsOfIncomparableSweeps: every setting that makes ratios
// measure something other than the servers gets a warning; identical
// settings get none.
func TestCompareWarnsOfIncomparableSweeps(t *testing.T) {
	mk := func(mod func(cfg map[string]any, c *analysis.Combined)) *analysis.Combined {
		c := combinedOf("s", []int{1, 2}, []float64{100, 150}, []float64{1, 1.2})
		c.Config = map[string]any{"name": "s", "model": "m", "url": "http://a", "num_requests": 64.0, "stream": true,
			"ignore_eos": true, "temperature": 0.0, "extra_body": map[string]any{"top_k": 5.0, "seed": 1.0}}
		c.Workload = &analysis.Workload{Path: "p.jsonl", SHA256: "aaa"}
		for i := range c.ByConcurrency {
			c.ByConcurrency[i].Counts = loadgen.Counts{Attempted: 64, Successful: 64, OutputTokens: 64 * 32}
		}
		if mod != nil {
			mod(c.Config.(map[string]any), c)
		}
		return c
	}
	base := mk(nil)
	same := mk(func(cfg map[string]any, _ *analysis.Combined) {
		cfg["url"], cfg["model"], cfg["name"] = "http://b", "other", "t" // what a comparison is about
		cfg["extra_body"] = map[string]any{"seed": 1.0, "top_k": 5.0}
	})
	assert.Empty(t, analysis.Compare(base, same).Warnings)

	cases := []struct {
		name string
		mod  func(cfg map[string]any, c *analysis.Combined)
		want string
	}{
		{"workload", func(_ map[string]any, c *analysis.Combined) { c.Workload.SHA256 = "bbb" }, "different workloads: prompt file SHA-256 A aaa, B bbb"},
		{"workload unknown", func(_ map[string]any, c *analysis.Combined) { c.Workload = nil }, "workload SHA-256 not recorded"},
		{"num_requests", func(cfg map[string]any, _ *analysis.Combined) { cfg["num_requests"] = 32.0 }, "different num_requests: A 64, B 32"},
		{"stream", func(cfg map[string]any, _ *analysis.Combined) { cfg["stream"] = false }, "different stream: A true, B false"},
		{"ignore_eos", func(cfg map[string]any, _ *analysis.Combined) { delete(cfg, "ignore_eos") }, "different ignore_eos: A true, B false"},
		{"temperature", func(cfg map[string]any, _ *analysis.Combined) { cfg["temperature"] = 0.2 }, "different temperature: A 0, B 0.2"},
		{"extra_body", func(cfg map[string]any, _ *analysis.Combined) { delete(cfg, "extra_body") }, "different extra_body"},
		{"output tokens", func(_ map[string]any, c *analysis.Combined) { c.ByConcurrency[1].Counts.OutputTokens = 64 * 20 }, "different output tokens per request (concurrency 2: A 32, B 20)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmp := analysis.Compare(base, mk(tc.mod))
			require.Len(t, cmp.Warnings, 1, "%q", cmp.Warnings)
			assert.Contains(t, cmp.Warnings[0], tc.want)
			var sb strings.Builder
			require.NoError(t, WriteComparison(&sb, cmp))
			assert.Contains(t, sb.String(), "warning: "+tc.want)
		})
	}
}

// combinedOf is a sweep with one measured level per entry of levels (as
// analysis's tests make it).
func combinedOf(name string, levels []int, tps, p99 []float64) *analysis.Combined {
	c := &analysis.Combined{Config: map[string]any{"name": name}}
	var points []analysis.LevelPoint
	for i, l := range levels {
		a := analysis.LevelAggregate{Concurrency: l, RepeatMedians: analysis.RepeatMedians{OutputTokenThroughput: f64(tps[i]), LatencyP99S: f64(p99[i]), RequestThroughput: f64(tps[i] / 10)}}
		c.ByConcurrency = append(c.ByConcurrency, a)
		points = append(points, analysis.LevelPoint{Concurrency: l, OutputTokensPerS: a.RepeatMedians.OutputTokenThroughput, LatencyP99S: a.RepeatMedians.LatencyP99S})
	}
	c.Saturation = analysis.Saturation(points, analysis.DefaultThroughputGain, analysis.DefaultP99Rise)
	return c
}

func f64(v float64) *float64 { return &v }
