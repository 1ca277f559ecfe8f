package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/openai"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/sweep/report"
)

// TestSweepAgainstTinyserveMock runs a full small sweep against the real
// server on the mock backend with its latency model. The plateau is
// structural: max_num_seqs 4 lets only four sequences decode at once and a
// step costs about the same whether it carries one sequence or four, so from
// concurrency 16 on a deep queue keeps the batch full, throughput is flat and
// latency doubles with each doubling of concurrency. Steps of 20 ms (two
// tokens per request, so runs stay short), 64 requests per run and medians of
// five repeats keep the scheduling noise of a loaded 2-core machine under the
// race detector, which adds milliseconds to steps at random, inside the 5%
// threshold; shallower levels (8, and 16 vs 8) measured a few percent apart
// under -race and are left out.
func TestSweepAgainstTinyserveMock(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: 20 * time.Millisecond, PerDecodeSeq: 20 * time.Microsecond}},
		engine.Config{MaxNumSeqs: 4, MaxNumBatchedTokens: 256, Seed: new(uint64(1))})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	srv := httptest.NewServer(openai.NewHandler(eng))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	prompts := writePrompts(t, dir, 64, 2)
	cfgJSON := sweepConfigJSON(srv.URL+"/v1/completions", prompts, []int{4, 16, 32, 64}, 64, 0, 5)
	cfg, err := parseConfig(cfgJSON)
	require.NoError(t, err)
	cfg.Model = "" // the embedded case: the served model's name comes from the caller
	env, git := testEnv()
	res, err := RunSweep(context.Background(), cfg, SweepOptions{WorkDir: dir, Environment: env, Git: git, Model: eng.Info().ID})
	require.NoError(t, err)
	c := res.Combined
	require.NotNil(t, c.Saturation.Candidate, "report:\n%s", report.Markdown(c))
	// 16->32 and 32->64 are flat with rising p99 (candidate 32); 4->16 may
	// qualify too, as the closed loop leaves a 4-slot batch a few percent
	// short at concurrency 4 (candidate 16).
	assert.Contains(t, []int{16, 32}, *c.Saturation.Candidate)
	assert.Equal(t, []string{openai.Version()}, c.ServerVersions, "tinyserve's GET /version is recorded")
	assert.Contains(t, report.Markdown(c), "Server version (its GET /version): `"+openai.Version()+"`.\n")
	for _, a := range c.ByConcurrency {
		assert.Equal(t, 320, a.Counts.Successful)
		assert.Equal(t, 320*2, a.Counts.OutputTokens, "usage comes from the server")
		assert.Equal(t, 320, a.TTFTS.Count)
	}
	var rm loadgen.RunMetrics
	b := readFile(t, filepath.Join(res.Root, "repeat-01", "concurrency-064.metrics.json"))
	require.NoError(t, jsonUnmarshal(b, &rm))
	assert.True(t, rm.After.Available)
	assert.Contains(t, rm.After.Values, "vllm:generation_tokens_total")
}

// TestSweepReportsPrefixCacheHits: against a server whose prefix cache
// serves the repeated prompts, the levels' hit rates come from the server's
// metrics and the report says what they mean; without the cache there is
// neither.
func TestSweepReportsPrefixCacheHits(t *testing.T) {
	for _, caching := range []bool{true, false} {
		t.Run(fmt.Sprintf("prefix-caching=%v", caching), func(t *testing.T) {
			eng, err := mock.NewEngine(mock.Config{}, engine.Config{PrefixCaching: caching, Seed: new(uint64(1))})
			require.NoError(t, err)
			t.Cleanup(func() { eng.Close() })
			srv := httptest.NewServer(openai.NewHandler(eng))
			t.Cleanup(srv.Close)

			dir := t.TempDir()
			rows := testRows(8, 2)
			var lines []byte
			for i := range rows {
				rows[i].Prompt = strings.Repeat(fmt.Sprintf("prompt %03d ", i), 4) // 44 byte tokens: 2 whole blocks
				line, err := json.Marshal(rows[i])
				require.NoError(t, err)
				lines = append(append(lines, line...), '\n')
			}
			prompts := filepath.Join(dir, "prompts.jsonl")
			require.NoError(t, os.WriteFile(prompts, lines, 0o644))
			cfg, err := parseConfig(sweepConfigJSON(srv.URL+"/v1/completions", prompts, []int{1, 2}, 8, 0, 2))
			require.NoError(t, err)
			cfg.Model = ""
			env, git := testEnv()
			res, err := RunSweep(context.Background(), cfg, SweepOptions{WorkDir: dir, Environment: env, Git: git, Model: eng.Info().ID})
			require.NoError(t, err)
			md := report.Markdown(res.Combined)
			for _, a := range res.Combined.ByConcurrency {
				if !caching {
					assert.Nil(t, a.PrefixCacheHitRate, "concurrency %d", a.Concurrency)
					continue
				}
				require.NotNil(t, a.PrefixCacheHitRate, "concurrency %d", a.Concurrency)
				// Every run after the very first finds 32 of each prompt's 44
				// tokens cached, the first run of all only the first prompt's
				// (sent once by the test request): a level's two repeats give
				// 32/44, or (32+8·32)/(16·44) = 18/44 at the level that ran
				// first.
				r := *a.PrefixCacheHitRate
				assert.True(t, math.Abs(r-32.0/44) < 1e-9 || math.Abs(r-18.0/44) < 1e-9, "concurrency %d: hit rate %v", a.Concurrency, r)
			}
			assert.Equal(t, caching, strings.Contains(md, "Note: prefix cache"), md)
		})
	}
}

// TestSweepReportsServerPhases: against tinyserve's handler, each level
// gets the server's mean queue, prefill and decode times from its phase
// histograms, and the report shows them beside the client's TTFT. With one
// sequence at a time, requests at concurrency 4 wait in the server's
// queue, and the server's queue + prefill never exceeds what the client
// saw as TTFT (the server's interval lies inside the client's).
func TestSweepReportsServerPhases(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}}, engine.Config{MaxNumSeqs: 1, Seed: new(uint64(1))})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	srv := httptest.NewServer(openai.NewHandler(eng))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	prompts := writePrompts(t, dir, 8, 4)
	cfg, err := parseConfig(sweepConfigJSON(srv.URL+"/v1/completions", prompts, []int{1, 4}, 8, 0, 1))
	require.NoError(t, err)
	cfg.Model = ""
	env, git := testEnv()
	res, err := RunSweep(context.Background(), cfg, SweepOptions{WorkDir: dir, Environment: env, Git: git, Model: eng.Info().ID})
	require.NoError(t, err)
	levels := res.Combined.ByConcurrency
	require.Len(t, levels, 2)
	for _, a := range levels {
		p := a.ServerPhases
		require.NotNil(t, p, "concurrency %d", a.Concurrency)
		require.NotNil(t, p.QueueS)
		require.NotNil(t, p.PrefillS)
		require.NotNil(t, p.DecodeS)
		assert.Greater(t, *p.PrefillS, 0.0, "concurrency %d", a.Concurrency)
		assert.Greater(t, *p.DecodeS, 0.0, "concurrency %d", a.Concurrency)
		assert.LessOrEqual(t, *p.QueueS+*p.PrefillS, *a.TTFTS.Mean, "concurrency %d: the server's part of TTFT", a.Concurrency)
	}
	assert.Greater(t, *levels[1].ServerPhases.QueueS, *levels[0].ServerPhases.QueueS, "one sequence at a time: concurrency 4 queues")
	md := report.Markdown(res.Combined)
	assert.Contains(t, md, "Where the time went")
	assert.Contains(t, md, "| 4 | ")
}
