package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// halfCharScript is fakeScript's three tokens, with its times, made "é" in
// two halves and "!": the first token's text is empty and its token string
// U+FFFD.
func halfCharScript(req llm.Request) []llm.Event {
	evs := fakeScript(req)
	ids, texts, lps := []int{0xC3, 0xA9, '!'}, []string{"", "é", "!"}, []float32{-1, -2, -3}
	for i := range evs {
		evs[i].TokenIDs, evs[i].Text = []int{ids[i]}, texts[i]
		evs[i].Logprobs = []llm.TokenLogprob{{ID: ids[i], Logprob: lps[i]}}
	}
	return evs
}

// choiceChunk is one streamed chunk's choice, with the logprobs parsed.
type choiceChunk struct {
	index    int
	text     string
	ids      []int
	prompt   []int
	finish   string
	logprobs json.RawMessage
	lp       struct {
		Tokens        []string  `json:"tokens"`
		TokenLogprobs []float64 `json:"token_logprobs"`
		TextOffset    []int     `json:"text_offset"`
	}
	completion int // continuous usage
}

// streamChunks parses a stream ending in a usage chunk and [DONE] into each
// choice's chunks, in order.
func streamChunks(t *testing.T, body string) map[int][]choiceChunk {
	t.Helper()
	evs := sseEvents(t, body)
	require.GreaterOrEqual(t, len(evs), 2, body)
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	require.Contains(t, evs[len(evs)-2], `"choices":[]`, "the usage chunk")
	out := map[int][]choiceChunk{}
	for _, raw := range evs[:len(evs)-2] {
		var r respJSON
		require.NoError(t, json.Unmarshal([]byte(raw), &r), raw)
		require.Len(t, r.Choices, 1, "one choice per chunk: %s", raw)
		ch := r.Choices[0]
		c := choiceChunk{index: ch.Index, text: ch.Text, ids: ch.TokenIDs, prompt: ch.PromptIDs, logprobs: ch.Logprobs}
		if ch.FinishReason != nil {
			c.finish = *ch.FinishReason
		}
		require.NoError(t, json.Unmarshal(ch.Logprobs, &c.lp), raw)
		require.NotNil(t, r.Usage, "continuous usage: %s", raw)
		c.completion = r.Usage.Completion
		out[c.index] = append(out[c.index], c)
	}
	return out
}

// histogram is a histogram's samples, without its creation time.
func histogram(t *testing.T, g prometheus.Gatherer, name string) *dto.Histogram {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1, name)
			h := mf.GetMetric()[0].GetHistogram()
			h.CreatedTimestamp = nil
			return h
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

// TestStreamMergesQueuedEvents: when a choice's events are all queued by
// the time the stream gets to them (it fell behind), they go out as one
// chunk per choice, as vLLM's RequestOutputCollector merges the outputs its
// consumer has not taken: the text, ids and logprobs of the three chunks the
// stream sends when it keeps up, together, with the offsets of the
// non-streamed response, the last event's usage and finish. Each choice
// still has its own chunk with its index, and the metrics, observed per
// event, are the same either way.
func TestStreamMergesQueuedEvents(t *testing.T) {
	for _, prompts := range []string{`"hey"`, `["hey","hey"]`} {
		for _, n := range []int{1, 2} {
			t.Run(fmt.Sprintf("prompt=%s,n=%d", prompts, n), func(t *testing.T) {
				common := fmt.Sprintf(`{"prompt":%s,"n":%d,"max_tokens":3,"logprobs":0,"return_token_ids":true`, prompts, n)
				body := common + `,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`
				run := func(queued bool, body string) (*httptest.ResponseRecorder, *prometheus.Registry) {
					f := newFake()
					f.script, f.queued = halfCharScript, queued
					reg := prometheus.NewRegistry()
					rec := serve(t, NewHandler(f, WithRegistry(reg, reg)), "POST", "/v1/completions", body)
					require.Equal(t, 200, rec.Code, rec.Body.String())
					return rec, reg
				}
				recKept, regKept := run(false, body)
				recMerged, regMerged := run(true, body)
				recWhole, _ := run(true, common+"}")
				var whole respJSON
				require.NoError(t, json.Unmarshal(recWhole.Body.Bytes(), &whole))

				kept, merged := streamChunks(t, recKept.Body.String()), streamChunks(t, recMerged.Body.String())
				k := strings.Count(prompts, "hey") * n
				require.Len(t, merged, k, "every choice streams")
				require.Len(t, kept, k)
				for i := range k {
					require.Len(t, kept[i], 3, "choice %d: a chunk per event while the stream keeps up", i)
					require.Len(t, merged[i], 1, "choice %d: one chunk for its queued events", i)
					m := merged[i][0]
					assert.Equal(t, "é!", m.text)
					assert.Equal(t, []int{0xC3, 0xA9, '!'}, m.ids)
					assert.Equal(t, []int{'h', 'e', 'y'}, m.prompt)
					assert.Equal(t, "length", m.finish)
					assert.Equal(t, 3, m.completion, "usage as of the last merged event")
					assert.JSONEq(t, `{"tokens":["\ufffd","\ufffd","!"],"token_logprobs":[-1,-2,-3],`+
						`"top_logprobs":[{"\ufffd":-1},{"\ufffd":-2},{"!":-3}],"text_offset":[0,1,2]}`, string(m.logprobs))
					assert.JSONEq(t, string(whole.Choices[i].Logprobs), string(m.logprobs), "the offsets of the whole response")

					var text string
					var ids, offsets []int
					var tokens []string
					var lps []float64
					for _, c := range kept[i] {
						text += c.text
						ids = append(ids, c.ids...)
						tokens = append(tokens, c.lp.Tokens...)
						lps = append(lps, c.lp.TokenLogprobs...)
						offsets = append(offsets, c.lp.TextOffset...)
					}
					assert.Equal(t, m.text, text, "the merged text is the unmerged chunks' text")
					assert.Equal(t, m.ids, ids)
					assert.Equal(t, m.lp.Tokens, tokens)
					assert.Equal(t, m.lp.TokenLogprobs, lps)
					// Unmerged, each chunk's offsets start at the text sent
					// before it (vLLM's stream does the same).
					assert.Equal(t, []int{0, 0, 1}, offsets)
					assert.Equal(t, "length", kept[i][2].finish)
				}
				for _, name := range []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
					"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_generation_tokens"} {
					assert.Equal(t, histogram(t, regKept, name).String(), histogram(t, regMerged, name).String(), "%s: merging does not change the metrics", name)
				}
				assert.Equal(t, uint64(2*k), histogram(t, regMerged, "vllm:inter_token_latency_seconds").GetSampleCount(), "two gaps per choice")
			})
		}
	}
}

// TestStreamMergeStopsAtError: tokens held back to merge go out in a
// chunk before the error event, as they do when the stream keeps up.
func TestStreamMergeStopsAtError(t *testing.T) {
	f := newFake()
	f.queued = true
	f.script = func(llm.Request) []llm.Event {
		return []llm.Event{
			{TokenIDs: []int{'a'}, Text: "a", CompletionTokens: 1, StopTokenID: -1},
			{TokenIDs: []int{'b'}, Text: "b", CompletionTokens: 2, StopTokenID: -1},
			{Finish: llm.FinishError, Err: errors.New("cuda: launch failed"), CompletionTokens: 2, StopTokenID: -1},
		}
	}
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"hey","stream":true,"return_token_ids":true}`)
	require.Equal(t, 200, rec.Code)
	evs := sseEvents(t, rec.Body.String())
	require.Len(t, evs, 3, "the merged tokens, the error, [DONE]: %s", rec.Body.String())
	var c respJSON
	require.NoError(t, json.Unmarshal([]byte(evs[0]), &c), evs[0])
	require.Len(t, c.Choices, 1)
	assert.Equal(t, "ab", c.Choices[0].Text)
	assert.Equal(t, []int{'a', 'b'}, c.Choices[0].TokenIDs)
	assert.Nil(t, c.Choices[0].FinishReason)
	var e errJSON
	require.NoError(t, json.Unmarshal([]byte(evs[1]), &e), evs[1])
	assert.Equal(t, typeServer, e.Error.Type)
	assert.Equal(t, "[DONE]", evs[2])
}

// gatedWriter is a flushing http.ResponseWriter whose first Write closes
// entered and then waits for open to close: a stream stalled on a slow
// client after its first chunk.
type gatedWriter struct {
	header  http.Header
	body    strings.Builder
	writes  int
	entered chan struct{}
	open    chan struct{}
}

func (w *gatedWriter) Header() http.Header { return w.header }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}
func (w *gatedWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		close(w.entered)
		<-w.open
	}
	return w.body.Write(p)
}

// TestStreamMergesOnTheRealEngine: the real engine over the mock makes its
// first token; the stream writes it and stalls in that write (a slow
// client) while the engine makes the other seven, which wait in the
// request's channel (synctest.Wait returns once they all do). The stream
// then sends them as one chunk, whose offsets follow the first chunk's
// text.
func TestStreamMergesOnTheRealEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &gatedWriter{header: http.Header{}, entered: make(chan struct{}), open: make(chan struct{})}
		steps := 0
		mcfg := mock.Config{Latency: mock.Latency{PerStep: time.Nanosecond}, Sleep: func(time.Duration) {
			if steps++; steps > 1 {
				<-w.entered // the second token waits until the first is being written
			}
		}}
		eng, err := mock.NewEngine(mcfg, engine.Config{})
		require.NoError(t, err)
		defer eng.Close()
		req := httptest.NewRequest("POST", "/v1/completions",
			strings.NewReader(`{"prompt":"abc","max_tokens":8,"temperature":0,"logprobs":0,"return_token_ids":true,"stream":true}`))
		done := make(chan struct{})
		go func() {
			defer close(done)
			NewHandler(eng).ServeHTTP(w, req)
		}()
		synctest.Wait() // stalled in the first write, the other tokens made
		close(w.open)
		<-done

		evs := sseEvents(t, w.body.String())
		require.Len(t, evs, 3, "the first token, the seven made during the stall, [DONE]: %v", evs)
		tok := mock.NewTokenizer()
		ids := mock.Expected(mcfg, tok.Encode("abc", true), 8)
		var first, rest respJSON
		require.NoError(t, json.Unmarshal([]byte(evs[0]), &first), evs[0])
		require.NoError(t, json.Unmarshal([]byte(evs[1]), &rest), evs[1])
		assert.Equal(t, ids[:1], first.Choices[0].TokenIDs)
		assert.Nil(t, first.Choices[0].FinishReason)
		assert.Equal(t, ids[1:], rest.Choices[0].TokenIDs)
		require.NotNil(t, rest.Choices[0].FinishReason)
		assert.Equal(t, "length", *rest.Choices[0].FinishReason)
		assert.Equal(t, tok.Decode(ids, false), first.Choices[0].Text+rest.Choices[0].Text)
		var lp struct {
			TextOffset []int `json:"text_offset"`
		}
		require.NoError(t, json.Unmarshal(rest.Choices[0].Logprobs, &lp))
		assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, lp.TextOffset, "one character per token of the mock, after the first chunk's")
	})
}

// countingWriter is a flushing http.ResponseWriter that keeps only counts.
type countingWriter struct {
	header          http.Header
	status          int
	writes, flushes int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(code int)        { w.status = code }
func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return len(p), nil }
func (w *countingWriter) Flush()                      { w.flushes++ }

// BenchmarkStreamQueuedEvents streams a 256-token request whose events are
// all queued when the handler starts (a stream that fell behind: one merged
// chunk) and the same request from a fake that hands its events over one
// at a time (the handler keeps up: a chunk per token), alternating in one
// loop so that load from elsewhere hits both alike. It reports each one's
// time and writes per request and merged/unmerged, the ratio of their
// times. The unmerged side also pays the fake's channel handover per event.
//
//	go test -run XXX -bench StreamQueuedEvents ./openai
func BenchmarkStreamQueuedEvents(b *testing.B) {
	const tokens = 256
	body := fmt.Sprintf(`{"prompt":"hey","max_tokens":%d,"logprobs":1,"return_token_ids":true,"stream":true}`, tokens)
	kept, merged := newFake(), newFake()
	merged.queued = true
	kept.info.MaxModelLen, merged.info.MaxModelLen = 2*tokens, 2*tokens
	hKept, hMerged := NewHandler(kept), NewHandler(merged)
	serveOnce := func(h http.Handler) (time.Duration, int) {
		w := &countingWriter{header: http.Header{}}
		req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body))
		start := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(start)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
		return d, w.writes
	}
	var tKept, tMerged time.Duration
	var wKept, wMerged int
	b.ReportAllocs()
	for b.Loop() {
		d, n := serveOnce(hKept)
		tKept, wKept = tKept+d, wKept+n
		d, n = serveOnce(hMerged)
		tMerged, wMerged = tMerged+d, wMerged+n
	}
	n := float64(b.N)
	b.ReportMetric(float64(tKept.Nanoseconds())/n, "unmerged_ns/req")
	b.ReportMetric(float64(tMerged.Nanoseconds())/n, "merged_ns/req")
	b.ReportMetric(float64(wKept)/n, "unmerged_writes/req")
	b.ReportMetric(float64(wMerged)/n, "merged_writes/req")
	b.ReportMetric(tMerged.Seconds()/tKept.Seconds(), "merged/unmerged")
}
