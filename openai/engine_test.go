package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// These tests run the handler on the real engine over the mock backend.
// Requests that must run their full length ask for temperature 0: at the
// default temperature of 1 the mock may sample end-of-text.

type mockServer struct {
	eng    *engine.Engine
	srv    *httptest.Server
	client *http.Client
	mcfg   mock.Config
}

func newMockServer(t testing.TB, mcfg mock.Config, ecfg engine.Config, opts ...Option) *mockServer {
	t.Helper()
	eng, err := mock.NewEngine(mcfg, ecfg)
	require.NoError(t, err)
	srv := httptest.NewServer(NewHandler(eng, opts...))
	ms := &mockServer{eng: eng, srv: srv, client: srv.Client(), mcfg: mcfg}
	t.Cleanup(ms.close)
	return ms
}

// close shuts everything down in the order cmd/serve does; safe to call twice.
func (ms *mockServer) close() {
	ms.client.CloseIdleConnections()
	ms.srv.Close()
	_ = ms.eng.Close()
}

func (ms *mockServer) post(ctx context.Context, path, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", ms.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return ms.client.Do(req)
}

// verifyNoLeak checks, after the test's other cleanups (registered later,
// so run earlier) have closed servers and engines, that no goroutine started
// during the test is left.
func verifyNoLeak(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// expected is the mock's greedy output for prompt, as text.
func (ms *mockServer) expected(prompt string, n int) string {
	tok := mock.NewTokenizer()
	return tok.Decode(mock.Expected(ms.mcfg, tok.Encode(prompt, true), n), false)
}

func TestSDK(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{}, WithServedModelNames("tiny"))
	client := sdk.NewClient(option.WithBaseURL(ms.srv.URL+"/v1/"), option.WithAPIKey("unused"),
		option.WithHTTPClient(ms.client), option.WithMaxRetries(0))
	ctx := context.Background()

	t.Run("list models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		require.NoError(t, err)
		require.Len(t, page.Data, 1)
		assert.Equal(t, "tiny", page.Data[0].ID)
		assert.Equal(t, "tinyserve", page.Data[0].OwnedBy)
		assert.Equal(t, "4096", page.Data[0].JSON.ExtraFields["max_model_len"].Raw())
	})

	t.Run("completion", func(t *testing.T) {
		c, err := client.Completions.New(ctx, sdk.CompletionNewParams{
			Model:       "tiny",
			Prompt:      sdk.CompletionNewParamsPromptUnion{OfString: sdk.String("hello")},
			MaxTokens:   sdk.Int(7),
			Temperature: sdk.Float(0),
		})
		require.NoError(t, err)
		require.Len(t, c.Choices, 1)
		assert.Equal(t, ms.expected("hello", 7), c.Choices[0].Text)
		assert.Equal(t, sdk.CompletionChoiceFinishReasonLength, c.Choices[0].FinishReason)
		assert.Equal(t, int64(5), c.Usage.PromptTokens)
		assert.Equal(t, int64(7), c.Usage.CompletionTokens)
		assert.Equal(t, int64(12), c.Usage.TotalTokens)
		assert.Equal(t, "tiny", c.Model)
		assert.True(t, strings.HasPrefix(c.ID, "cmpl-"))
	})

	t.Run("streaming with usage", func(t *testing.T) {
		stream := client.Completions.NewStreaming(ctx, sdk.CompletionNewParams{
			Model:         "tiny",
			Prompt:        sdk.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{104, 105}},
			MaxTokens:     sdk.Int(20),
			Temperature:   sdk.Float(0),
			StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
		})
		var text strings.Builder
		var chunks int
		var finish string
		var u sdk.CompletionUsage
		for stream.Next() {
			c := stream.Current()
			for _, ch := range c.Choices {
				chunks++
				text.WriteString(ch.Text)
				if ch.FinishReason != "" {
					finish = string(ch.FinishReason)
				}
			}
			if len(c.Choices) == 0 {
				u = c.Usage
			}
		}
		require.NoError(t, stream.Err())
		require.NoError(t, stream.Close())
		assert.Equal(t, ms.expected("hi", 20), text.String())
		assert.Equal(t, "length", finish)
		// A chunk per token, or fewer where the stream fell behind the
		// engine and merged what was queued.
		assert.LessOrEqual(t, chunks, 20)
		assert.GreaterOrEqual(t, chunks, 1)
		assert.Equal(t, int64(2), u.PromptTokens)
		assert.Equal(t, int64(20), u.CompletionTokens)
		assert.Equal(t, int64(22), u.TotalTokens)
	})

	t.Run("logprobs and a stop string", func(t *testing.T) {
		full := ms.expected("abc", 40)
		stop := full[10:12]
		want := full[:strings.Index(full, stop)]
		c, err := client.Completions.New(ctx, sdk.CompletionNewParams{
			Model:       "tiny",
			Prompt:      sdk.CompletionNewParamsPromptUnion{OfString: sdk.String("abc")},
			MaxTokens:   sdk.Int(40),
			Temperature: sdk.Float(0),
			Logprobs:    sdk.Int(2),
			Stop:        sdk.CompletionNewParamsStopUnion{OfString: sdk.String(stop)},
		})
		require.NoError(t, err)
		ch := c.Choices[0]
		assert.Equal(t, want, ch.Text)
		assert.Equal(t, sdk.CompletionChoiceFinishReasonStop, ch.FinishReason)
		assert.Equal(t, fmt.Sprintf("%q", stop), ch.JSON.ExtraFields["stop_reason"].Raw())
		lp := ch.Logprobs
		require.Len(t, lp.Tokens, int(c.Usage.CompletionTokens), "one entry per generated token")
		assert.True(t, strings.HasPrefix(strings.Join(lp.Tokens, ""), want), "tokens spell the text (and the cut stop string)")
		offset := int64(0)
		for i, tok := range lp.Tokens {
			assert.Equal(t, offset, lp.TextOffset[i])
			offset += int64(len([]rune(tok)))
			assert.LessOrEqual(t, lp.TokenLogprobs[i], 0.0)
			top := lp.TopLogprobs[i]
			assert.Contains(t, top, tok, "the chosen token is listed")
			assert.LessOrEqual(t, len(top), 3)
		}
	})

	errCases := []struct {
		name   string
		params sdk.CompletionNewParams
		opts   []option.RequestOption
		status int
		typ    string
		param  string
	}{
		{"unknown model", sdk.CompletionNewParams{Model: "gpt-4", Prompt: sdk.CompletionNewParamsPromptUnion{OfString: sdk.String("x")}},
			nil, 404, "invalid_request_error", "model"},
		{"bad temperature", sdk.CompletionNewParams{Model: "tiny", Prompt: sdk.CompletionNewParamsPromptUnion{OfString: sdk.String("x")}, Temperature: sdk.Float(500)},
			nil, 400, "invalid_request_error", "temperature"},
		{"unknown field", sdk.CompletionNewParams{Model: "tiny", Prompt: sdk.CompletionNewParamsPromptUnion{OfString: sdk.String("x")}},
			[]option.RequestOption{option.WithJSONSet("guided_json", "{}")}, 400, "invalid_request_error", "guided_json"},
		{"context length", sdk.CompletionNewParams{Model: "tiny", Prompt: sdk.CompletionNewParamsPromptUnion{OfString: sdk.String("x")}, MaxTokens: sdk.Int(5000)},
			nil, 400, "invalid_request_error", "prompt"},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Completions.New(ctx, tc.params, tc.opts...)
			var apiErr *sdk.Error
			require.True(t, errors.As(err, &apiErr), "got %v", err)
			assert.Equal(t, tc.status, apiErr.StatusCode)
			assert.Equal(t, tc.typ, apiErr.Type)
			assert.Equal(t, tc.param, apiErr.Param)
			assert.NotEmpty(t, apiErr.Message)
		})
	}
}

// lockstep paces the mock engine by a streaming client: the engine step
// that makes a request's token k+1 (k >= 1) waits until the client has read
// the chunk of token k, so the stream never has a second event queued and
// sends one chunk per token however slow it is. It serves one request.
type lockstep struct {
	read  chan struct{} // one per chunk read
	done  chan struct{} // closed by stop: steps wait no more
	steps int           // Forward calls so far; only the engine's loop counts
}

func newLockstep() *lockstep {
	return &lockstep{read: make(chan struct{}, 64), done: make(chan struct{})}
}

// config is a mock whose every step waits for the lockstep.
func (l *lockstep) config() mock.Config {
	return mock.Config{Latency: mock.Latency{PerStep: time.Nanosecond}, Sleep: func(time.Duration) {
		l.steps++
		if l.steps == 1 {
			return // the prefill, which makes the first token
		}
		select {
		case <-l.read:
		case <-l.done:
		}
	}}
}

func (l *lockstep) stop() { close(l.done) }

// readEvents reads body's events one by one, letting the engine make the
// next token after each.
func (l *lockstep) readEvents(t *testing.T, body io.Reader) []string {
	t.Helper()
	var evs []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		require.True(t, strings.HasPrefix(line, "data: "), "line %q", line)
		evs = append(evs, strings.TrimPrefix(line, "data: "))
		select {
		case l.read <- struct{}{}:
		default: // more events than steps; nothing waits for these
		}
	}
	require.NoError(t, sc.Err())
	return evs
}

// TestStreamChunkPerTokenWhileTextIsHeldBack: on the real engine, text that
// could still start a stop string is held back (four bytes for "#####"),
// yet every token goes out in its own chunk with its id, the first ones with
// empty text, as vLLM streams each step while its detokenizer holds text
// back; the last chunk brings the rest, and each chunk's offsets start at
// the text sent so far. The engine is paced by the client (lockstep), so
// the stream keeps up and has nothing to merge.
func TestStreamChunkPerTokenWhileTextIsHeldBack(t *testing.T) {
	ls := newLockstep()
	ms := newMockServer(t, ls.config(), engine.Config{})
	t.Cleanup(ls.stop) // before the server's cleanup, registered earlier
	resp, err := ms.post(context.Background(), "/v1/completions",
		`{"prompt":"abc","max_tokens":8,"temperature":0,"stop":"#####","logprobs":0,"return_token_ids":true,"stream":true}`)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	evs := ls.readEvents(t, resp.Body)
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	evs = evs[:len(evs)-1]
	require.Len(t, evs, 8, "a chunk per token: %v", evs)

	tok := mock.NewTokenizer()
	ids := mock.Expected(ms.mcfg, tok.Encode("abc", true), 8)
	var text strings.Builder
	for k, raw := range evs {
		var c respJSON
		require.NoError(t, json.Unmarshal([]byte(raw), &c), raw)
		require.Len(t, c.Choices, 1)
		ch := c.Choices[0]
		assert.Equal(t, []int{ids[k]}, ch.TokenIDs, "chunk %d", k)
		if k < 4 {
			assert.Equal(t, "", ch.Text, "chunk %d: its text is held back", k)
		}
		var lp struct {
			TextOffset []int `json:"text_offset"`
		}
		require.NoError(t, json.Unmarshal(ch.Logprobs, &lp), raw)
		assert.Equal(t, []int{text.Len()}, lp.TextOffset, "chunk %d", k)
		text.WriteString(ch.Text)
		assert.Equal(t, k == 7, ch.FinishReason != nil, "chunk %d", k)
	}
	assert.Equal(t, ms.expected("abc", 8), text.String())
}

// TestLoad sends 200 concurrent requests against a bounded server: every
// answer is a 200 with exact usage or a 429, the KV cache is empty after,
// and no goroutine is left behind.
func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		ecfg engine.Config
		opts []Option
	}{
		{"handler bound", engine.Config{}, []Option{WithMaxPending(32)}},
		{"engine bound", engine.Config{MaxPending: 32, MaxNumSeqs: 4}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			verifyNoLeak(t)
			// Each admitted request runs for at least 32 steps of 2 ms, long
			// enough that far more than 32 are in flight however slowly the
			// 200 clients connect.
			mcfg := mock.Config{Latency: mock.Latency{PerStep: 2 * time.Millisecond}}
			ms := newMockServer(t, mcfg, tc.ecfg, tc.opts...)
			ms.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 200

			const clients, maxTokens = 200, 32
			type result struct {
				status int
				prompt string
				body   []byte
				err    error
			}
			results := make([]result, clients)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range clients {
				wg.Go(func() {
					<-start
					prompt := fmt.Sprintf("prompt number %d", i)
					stream := i%2 == 1
					body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0,"stream":%v}`, prompt, maxTokens, stream)
					if stream {
						body = body[:len(body)-1] + `,"stream_options":{"include_usage":true}}`
					}
					resp, err := ms.post(context.Background(), "/v1/completions", body)
					if err != nil {
						results[i] = result{err: err}
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					results[i] = result{status: resp.StatusCode, prompt: prompt, body: b, err: err}
				})
			}
			close(start)
			wg.Wait()

			counts := map[int]int{}
			for i, r := range results {
				require.NoError(t, r.err)
				counts[r.status]++
				switch r.status {
				case 200:
					text, u := parseAny(t, r.body)
					assert.Equal(t, ms.expected(r.prompt, maxTokens), text, "request %d", i)
					assert.Equal(t, [3]int{len(r.prompt), maxTokens, len(r.prompt) + maxTokens}, u, "request %d usage", i)
				case 429:
					var e errJSON
					require.NoError(t, json.Unmarshal(r.body, &e))
					assert.Equal(t, typeRateLimit, e.Error.Type)
				default:
					t.Errorf("request %d: status %d: %s", i, r.status, r.body)
				}
			}
			t.Logf("statuses: %v", counts)
			assert.Positive(t, counts[200])
			assert.Positive(t, counts[429], "the bound must have been hit")
			require.Eventually(t, func() bool {
				s := ms.eng.Stats()
				return s.KVBlocksUsed == 0 && s.Running == 0 && s.Waiting == 0
			}, 5*time.Second, time.Millisecond, "KV must be empty: %+v", ms.eng.Stats())
			ms.close()
		})
	}
}

// parseAny reads a JSON completion or an SSE stream with usage and returns
// its text and usage (prompt, completion, total).
func parseAny(t *testing.T, body []byte) (string, [3]int) {
	t.Helper()
	var text strings.Builder
	var u [3]int
	add := func(raw []byte) {
		var r respJSON
		require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
		require.Nil(t, r.Error, "%s", raw)
		for _, c := range r.Choices {
			text.WriteString(c.Text)
		}
		if r.Usage != nil {
			u = [3]int{r.Usage.Prompt, r.Usage.Completion, r.Usage.Total}
		}
	}
	if !strings.HasPrefix(string(body), "data: ") {
		add(body)
		return text.String(), u
	}
	evs := sseEvents(t, string(body))
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	for _, ev := range evs[:len(evs)-1] {
		add([]byte(ev))
	}
	return text.String(), u
}

// TestDrain: once Drain starts, /health and new requests answer 503, and the
// requests already accepted finish in full.
func TestDrain(t *testing.T) {
	verifyNoLeak(t)
	mcfg := mock.Config{Latency: mock.Latency{PerStep: 2 * time.Millisecond}}
	ms := newMockServer(t, mcfg, engine.Config{})
	const accepted, maxTokens = 4, 60
	results := make(chan string, accepted)
	for i := range accepted {
		go func() {
			body := fmt.Sprintf(`{"prompt":"p%d","max_tokens":%d,"temperature":0,"stream":%v,"stream_options":%s}`,
				i, maxTokens, i%2 == 0, map[bool]string{true: `{"include_usage":true}`, false: "null"}[i%2 == 0])
			resp, err := ms.post(context.Background(), "/v1/completions", body)
			if err != nil {
				results <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			results <- fmt.Sprintf("%d %s", resp.StatusCode, b)
		}()
	}
	require.Eventually(t, func() bool { return ms.eng.Stats().Running == accepted }, 5*time.Second, time.Millisecond)

	drained := make(chan error, 1)
	go func() { drained <- ms.eng.Drain(context.Background()) }()
	require.Eventually(t, func() bool { return ms.eng.Health() != nil }, 5*time.Second, time.Millisecond)

	resp, err := ms.client.Get(ms.srv.URL + "/health")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.JSONEq(t, `{"status":"draining","reason":"engine is draining"}`, string(b))

	resp, err = ms.post(context.Background(), "/v1/completions", `{"prompt":"late","max_tokens":1}`)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Contains(t, string(b), typeUnavailable)

	for range accepted {
		r := <-results
		require.True(t, strings.HasPrefix(r, "200 "), r)
		_, u := parseAny(t, []byte(r[4:]))
		assert.Equal(t, maxTokens, u[1], "an accepted request runs to its end")
	}
	require.NoError(t, <-drained)
	ms.close()
}

// TestDisconnectFreesBlocks: a client that hangs up mid-request gets its
// choices aborted and their KV blocks freed, streaming or not, and each
// choice it abandoned counts once as an abort in the metrics, with its e2e
// latency, as the docs' metrics table promises; none counts as stop or
// length.
func TestDisconnectFreesBlocks(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			verifyNoLeak(t)
			reg := prometheus.NewRegistry()
			mcfg := mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}}
			ms := newMockServer(t, mcfg, engine.Config{}, WithRegistry(reg, reg), WithServedModelNames("m"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := fmt.Sprintf(`{"prompt":"%s","max_tokens":3000,"n":2,"top_k":1,"stream":%v}`, strings.Repeat("z", 100), stream)
			running := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := ms.post(ctx, "/v1/completions", body)
				if err != nil {
					return // non-streaming: cancelled before the answer
				}
				defer resp.Body.Close()
				// Streaming: read a few events, then wait for the hang-up.
				br := bufio.NewReader(resp.Body)
				for range 10 {
					_, _ = br.ReadString('\n')
				}
				close(running)
				<-ctx.Done()
			}()
			if stream {
				<-running
			} else {
				require.Eventually(t, func() bool { return ms.eng.Stats().GenerationTokens > 10 }, 5*time.Second, time.Millisecond)
			}
			require.Positive(t, ms.eng.Stats().KVBlocksUsed, "the request holds blocks while it runs")
			cancel()
			<-done
			require.Eventually(t, func() bool {
				s := ms.eng.Stats()
				return s.KVBlocksUsed == 0 && s.Running == 0
			}, 5*time.Second, time.Millisecond, "blocks freed: %+v", ms.eng.Stats())
			s := ms.eng.Stats()
			assert.Less(t, s.GenerationTokens, uint64(2*3000), "the request was cut short")
			require.Eventually(t, func() bool { return finishedCount(t, reg, "abort") == 2 }, 5*time.Second, time.Millisecond,
				"both choices count as aborted")
			assert.Equal(t, 2.0, finishedCount(t, reg, "abort"), "counted once, not again for the engine's own abort")
			assert.Zero(t, finishedCount(t, reg, "length")+finishedCount(t, reg, "stop"))
			assert.Equal(t, uint64(2), histogramCount(t, reg, "vllm:e2e_request_latency_seconds"))
			ms.close()
		})
	}
}

// TestEngineFailure: a backend failure mid-stream ends the stream with an
// error event and [DONE]; /health then says the engine is dead.
func TestEngineFailure(t *testing.T) {
	ms := newMockServer(t, mock.Config{FailAtStep: 5}, engine.Config{})
	resp, err := ms.post(context.Background(), "/v1/completions", `{"prompt":"x","max_tokens":50,"temperature":0,"stream":true}`)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	evs := sseEvents(t, string(b))
	require.GreaterOrEqual(t, len(evs), 2)
	assert.Equal(t, "[DONE]", evs[len(evs)-1])
	var e errJSON
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-2]), &e))
	assert.Equal(t, typeUnavailable, e.Error.Type, e.Error.Message)

	r, err := ms.client.Get(ms.srv.URL + "/health")
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, 503, r.StatusCode)
	resp, err = ms.post(context.Background(), "/v1/completions", `{"prompt":"x","max_tokens":5}`)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	require.ErrorIs(t, ms.eng.Health(), llm.ErrEngineDead)
}

// smallBufListener shrinks each accepted connection's send buffer, so a
// client that stops reading blocks the server's writes after a few KiB.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStalledReaderDropped: a streaming client that stops reading is
// dropped once a write outlasts the per-event deadline, and its request is
// aborted instead of holding KV blocks.
func TestStalledReaderDropped(t *testing.T) {
	verifyNoLeak(t)
	eng, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}}, engine.Config{})
	require.NoError(t, err)
	var logs syncbuf.Buffer
	h := NewHandler(eng, WithStreamWriteTimeout(200*time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBufListener{srv.Listener}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = eng.Close()
	})

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	const maxTokens = 4000 // 4 s of steps: a normal end is out of reach
	body := fmt.Sprintf(`{"prompt":"stall","max_tokens":%d,"temperature":0,"logprobs":20,"stream":true}`, maxTokens)
	_, err = fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(t, err)
	// Never read.
	require.Eventually(t, func() bool { return eng.Stats().GenerationTokens > 0 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		s := eng.Stats()
		return s.Running == 0 && s.KVBlocksUsed == 0
	}, 5*time.Second, 5*time.Millisecond, "the stalled request is aborted: %+v", eng.Stats())
	assert.Less(t, eng.Stats().GenerationTokens, uint64(maxTokens))
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "writing to the client failed") },
		5*time.Second, 5*time.Millisecond)
}

// finishedCount is vllm:request_success_total for one finished_reason, 0
// when the series does not exist yet.
func finishedCount(t *testing.T, g prometheus.Gatherer, reason string) float64 {
	t.Helper()
	v, _ := successTotal(t, g, "finished_reason", reason)
	return v
}

// histogramCount is the sample count of an unlabelled (but for model_name)
// histogram.
func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no histogram %s", name)
	return 0
}

// The engine reports its queue bound, so the handler can refuse what no
// retry could pass.
var _ QueueBounder = (*engine.Engine)(nil)

// TestRealEngineQueueBound: with the engine's own MaxPending of 2 and no
// handler bound, n=3 is a 400 naming n, even on an idle server.
func TestRealEngineQueueBound(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{MaxPending: 2})
	resp, err := ms.post(context.Background(), "/v1/completions", `{"prompt":"a","max_tokens":1,"n":3}`)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	assert.Contains(t, string(body), `"param":"n"`)
}

// TestNothingAllowedIsABadRequest: a request whose allowed tokens its own
// min_tokens bans fails as a 400 naming allowed_token_ids (an error event
// in a stream), and the engine stays healthy.
func TestNothingAllowedIsABadRequest(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{})
	const body = `{"prompt":"ab","allowed_token_ids":[97],"stop_token_ids":[97],"min_tokens":2,"max_tokens":4`
	resp, err := ms.post(context.Background(), "/v1/completions", body+`}`)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 400, resp.StatusCode, string(b))
	var e errJSON
	require.NoError(t, json.Unmarshal(b, &e))
	require.NotNil(t, e.Error.Param)
	assert.Equal(t, "allowed_token_ids", *e.Error.Param)
	assert.Contains(t, e.Error.Message, "ban every one")

	resp, err = ms.post(context.Background(), "/v1/completions", body+`,"stream":true}`)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	evs := sseEvents(t, string(b))
	require.GreaterOrEqual(t, len(evs), 2)
	assert.Equal(t, "[DONE]", evs[len(evs)-1])
	e = errJSON{}
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-2]), &e))
	assert.Equal(t, typeInvalidRequest, e.Error.Type, e.Error.Message)
	assert.NoError(t, ms.eng.Health())
}

// TestClientGoneBeforeAdmission: a request whose client hung up before the
// engine saw it is refused by the engine with the context's error; the
// handler writes nothing (nobody would read it), logs no failure, and
// counts nothing in /metrics.
func TestClientGoneBeforeAdmission(t *testing.T) {
	eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	var logs bytes.Buffer
	reg := prometheus.NewPedanticRegistry()
	h := NewHandler(eng, WithRegistry(reg, reg), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A text prompt stops while it is tokenized; token ids reach the engine,
	// which refuses them.
	for _, body := range []string{`{"prompt":"a","max_tokens":3}`, `{"prompt":[97],"max_tokens":3,"stream":true,"n":2}`} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)).WithContext(ctx))
		assert.Empty(t, rec.Body.String(), body)
	}
	assert.NotContains(t, logs.String(), "level=ERROR")
	assert.Equal(t, 2, strings.Count(logs.String(), "status=499 bytes=0"), "the access log says the client left")
	assert.Contains(t, logs.String(), "client went away while its prompt was tokenized")
	assert.Contains(t, logs.String(), "client went away before its request was admitted")
	assert.Zero(t, counterValue(t, reg, "vllm:request_success_total"))
	assert.Equal(t, 0, eng.Stats().Running+eng.Stats().Waiting)
}
