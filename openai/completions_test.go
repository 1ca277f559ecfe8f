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
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/internal/syncbuf"
	"github.com/tinyserve/tinyserve/llm"
)

type respJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int             `json:"index"`
		Text         string          `json:"text"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   any             `json:"stop_reason"`
		PromptIDs    []int           `json:"prompt_token_ids"`
		TokenIDs     []int           `json:"token_ids"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	} `json:"usage"`
	Error *json.RawMessage `json:"error"`
}

func TestCompletionJSON(t *testing.T) {
	f := newFake()
	h := NewHandler(f, WithServedModelNames("tiny", "alias"))
	rec := serve(t, h, "POST", "/v1/completions", `{"model":"alias","prompt":["hi","yo!"],"max_tokens":3,"n":2,"seed":7,"return_token_ids":true}`,
		RequestIDHeader, "req-42")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, "req-42", rec.Header().Get(RequestIDHeader))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var r respJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Equal(t, "cmpl-req-42", r.ID)
	assert.Equal(t, "text_completion", r.Object)
	assert.Equal(t, "tiny", r.Model, "the first served name, whichever was asked for, as vLLM answers")
	assert.InDelta(t, time.Now().Unix(), r.Created, 5)
	require.Len(t, r.Choices, 4)
	for i, c := range r.Choices {
		assert.Equal(t, i, c.Index)
		assert.Equal(t, "abc", c.Text)
		assert.Equal(t, "length", *c.FinishReason)
		assert.Nil(t, c.StopReason)
		assert.Equal(t, []int{'a', 'b', 'c'}, c.TokenIDs)
	}
	assert.Equal(t, []int{'h', 'i'}, r.Choices[1].PromptIDs)
	assert.Equal(t, []int{'y', 'o', '!'}, r.Choices[2].PromptIDs)
	// Each prompt counts once, each choice's tokens count.
	assert.Equal(t, 2+3, r.Usage.Prompt)
	assert.Equal(t, 4*3, r.Usage.Completion)
	assert.Equal(t, 17, r.Usage.Total)

	// One engine request per choice; choice j of a prompt has seed+j, as vLLM.
	reqs := f.requests()
	require.Len(t, reqs, 4)
	for i, want := range []int64{7, 8, 7, 8} {
		assert.Equal(t, want, *reqs[i].Params.Seed, "choice %d", i)
		assert.Equal(t, fmt.Sprintf("cmpl-req-42-%d", i), reqs[i].ID)
	}
}

func TestEchoAndStopReason(t *testing.T) {
	f := newFake()
	f.script = func(req llm.Request) []llm.Event {
		return []llm.Event{
			{TokenIDs: []int{'x'}, Text: "x", StopTokenID: -1, PromptTokens: len(req.PromptTokens), CompletionTokens: 1},
			{TokenIDs: []int{'\n', 5}, Text: "", Finish: llm.FinishStop, StopTokenID: 5, PromptTokens: len(req.PromptTokens), CompletionTokens: 3},
		}
	}
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":[[104,105]],"echo":true,"stop_token_ids":[5]}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r respJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Equal(t, "hix", r.Choices[0].Text, "echo decodes a token prompt")
	assert.Equal(t, "stop", *r.Choices[0].FinishReason)
	assert.Equal(t, float64(5), r.Choices[0].StopReason, "a stop token id is a number")
	assert.Nil(t, r.Choices[0].TokenIDs, "token ids only when asked")
	assert.Equal(t, 3, r.Usage.Completion, "usage counts the engine's tokens, not the text")

	f.script = func(req llm.Request) []llm.Event {
		return []llm.Event{{TokenIDs: []int{'x'}, Text: "x", Finish: llm.FinishStop, StopString: "yz", StopTokenID: -1, CompletionTokens: 1}}
	}
	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","stop":"yz"}`)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Equal(t, "yz", r.Choices[0].StopReason)
}

func TestLogprobsFormat(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"logprobs":2}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r respJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	want := `{"tokens":["a","b"],"token_logprobs":[-0.5,-0.5],` +
		`"top_logprobs":[{"a":-0.5,"A":-1,"B":-2},{"b":-0.5,"A":-1,"B":-2}],"text_offset":[0,1]}`
	assert.JSONEq(t, want, string(r.Choices[0].Logprobs))
	// Key order is stable: the chosen token first.
	assert.True(t, strings.HasPrefix(string(r.Choices[0].Logprobs), `{"tokens":["a","b"],"token_logprobs":[-0.5,-0.5],"top_logprobs":[{"a":-0.5,"A":-1,"B":-2}`), string(r.Choices[0].Logprobs))
}

// TestReturnTokensAsTokenIDs: vLLM's return_tokens_as_token_ids names
// every token of the logprobs object "token_id:<id>", top_logprobs keys
// included, and text_offset counts those strings, as vLLM's does; the text
// is unchanged. A stream names the tokens the same way, and each chunk's
// offsets start at the length of the text sent before it, as vLLM's.
func TestReturnTokensAsTokenIDs(t *testing.T) {
	body := `{"prompt":"a","max_tokens":2,"logprobs":2,"echo":true,"return_tokens_as_token_ids":true}`
	rec := serve(t, NewHandler(newFake()), "POST", "/v1/completions", body)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r respJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Equal(t, "aab", r.Choices[0].Text)
	want := `{"tokens":["token_id:97","token_id:97","token_id:98"],"token_logprobs":[null,-0.5,-0.5],` +
		`"top_logprobs":[null,{"token_id:97":-0.5,"token_id:65":-1,"token_id:66":-2},{"token_id:98":-0.5,"token_id:65":-1,"token_id:66":-2}],` +
		`"text_offset":[0,11,22]}`
	assert.JSONEq(t, want, string(r.Choices[0].Logprobs))

	rec = serve(t, NewHandler(newFake()), "POST", "/v1/completions", strings.Replace(body, `"echo":true`, `"stream":true`, 1))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var tokens []string
	var offsets []int
	for _, ev := range sseEvents(t, rec.Body.String()) {
		if ev == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Logprobs struct {
					Tokens     []string `json:"tokens"`
					TextOffset []int    `json:"text_offset"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev), &chunk))
		for _, c := range chunk.Choices {
			tokens = append(tokens, c.Logprobs.Tokens...)
			offsets = append(offsets, c.Logprobs.TextOffset...)
		}
	}
	assert.Equal(t, []string{"token_id:97", "token_id:98"}, tokens)
	assert.Equal(t, []int{0, 1}, offsets, "a stream's chunks start at the text sent so far, as vLLM's")
}

func TestTopLogprobsJSON(t *testing.T) {
	tests := []struct {
		in   topLogprobs
		want string
	}{
		{nil, `null`}, // the first token of an echoed prompt
		{topLogprobs{}, `{}`},
		{topLogprobs{{"a", -1}}, `{"a":-1}`},
		{topLogprobs{{"a", -1}, {"a", -2}, {`"q"`, -3}}, `{"a":-1,"\"q\"":-3}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.in)
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(b))
	}
	assert.Equal(t, minLogprob, finiteLogprob(float32(negInf())))
}

func negInf() float64 { return -1 / zero() }
func zero() float64   { return 0 }

// sseEvents splits an SSE body into its data payloads.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		require.True(t, strings.HasPrefix(line, "data: "), "line %q", line)
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

func TestStreaming(t *testing.T) {
	f := newFake()
	// "é" is two bytes: the first event's text is empty (half a character),
	// and its chunk goes out anyway, with the token's id and
	// log-probability, as vLLM streams every step that made a token.
	f.script = func(req llm.Request) []llm.Event {
		base := llm.Event{StopTokenID: -1, PromptTokens: len(req.PromptTokens)}
		e1, e2, e3 := base, base, base
		e1.TokenIDs, e1.CompletionTokens = []int{0xC3}, 1
		e1.Logprobs = []llm.TokenLogprob{{ID: 0xC3, Logprob: -1}}
		e2.TokenIDs, e2.Text, e2.CompletionTokens = []int{0xA9}, "é", 2
		e2.Logprobs = []llm.TokenLogprob{{ID: 0xA9, Logprob: -2}}
		e3.TokenIDs, e3.Text, e3.CompletionTokens, e3.Finish = []int{'!'}, "!", 3, llm.FinishLength
		e3.Logprobs = []llm.TokenLogprob{{ID: '!', Logprob: -3}}
		return []llm.Event{e1, e2, e3}
	}
	rec := serve(t, NewHandler(f), "POST", "/v1/completions",
		`{"prompt":"hey","max_tokens":3,"stream":true,"stream_options":{"include_usage":true},"logprobs":0,"return_token_ids":true,"n":2}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
	evs := sseEvents(t, rec.Body.String())
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	evs = evs[:len(evs)-1]
	require.Len(t, evs, 2*3+1, "a chunk per token and choice, plus usage")

	type want struct {
		text     string
		ids      []int
		logprobs string
	}
	// The offsets of each chunk start at the text sent so far (nothing,
	// then "é", one character), not at the U+FFFD token strings of the
	// chunks before, as vLLM's stream counts them.
	wants := []want{
		{"", []int{0xC3}, `{"tokens":["\ufffd"],"token_logprobs":[-1],"top_logprobs":[{"\ufffd":-1}],"text_offset":[0]}`},
		{"é", []int{0xA9}, `{"tokens":["\ufffd"],"token_logprobs":[-2],"top_logprobs":[{"\ufffd":-2}],"text_offset":[0]}`},
		{"!", []int{'!'}, `{"tokens":["!"],"token_logprobs":[-3],"top_logprobs":[{"!":-3}],"text_offset":[1]}`},
	}
	seen := map[int]int{}
	for _, raw := range evs[:6] {
		var c respJSON
		require.NoError(t, json.Unmarshal([]byte(raw), &c), raw)
		assert.Contains(t, raw, `"usage":null`, "with include_usage every chunk carries usage, null until the last")
		require.Len(t, c.Choices, 1)
		ch := c.Choices[0]
		k := seen[ch.Index]
		seen[ch.Index]++
		require.Less(t, k, len(wants), "nothing after a choice's finish: %s", raw)
		w := wants[k]
		assert.Equal(t, w.text, ch.Text, "choice %d chunk %d", ch.Index, k)
		assert.Equal(t, w.ids, ch.TokenIDs, "each chunk carries the ids of its step's tokens")
		assert.JSONEq(t, w.logprobs, string(ch.Logprobs), "choice %d chunk %d", ch.Index, k)
		if k == 0 {
			assert.Equal(t, []int{'h', 'e', 'y'}, ch.PromptIDs, "prompt ids on a choice's first chunk")
		} else {
			assert.Nil(t, ch.PromptIDs)
		}
		if k == len(wants)-1 {
			require.NotNil(t, ch.FinishReason)
			assert.Equal(t, "length", *ch.FinishReason)
		} else {
			assert.Nil(t, ch.FinishReason)
		}
		assert.Equal(t, "cmpl-", c.ID[:5])
	}
	assert.Equal(t, map[int]int{0: 3, 1: 3}, seen)
	var u respJSON
	require.NoError(t, json.Unmarshal([]byte(evs[6]), &u))
	assert.Empty(t, u.Choices)
	assert.NotNil(t, u.Choices, "choices: [] in the usage chunk")
	require.NotNil(t, u.Usage)
	assert.Equal(t, 3, u.Usage.Prompt)
	assert.Equal(t, 6, u.Usage.Completion)
	assert.Equal(t, 9, u.Usage.Total)
}

// streamWriter is a flushing http.ResponseWriter whose body may be read
// while the handler writes it.
type streamWriter struct {
	header http.Header
	body   syncbuf.Buffer
}

func (w *streamWriter) Header() http.Header         { return w.header }
func (w *streamWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
func (w *streamWriter) WriteHeader(int)             {}
func (w *streamWriter) Flush()                      {}

// TestStreamFirstChunkAtFirstToken: a choice's first chunk leaves with its
// first token, not when that token's text is complete. By the time the
// engine hands over the second token the client has been sent a chunk with
// the first one's id and its empty text, so a benchmark that stops its TTFT
// clock at the first chunk (vllm bench serve) times the first token here as
// it does against vLLM, and counts one inter-token gap per token.
func TestStreamFirstChunkAtFirstToken(t *testing.T) {
	f := newFake()
	f.script = func(req llm.Request) []llm.Event {
		base := llm.Event{StopTokenID: -1, PromptTokens: len(req.PromptTokens)}
		e1, e2 := base, base
		e1.TokenIDs, e1.CompletionTokens = []int{0xC3}, 1
		e2.TokenIDs, e2.Text, e2.CompletionTokens, e2.Finish = []int{0xA9}, "é", 2, llm.FinishLength
		return []llm.Event{e1, e2}
	}
	w := &streamWriter{header: http.Header{}}
	var atSecond string
	f.delivered = func(i int) {
		if i == 1 {
			atSecond = w.body.String()
		}
	}
	req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":2,"stream":true,"return_token_ids":true}`))
	NewHandler(f).ServeHTTP(w, req)
	require.NoError(t, f.Close()) // the fake's goroutine, and its write of atSecond, are done

	sent := sseEvents(t, atSecond)
	require.NotEmpty(t, sent, "no chunk had been sent when the second token was handed over")
	var c respJSON
	require.NoError(t, json.Unmarshal([]byte(sent[0]), &c), sent[0])
	require.Len(t, c.Choices, 1)
	assert.Equal(t, "", c.Choices[0].Text, "half a character has no text yet")
	assert.Equal(t, []int{0xC3}, c.Choices[0].TokenIDs)
	assert.Nil(t, c.Choices[0].FinishReason)

	all := sseEvents(t, w.body.String())
	require.Len(t, all, 3, "a chunk per token, then [DONE]: %v", all)
	require.NoError(t, json.Unmarshal([]byte(all[1]), &c), all[1])
	assert.Equal(t, "é", c.Choices[0].Text)
	assert.Equal(t, []int{0xA9}, c.Choices[0].TokenIDs)
}

func TestStreamEchoWithoutUsage(t *testing.T) {
	rec := serve(t, NewHandler(newFake()), "POST", "/v1/completions", `{"prompt":"hey","max_tokens":2,"stream":true,"echo":true}`)
	require.Equal(t, 200, rec.Code)
	evs := sseEvents(t, rec.Body.String())
	require.Equal(t, []string{"[DONE]"}, evs[2:])
	var c respJSON
	require.NoError(t, json.Unmarshal([]byte(evs[0]), &c))
	assert.Equal(t, "heya", c.Choices[0].Text)
	assert.Nil(t, c.Usage)
	assert.NotContains(t, evs[0], `"usage"`, "no usage field without include_usage")
	assert.Nil(t, c.Choices[0].FinishReason)
}

func TestStreamErrorAfterHeaders(t *testing.T) {
	tests := []struct {
		name     string
		last     llm.Event
		wantType string
	}{
		{"backend error", llm.Event{Finish: llm.FinishError, Err: errors.New("cuda: launch failed")}, typeServer},
		{"engine died", llm.Event{Finish: llm.FinishError, Err: fmt.Errorf("%w: boom", llm.ErrEngineDead)}, typeUnavailable},
		{"engine closed", llm.Event{Finish: llm.FinishAbort}, typeUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.script = func(llm.Request) []llm.Event {
				return []llm.Event{{TokenIDs: []int{'a'}, Text: "a", CompletionTokens: 1}, tc.last}
			}
			rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"hey","stream":true}`)
			require.Equal(t, 200, rec.Code)
			evs := sseEvents(t, rec.Body.String())
			require.Len(t, evs, 3, rec.Body.String())
			assert.Contains(t, evs[0], `"text":"a"`)
			var e errJSON
			require.NoError(t, json.Unmarshal([]byte(evs[1]), &e))
			assert.Equal(t, tc.wantType, e.Error.Type)
			assert.NotEmpty(t, e.Error.Message)
			assert.Equal(t, "[DONE]", evs[2])

			// The same failure without streaming is a plain error response.
			rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"hey"}`)
			assert.GreaterOrEqual(t, rec.Code, 500)
			assert.Equal(t, tc.wantType, decodeErr(t, rec).Error.Type)
		})
	}
}

// TestChannelClosedWithoutFinalEvent: an engine that closes a choice's
// channel without a final event (a broken engine; the real one never does)
// fails the request as a server error instead of answering with a short
// completion that looks finished, whether streamed or not and with one
// choice or several.
func TestChannelClosedWithoutFinalEvent(t *testing.T) {
	for _, n := range []int{1, 2} {
		f := newFake()
		f.script = func(llm.Request) []llm.Event {
			return []llm.Event{{TokenIDs: []int{'a'}, Text: "a", CompletionTokens: 1, StopTokenID: -1}}
		}
		body := fmt.Sprintf(`{"prompt":"hey","n":%d,"max_tokens":4`, n)
		rec := serve(t, NewHandler(f), "POST", "/v1/completions", body+`,"stream":true}`)
		require.Equal(t, 200, rec.Code)
		evs := sseEvents(t, rec.Body.String())
		require.GreaterOrEqual(t, len(evs), 2, rec.Body.String())
		var e errJSON
		require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-2]), &e), "n=%d: the event before [DONE] is an error: %s", n, rec.Body.String())
		assert.Equal(t, typeServer, e.Error.Type)
		assert.Equal(t, "[DONE]", evs[len(evs)-1])
		assert.NotContains(t, rec.Body.String(), `"finish_reason":"`, "n=%d: no choice may look finished", n)

		rec = serve(t, NewHandler(f), "POST", "/v1/completions", body+`}`)
		assert.Equal(t, 500, rec.Code, "n=%d: %s", n, rec.Body.String())
		assert.Equal(t, typeServer, decodeErr(t, rec).Error.Type)
	}
}

// TestUnavailableClosesConnection: the OpenAI SDKs retry a 503 at once on
// their pooled keep-alive connection (openai-node 6.49.0 sent all three
// attempts to a draining server over one connection), so a 503 must close
// it for the retry to reach another replica behind a connection-level
// balancer. A 429 keeps it: retrying here after Retry-After is the point.
func TestUnavailableClosesConnection(t *testing.T) {
	tests := []struct {
		err   error
		close bool
	}{
		{llm.ErrDraining, true},
		{fmt.Errorf("%w: oom", llm.ErrEngineDead), true},
		{llm.ErrClosed, true},
		{llm.ErrOverloaded, false},
		{&llm.ParamError{Param: "top_k", Msg: "bad"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			f := newFake()
			f.genErr = tc.err
			srv := httptest.NewServer(NewHandler(f))
			defer srv.Close()
			for _, body := range []string{`{"prompt":"a"}`, `{"prompt":"a","stream":true}`} {
				srv.Client().CloseIdleConnections()
				var reused []bool
				for range 2 {
					trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
					req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
						"POST", srv.URL+"/v1/completions", strings.NewReader(body))
					require.NoError(t, err)
					resp, err := srv.Client().Do(req)
					require.NoError(t, err)
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					assert.Equal(t, tc.close, resp.Close, "%s: status %d", body, resp.StatusCode)
				}
				assert.Equal(t, []bool{false, !tc.close}, reused, "%s: was the connection reused for the retry?", body)
			}
		})
	}
}

func TestEngineRejections(t *testing.T) {
	tests := []struct {
		err    error
		status int
		typ    string
		param  string
	}{
		{llm.ErrOverloaded, 429, typeRateLimit, ""},
		{llm.ErrDraining, 503, typeUnavailable, ""},
		{fmt.Errorf("%w: oom", llm.ErrEngineDead), 503, typeUnavailable, ""},
		{llm.ErrClosed, 503, typeUnavailable, ""},
		{errors.New("something odd"), 500, typeServer, ""},
		{&llm.ContextLengthError{MaxModelLen: 8, PromptTokens: 5, MaxTokens: 4}, 400, typeInvalidRequest, "prompt"},
		{fmt.Errorf("%w: 3 blocks", llm.ErrTooLargeForCache), 400, typeInvalidRequest, "prompt"},
		{&llm.ParamError{Param: "top_k", Msg: "bad"}, 400, typeInvalidRequest, "top_k"},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			f := newFake()
			f.genErr = tc.err
			for _, body := range []string{`{"prompt":"a"}`, `{"prompt":"a","stream":true}`} {
				rec := serve(t, NewHandler(f), "POST", "/v1/completions", body)
				require.Equal(t, tc.status, rec.Code, rec.Body.String())
				e := decodeErr(t, rec)
				assert.Equal(t, tc.typ, e.Error.Type)
				if tc.param != "" {
					assert.Equal(t, tc.param, *e.Error.Param)
				}
				if tc.status == 429 {
					assert.Equal(t, "1", rec.Header().Get("Retry-After"))
				}
			}
		})
	}
}

func TestMaxPending(t *testing.T) {
	f := newFake()
	f.hold = make(chan struct{})
	h := NewHandler(f, WithMaxPending(3))
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":["a","b"],"n":2}`)
	require.Equal(t, 400, rec.Code, "4 sequences can never fit a bound of 3: no point retrying")
	assert.Equal(t, "n", *decodeErr(t, rec).Error.Param)

	srv := httptest.NewServer(h)
	defer srv.Close()
	// Two requests of n=1 and n=... hold 3 sequences; the next is refused
	// without reaching the engine.
	results := make(chan int, 2)
	for _, body := range []string{`{"prompt":"a","max_tokens":1}`, `{"prompt":"a","max_tokens":1,"n":2}`} {
		go func() {
			resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				results <- -1
				return
			}
			resp.Body.Close()
			results <- resp.StatusCode
		}()
	}
	require.Eventually(t, func() bool { return len(f.requests()) == 3 }, 5*time.Second, time.Millisecond)
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`)
	require.Equal(t, 429, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, typeRateLimit, decodeErr(t, rec).Error.Type)
	assert.Len(t, f.requests(), 3)
	close(f.hold)
	assert.Equal(t, 200, <-results)
	assert.Equal(t, 200, <-results)
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`)
	assert.Equal(t, 200, rec.Code, "capacity is returned when requests finish")
}

// boundedFake is a fake engine that reports its queue bound.
type boundedFake struct {
	*fakeEngine
	max int
}

func (b boundedFake) MaxPending() int { return b.max }

// TestEngineQueueBound: with an engine that reports its queue bound, a
// request with more choices than the bound is a 400 naming n (a retry could
// never pass the engine), not a 429; one within the bound is served.
func TestEngineQueueBound(t *testing.T) {
	f := newFake()
	h := NewHandler(boundedFake{f, 2})
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1,"n":8}`)
	require.Equal(t, 400, rec.Code, rec.Body.String())
	e := decodeErr(t, rec)
	assert.Equal(t, "n", *e.Error.Param)
	assert.Contains(t, e.Error.Message, "at most 2")
	assert.Empty(t, f.requests(), "refused before reaching the engine")

	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":["a","b"],"max_tokens":1}`)
	assert.Equal(t, 200, rec.Code, rec.Body.String())
}

func TestRoutes(t *testing.T) {
	f := newFake()
	h := NewHandler(f, WithServedModelNames("tiny", "alias"))
	tests := []struct {
		method, path, body string
		status             int
		want               string // JSON the body must equal, when set
	}{
		{"GET", "/health", "", 200, `{"status":"ok"}`},
		{"POST", "/health", "", 405, ""},
		{"GET", "/v1/completions", "", 405, ""},
		{"GET", "/v1/nothing", "", 404, `{"error":{"message":"no route for GET /v1/nothing","type":"invalid_request_error","param":null,"code":"not_found"}}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, `{"error":{"message":"As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.","type":"invalid_request_error","param":null,"code":"invalid_value"}}`},
		{"POST", "/v2/chat/completions", `{}`, 404, `{"error":{"message":"no route for POST /v2/chat/completions","type":"invalid_request_error","param":null,"code":"not_found"}}`},
		{"POST", "/tokenize", `{"prompt":"hé"}`, 200, `{"count":3,"max_model_len":64,"tokens":[104,195,169],"token_strs":null}`},
		{"POST", "/tokenize", `{"model":"alias","prompt":"h","return_token_strs":true,"add_special_tokens":true}`, 200, `{"count":1,"max_model_len":64,"tokens":[104],"token_strs":["h"]}`},
		{"POST", "/tokenize", `{"prompt":""}`, 200, `{"count":0,"max_model_len":64,"tokens":[],"token_strs":null}`},
		{"POST", "/tokenize", `{"prompt":"h","model":"other"}`, 404, ""},
		{"POST", "/tokenize", `{"prompt":"h","messages":[]}`, 400, ""},
		{"POST", "/tokenize", `{}`, 400, ""},
		{"POST", "/detokenize", `{"tokens":[104,195,169]}`, 200, `{"prompt":"hé"}`},
		{"POST", "/detokenize", `{"tokens":[104,257]}`, 400, ""},
		{"POST", "/detokenize", `{"tokens":"x"}`, 400, ""},
		{"POST", "/detokenize", `{}`, 400, ""},
		{"POST", "/detokenize", `{"tokens":[104,null]}`, 400, `{"error":{"message":"tokens: the element at index 1 must be an integer, not null","type":"invalid_request_error","param":"tokens","code":"invalid_type"}}`},
		{"POST", "/detokenize", `{"tokens":[]}`, 200, `{"prompt":""}`},
		{"GET", "/v1/models/other", "", 404, `{"error":{"message":"The model ` + "`other`" + ` does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"GET", "/v1/models/", "", 404, `{"error":{"message":"no route for GET /v1/models/","type":"invalid_request_error","param":null,"code":"not_found"}}`},
		{"DELETE", "/v1/models/tiny", "", 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+tc.path+tc.body, func(t *testing.T) {
			rec := serve(t, h, tc.method, tc.path, tc.body)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			if tc.want != "" {
				assert.JSONEq(t, tc.want, rec.Body.String())
			}
			if tc.status >= 400 {
				decodeErr(t, rec)
			}
		})
	}

	rec := serve(t, h, "GET", "/v1/models", "")
	require.Equal(t, 200, rec.Code)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Created     int64  `json:"created"`
			OwnedBy     string `json:"owned_by"`
			Root        string `json:"root"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	assert.Equal(t, "list", list.Object)
	require.Len(t, list.Data, 2)
	assert.Equal(t, "tiny", list.Data[0].ID)
	assert.Equal(t, "alias", list.Data[1].ID)
	for _, m := range list.Data {
		assert.Equal(t, "model", m.Object)
		assert.Equal(t, "tinyserve", m.OwnedBy)
		assert.Equal(t, "fake", m.Root)
		assert.Equal(t, 64, m.MaxModelLen)
		assert.NotZero(t, m.Created)
	}

	// Retrieving one model answers exactly its entry in the list.
	for i, name := range []string{"tiny", "alias"} {
		rec := serve(t, h, "GET", "/v1/models/"+name, "")
		require.Equal(t, 200, rec.Code, rec.Body.String())
		want, err := json.Marshal(list.Data[i])
		require.NoError(t, err)
		assert.JSONEq(t, string(want), rec.Body.String())
	}
}

// TestRetrieveModelWithSlash: Hugging Face names hold a slash, and
// GET /v1/models/{model} retrieves them whole.
func TestRetrieveModelWithSlash(t *testing.T) {
	h := NewHandler(newFake(), WithServedModelNames("openai-community/gpt2"))
	rec := serve(t, h, "GET", "/v1/models/openai-community/gpt2", "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var card struct{ ID, Object string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &card))
	assert.Equal(t, "openai-community/gpt2", card.ID)
	assert.Equal(t, "model", card.Object)
	assert.Equal(t, 404, serve(t, h, "GET", "/v1/models/openai-community", "").Code)
}

// TestMethodNotAllowed: a 405 carries an Allow header (RFC 9110 §15.5.6)
// that lists exactly the methods the path takes: each one listed is served.
func TestMethodNotAllowed(t *testing.T) {
	h := NewHandler(newFake())
	tests := []struct{ path, wrong, allow string }{
		{"/v1/completions", "GET", "POST"},
		{"/tokenize", "PUT", "POST"},
		{"/detokenize", "GET", "POST"},
		{"/v1/models", "POST", "GET, HEAD"},
		{"/v1/models/fake", "PUT", "GET, HEAD"},
		{"/health", "DELETE", "GET, HEAD"},
		{"/version", "POST", "GET, HEAD"},
		{"/metrics", "POST", "GET, HEAD"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			rec := serve(t, h, tc.wrong, tc.path, "")
			require.Equal(t, 405, rec.Code)
			assert.Equal(t, tc.allow, rec.Header().Get("Allow"))
			e := decodeErr(t, rec)
			assert.Equal(t, typeInvalidRequest, e.Error.Type)
			for _, m := range strings.Split(tc.allow, ", ") {
				assert.NotEqual(t, 405, serve(t, h, m, tc.path, "").Code, "%s %s is listed in Allow", m, tc.path)
			}
		})
	}
	assert.Empty(t, serve(t, h, "GET", "/nothing", "").Header().Get("Allow"), "a 404 has no Allow")
}

func TestHealth(t *testing.T) {
	tests := []struct {
		err    error
		status string
	}{
		{llm.ErrDraining, "draining"},
		{fmt.Errorf("%w: step 3: boom", llm.ErrEngineDead), "dead"},
		{llm.ErrClosed, "closed"},
		{errors.New("odd"), "unavailable"},
	}
	for _, tc := range tests {
		f := newFake()
		f.health = tc.err
		rec := serve(t, NewHandler(f), "GET", "/health", "")
		require.Equal(t, 503, rec.Code)
		var b healthBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b))
		assert.Equal(t, tc.status, b.Status)
		assert.Equal(t, tc.err.Error(), b.Reason)
	}
}

func TestRequestIDAndLogs(t *testing.T) {
	var logs bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFake()
	h := NewHandler(f, WithLogger(lg))
	tests := []struct {
		sent string
		keep bool
	}{
		{"abc-123", true},
		{"", false},
		{"has space", false},
		{strings.Repeat("x", 129), false},
	}
	for _, tc := range tests {
		logs.Reset()
		rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1,"temperature":-1}`, RequestIDHeader, tc.sent)
		id := rec.Header().Get(RequestIDHeader)
		if tc.keep {
			assert.Equal(t, tc.sent, id)
		} else {
			assert.Len(t, id, 32)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		require.GreaterOrEqual(t, len(lines), 2, "a rejection line and an access line")
		for _, l := range lines {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m))
			assert.Equal(t, id, m["request_id"], l)
		}
	}
	// Two generated ids differ, and engine request ids derive from them.
	a := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`).Header().Get(RequestIDHeader)
	b := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":1}`).Header().Get(RequestIDHeader)
	assert.NotEqual(t, a, b)
	reqs := f.requests()
	assert.Equal(t, "cmpl-"+b+"-0", reqs[len(reqs)-1].ID)
}

// TestDisconnectCancels checks, on the fake, that a client that goes away
// cancels the engine request's context (the real engine then frees its
// blocks: see TestDisconnectFreesBlocks).
func TestDisconnectCancels(t *testing.T) {
	for _, stream := range []bool{false, true} {
		f := newFake()
		f.hold = make(chan struct{}) // events never come
		srv := httptest.NewServer(NewHandler(f))
		ctx, cancel := context.WithCancel(context.Background())
		body := fmt.Sprintf(`{"prompt":"a","stream":%v}`, stream)
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/completions", strings.NewReader(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				// streaming: headers arrive; then the client hangs up.
				cancel()
				resp.Body.Close()
			}
		}()
		require.Eventually(t, func() bool { return len(f.requests()) == 1 }, 5*time.Second, time.Millisecond)
		cancel()
		<-done
		f.wg.Wait() // returns only once the fake saw its context cancelled
		srv.Close()
	}
}

// TestDeadlineClearedForKeepAlive: the server has no WriteTimeout, so a
// write deadline left on a keep-alive connection would fail the next
// request on it. The handler relies on net/http clearing it after each
// response; this guards that assumption.
func TestDeadlineClearedForKeepAlive(t *testing.T) {
	srv := httptest.NewServer(NewHandler(newFake(), WithStreamWriteTimeout(50*time.Millisecond)))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	for i, body := range []string{
		`{"prompt":"a","max_tokens":2,"stream":true}`, `{"prompt":"a","max_tokens":2}`, `{"prompt":"a","max_tokens":2}`,
	} {
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			"POST", srv.URL+"/v1/completions", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, "request %d", i)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "request %d: %s", i, b)
		assert.Equal(t, i > 0, reused, "request %d on the kept-alive connection", i)
		time.Sleep(150 * time.Millisecond) // well past the last deadline
	}
}

// TestPanics: a panic before anything was sent is a 500 with the OpenAI
// body; one in the middle of a stream aborts the connection, so the client
// sees a broken stream rather than a short one ending in [DONE]. Either
// way it is logged with its stack and the server goes on serving.
func TestPanics(t *testing.T) {
	var logs syncbuf.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))

	f := newFake()
	f.panics = true
	rec := serve(t, NewHandler(f, WithLogger(lg)), "POST", "/v1/completions", `{"prompt":"a"}`)
	require.Equal(t, 500, rec.Code)
	assert.Equal(t, typeServer, decodeErr(t, rec).Error.Type)
	assert.Contains(t, logs.String(), "panic serving the request")
	assert.Contains(t, logs.String(), "fake engine: injected panic")
	assert.Contains(t, logs.String(), "status=500", "the access line is still written")

	f = newFake()
	f.tok = panickyTok{}
	srv := httptest.NewServer(NewHandler(f, WithLogger(lg)))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"a","max_tokens":5,"logprobs":0,"stream":true}`))
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Error(t, err, "the connection is aborted")
	assert.NotContains(t, string(b), "[DONE]")
	assert.Contains(t, logs.String(), "tokenizer: injected panic")

	resp, err = srv.Client().Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "still serving")
}

// TestModelsLabelsRandomWeights checks that a built-in random-weight model is
// labelled as such in /v1/models, and a trained one is not.
func TestModelsLabelsRandomWeights(t *testing.T) {
	for _, random := range []bool{true, false} {
		e := newFake()
		e.info.RandomWeights = random
		rec := serve(t, NewHandler(e), "GET", "/v1/models", "")
		require.Equal(t, 200, rec.Code)
		assert.Equal(t, random, strings.Contains(rec.Body.String(), `"random_weights":true`), rec.Body.String())
	}
}

// TestContinuousUsageStats: vLLM's stream_options.continuous_usage_stats
// puts each choice's usage so far on every chunk, only together with
// include_usage; the final usage chunk is unchanged.
func TestContinuousUsageStats(t *testing.T) {
	h := NewHandler(newFake())
	rec := serve(t, h, "POST", "/v1/completions",
		`{"prompt":"hey","max_tokens":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	evs := sseEvents(t, rec.Body.String())
	require.Len(t, evs, 5, rec.Body.String()) // 3 tokens, the usage chunk, [DONE]
	for i, raw := range evs[:3] {
		var chunk struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   *usage            `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &chunk))
		require.NotNil(t, chunk.Usage, "chunk %d: %s", i, raw)
		assert.Equal(t, usage{PromptTokens: 3, CompletionTokens: i + 1, TotalTokens: 3 + i + 1}, *chunk.Usage, "chunk %d", i)
	}
	assert.Contains(t, evs[3], `"choices":[]`)
	assert.Contains(t, evs[3], `"completion_tokens":3`)

	// Without include_usage it asks for nothing.
	rec = serve(t, h, "POST", "/v1/completions",
		`{"prompt":"hey","max_tokens":2,"stream":true,"stream_options":{"continuous_usage_stats":true}}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.NotContains(t, rec.Body.String(), `"usage"`)
}

// TestModelByFolderPath: a model loaded from a folder is also asked for by
// the path the engine was given, which vLLM serves it under and its
// benchmark client sends; an explicit served name replaces both, and a
// model found by Hugging Face id has no path name.
func TestModelByFolderPath(t *testing.T) {
	fromFolder := func() *fakeEngine {
		f := newFake()
		f.info.ID = "ckpt"
		f.info.Source = &llm.ModelSource{Dir: "./models/ckpt", Files: []string{"config.json", "model.safetensors"}}
		return f
	}
	body := `{"model":"./models/ckpt","prompt":"hi","max_tokens":2}`
	rec := serve(t, NewHandler(fromFolder()), "POST", "/v1/completions", body)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r respJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Equal(t, "./models/ckpt", r.Model)
	rec = serve(t, NewHandler(fromFolder()), "POST", "/v1/completions", `{"model":"ckpt","prompt":"hi","max_tokens":2}`)
	assert.Equal(t, 200, rec.Code, rec.Body.String())
	rec = serve(t, NewHandler(fromFolder()), "POST", "/tokenize", `{"model":"./models/ckpt","prompt":"hi"}`)
	assert.Equal(t, 200, rec.Code, rec.Body.String())

	rec = serve(t, NewHandler(fromFolder(), WithServedModelNames("mine")), "POST", "/v1/completions", body)
	assert.Equal(t, 404, rec.Code, "a served name replaces the path")
	renamed := fromFolder()
	renamed.info.ID, renamed.info.Root = "mine", "ckpt" // tinyserve.Config.ServedModelName
	rec = serve(t, NewHandler(renamed), "POST", "/v1/completions", body)
	assert.Equal(t, 404, rec.Code, "a served name replaces the path")
	hub := fromFolder()
	hub.info.ID = "org/ckpt"
	hub.info.Source = &llm.ModelSource{Dir: "/cache/models--org--ckpt/snapshots/abc", HubID: "org/ckpt", Revision: "abc"}
	rec = serve(t, NewHandler(hub), "POST", "/v1/completions", `{"model":"/cache/models--org--ckpt/snapshots/abc","prompt":"hi","max_tokens":2}`)
	assert.Equal(t, 404, rec.Code, "a hub snapshot is asked for by its id")
}
