package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
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
	c.Workload = &Workload{Path: "p", SHA256: strings.Repeat("c", 64)}
	dir := t.TempDir()
	cb, err := files.MarshalIndent(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, files.SummaryFile), cb, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, files.ManifestFile), []byte(`{"workload": {"sha256": "`+sha+`"}}`), 0o644))
	got, err := ReadCombined(dir)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("c", 64), got.Workload.SHA256)
}

// TestCompareWarnsOfDifferentAPIs: a chat sweep against a completions one
// is not like for like (the chat template lengthens every prompt); a sweep
// that does not record its api spoke completions.
func TestCompareWarnsOfDifferentAPIs(t *testing.T) {
	mk := func(api any) *Combined {
		c := combinedOf("s", []int{1}, []float64{100}, []float64{1})
		c.Workload = &Workload{SHA256: "aaa"}
		cfg := map[string]any{"num_requests": 8.0}
		if api != nil {
			cfg["api"] = api
		}
		c.Config = cfg
		return c
	}
	assert.Empty(t, Compare(mk(nil), mk("completions")).Warnings)
	w := Compare(mk(nil), mk("chat")).Warnings
	require.Len(t, w, 1)
	assert.Equal(t, `different api: A "completions", B "chat"`, w[0])
}
