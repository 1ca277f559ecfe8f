package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Contains(t, out, "A: vllm")
	assert.Contains(t, out, "0.500x")
	assert.Contains(t, out, "saturation candidate: A 2, B not demonstrated")
}

func TestReadCombinedDirOrFile(t *testing.T) {
	dir := t.TempDir()
	c := combinedOf("x", []int{1}, []float64{1}, []float64{1})
	b, err := marshalIndent(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, SummaryFile), b, 0o644))
	for _, p := range []string{dir, filepath.Join(dir, SummaryFile)} {
		got, err := ReadCombined(p)
		require.NoError(t, err)
		assert.Equal(t, 1, got.ByConcurrency[0].Concurrency)
	}
	_, err = ReadCombined(filepath.Join(dir, "missing"))
	assert.Error(t, err)
}
