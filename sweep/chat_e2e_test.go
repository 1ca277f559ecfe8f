package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/sweep/internal/files"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// TestRunConditionChat runs a condition against the fake server's chat
// endpoint: the bodies are chat requests, the role-only first chunk is not
// the first token (the server sends it at once, before the first token's
// delay), reasoning tokens are, and the records carry the server's usage.
func TestRunConditionChat(t *testing.T) {
	const tokenTime = 20 * time.Millisecond
	f := newFakeServer(t, &fakeServer{TokenTime: tokenTime, Reasoning: 2})
	opts := loadgen.LoadOptions{URL: f.ChatURL(), Model: "fake-model", Concurrency: 2, Stream: true, StoreResponse: true}
	var out bytes.Buffer
	sum, recs, err := loadgen.RunCondition(context.Background(), opts, testRows(4, 5), &out)
	require.NoError(t, err)
	assert.Equal(t, loadgen.APIChat, sum.Config.API)
	assert.Equal(t, 4, sum.Counts.Successful)
	assert.Equal(t, 20, sum.Counts.OutputTokens)
	for _, r := range recs {
		require.True(t, r.OK(), r.FailureReason())
		assert.Equal(t, 5, *r.StreamTextEventCount, "the role chunk is no text event")
		assert.Equal(t, "rrttt", *r.Response)
		assert.Equal(t, 5, *r.OutputTokens)
		assert.Equal(t, 12, *r.PromptTokens, "the server's count, chat template included")
		assert.Equal(t, "length", *r.FinishReason)
		require.NotNil(t, r.TTFTS)
		assert.GreaterOrEqual(t, *r.TTFTS, tokenTime.Seconds(), "TTFT stops at the first reasoning token, not at the role chunk")
		assert.Len(t, r.InterChunkS, 4)
		assert.NotNil(t, r.TPOTS)
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	require.Len(t, f.Bodies, 4)
	for _, b := range f.Bodies {
		assert.Equal(t, 5.0, b["max_completion_tokens"])
		assert.NotContains(t, b, "max_tokens")
		assert.NotContains(t, b, "prompt")
		assert.Equal(t, map[string]any{"include_usage": true}, b["stream_options"])
		msgs := b["messages"].([]any)
		require.Len(t, msgs, 1)
		assert.Equal(t, "user", msgs[0].(map[string]any)["role"])
		assert.True(t, strings.HasPrefix(msgs[0].(map[string]any)["content"].(string), "prompt "))
	}
}

// TestRunConditionChatNotStreamed: without streaming the answer is the
// message; the stored response is the body, as for completions.
func TestRunConditionChatNotStreamed(t *testing.T) {
	f := newFakeServer(t, &fakeServer{Reasoning: 1})
	opts := loadgen.LoadOptions{URL: f.ChatURL(), Model: "fake-model", Concurrency: 1, StoreResponse: true}
	sum, recs, err := loadgen.RunCondition(context.Background(), opts, testRows(2, 3), nil)
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Counts.Successful)
	for _, r := range recs {
		require.True(t, r.OK(), r.FailureReason())
		assert.Equal(t, 3, *r.OutputTokens)
		assert.Equal(t, "length", *r.FinishReason)
		assert.Nil(t, r.TTFTS)
		assert.Contains(t, *r.Response, `"message":{"role":"assistant","reasoning_content":"r","content":"tt"}`)
	}
}

// TestRunConditionChatNoContent: a chat answer with neither text nor a
// finish reason fails as a completion's would, streamed (only the role
// chunk, which is no token) or not.
func TestRunConditionChatNoContent(t *testing.T) {
	f := newFakeServer(t, &fakeServer{Empty: true})
	for _, stream := range []bool{true, false} {
		opts := loadgen.LoadOptions{URL: f.ChatURL(), Model: "fake-model", Concurrency: 1, Stream: stream}
		sum, recs, err := loadgen.RunCondition(context.Background(), opts, testRows(1, 3), nil)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Counts.Failed, "stream %v", stream)
		require.NotNil(t, recs[0].Error)
		assert.Equal(t, loadgen.ErrNoContent, *recs[0].Error, "stream %v", stream)
	}
}

// TestSweepChat runs a short sweep against the chat endpoint: every file
// that describes the sweep says which API it spoke, and the config as
// written gains no key.
func TestSweepChat(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	cfg := sweepConfigJSON(f.ChatURL(), writePrompts(t, dir, 4, 3), []int{1, 2}, 4, 1, 1)
	res, err := runTestSweep(t, context.Background(), cfg, dir, nil)
	require.NoError(t, err)
	require.NotNil(t, res.Combined)
	root := res.Root

	var summary struct {
		Config map[string]any `json:"config"`
	}
	require.NoError(t, json.Unmarshal(readFile(t, filepath.Join(root, files.SummaryFile)), &summary))
	assert.Equal(t, "chat", summary.Config["api"])
	var manifest struct {
		Config struct{ Original, Resolved map[string]any } `json:"config"`
	}
	require.NoError(t, json.Unmarshal(readFile(t, filepath.Join(root, files.ManifestFile)), &manifest))
	assert.Equal(t, "chat", manifest.Config.Resolved["api"])
	assert.NotContains(t, manifest.Config.Original, "api")
	var written map[string]any
	require.NoError(t, json.Unmarshal(readFile(t, filepath.Join(root, files.ConfigFile)), &written))
	assert.NotContains(t, written, "api")

	runs, err := filepath.Glob(filepath.Join(root, "*", "*.summary.json"))
	require.NoError(t, err)
	require.Len(t, runs, 4)
	for _, p := range runs {
		s, err := loadgen.ReadSummary(p)
		require.NoError(t, err)
		assert.Equal(t, loadgen.APIChat, s.Config.API, p)
		assert.Zero(t, s.Counts.Failed, p)
	}
	report := string(readFile(t, filepath.Join(root, files.ReportFile)))
	assert.Equal(t, 1, strings.Count(report, "API: `chat`"), report)

	f.Mu.Lock()
	defer f.Mu.Unlock()
	assert.Len(t, f.Bodies, 1+4*4, "the test request and four runs of four, all chat")
	for _, b := range f.Bodies {
		assert.Contains(t, b, "messages")
	}
}

// TestSweepCompletionsRecordsAPI: a completions sweep records its API as
// well, and a run against the completions URL is unchanged otherwise.
func TestSweepCompletionsRecordsAPI(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, &fakeServer{})
	cfg := sweepConfigJSON(f.URL(), writePrompts(t, dir, 2, 2), []int{1}, 2, 0, 1)
	res, err := runTestSweep(t, context.Background(), cfg, dir, nil)
	require.NoError(t, err)
	report, err := os.ReadFile(filepath.Join(res.Root, files.ReportFile))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(report), "API: `completions`"))
	s, err := loadgen.ReadSummary(filepath.Join(res.Root, "repeat-01", "concurrency-001.summary.json"))
	require.NoError(t, err)
	assert.Equal(t, loadgen.APICompletions, s.Config.API)
}
