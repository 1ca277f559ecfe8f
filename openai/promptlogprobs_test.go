package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// TestEchoLogprobsFormat: with echo and logprobs, the logprobs object
// starts with the prompt's tokens, the first with null, as vLLM answers;
// the engine is asked for prompt log-probabilities with as many
// alternatives as logprobs.
func TestEchoLogprobsFormat(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"abc","max_tokens":2,"logprobs":1,"echo":true}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r respJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.Equal(t, "abcab", r.Choices[0].Text)
	want := `{"tokens":["a","b","c","a","b"],"token_logprobs":[null,-0.25,-0.25,-0.5,-0.5],` +
		`"top_logprobs":[null,{"b":-0.25,"A":-1},{"c":-0.25,"A":-1},{"a":-0.5,"A":-1},{"b":-0.5,"A":-1}],"text_offset":[0,1,2,3,4]}`
	assert.JSONEq(t, want, string(r.Choices[0].Logprobs))
	require.Len(t, f.requests(), 1)
	assert.Equal(t, 1, *f.requests()[0].Params.PromptLogprobs)

	// Streamed, the first chunk carries the prompt and its entries; the
	// chunks together say what the single response says.
	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"abc","max_tokens":2,"logprobs":1,"echo":true,"stream":true}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var all completionLogprobs
	text := ""
	for _, raw := range sseEvents(t, rec.Body.String()) {
		if raw == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text     string `json:"text"`
				Logprobs struct {
					Tokens        []string          `json:"tokens"`
					TokenLogprobs []*float64        `json:"token_logprobs"`
					TopLogprobs   []json.RawMessage `json:"top_logprobs"`
					TextOffset    []int             `json:"text_offset"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &c), raw)
		text += c.Choices[0].Text
		lp := c.Choices[0].Logprobs
		all.Tokens = append(all.Tokens, lp.Tokens...)
		all.TextOffset = append(all.TextOffset, lp.TextOffset...)
		for _, v := range lp.TokenLogprobs {
			if v == nil {
				all.TokenLogprobs = append(all.TokenLogprobs, optLogprob{})
			} else {
				all.TokenLogprobs = append(all.TokenLogprobs, optLogprob{*v, true})
			}
		}
		for _, top := range lp.TopLogprobs {
			var m map[string]float64
			require.NoError(t, json.Unmarshal(top, &m))
			if m == nil {
				all.TopLogprobs = append(all.TopLogprobs, nil)
				continue
			}
			tl := topLogprobs{}
			for _, k := range []string{"a", "b", "c", "A"} { // the order of want
				if v, ok := m[k]; ok {
					tl = append(tl, tokenLogprob{k, v})
				}
			}
			all.TopLogprobs = append(all.TopLogprobs, tl)
		}
	}
	assert.Equal(t, "abcab", text)
	b, err := json.Marshal(all)
	require.NoError(t, err)
	assert.JSONEq(t, want, string(b))
}

// TestEchoWithoutGeneration: max_tokens 0 with echo (OpenAI's way to score
// a text) answers with the prompt alone, from an engine request that scores
// the prompt and generates nothing.
func TestEchoWithoutGeneration(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			f := newFake()
			body := fmt.Sprintf(`{"prompt":"abc","max_tokens":0,"logprobs":0,"echo":true,"return_token_ids":true,"stream":%v,"stream_options":%s}`,
				stream, map[bool]string{false: "null", true: `{"include_usage":true}`}[stream])
			rec := serve(t, NewHandler(f), "POST", "/v1/completions", body)
			require.Equal(t, 200, rec.Code, rec.Body.String())
			var r respJSON
			if stream {
				evs := sseEvents(t, rec.Body.String())
				require.Len(t, evs, 3, "one chunk, usage, [DONE]: %v", evs)
				require.NoError(t, json.Unmarshal([]byte(evs[0]), &r))
				var u respJSON
				require.NoError(t, json.Unmarshal([]byte(evs[1]), &u))
				r.Usage = u.Usage
			} else {
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
			}
			c := r.Choices[0]
			assert.Equal(t, "abc", c.Text)
			assert.Equal(t, "length", *c.FinishReason)
			assert.Equal(t, []int{}, c.TokenIDs)
			assert.JSONEq(t, `{"tokens":["a","b","c"],"token_logprobs":[null,-0.25,-0.25],"top_logprobs":[null,{"b":-0.25},{"c":-0.25}],"text_offset":[0,1,2]}`, string(c.Logprobs))
			require.NotNil(t, r.Usage)
			assert.Equal(t, 3, r.Usage.Prompt)
			assert.Equal(t, 0, r.Usage.Completion)
			require.Len(t, f.requests(), 1)
			p := f.requests()[0].Params
			assert.Equal(t, 0, p.MaxTokens, "the prompt alone: the engine generates nothing")
			assert.Equal(t, 0, *p.PromptLogprobs, "logprobs 0 with echo: the prompt scored, no alternatives")
		})
	}
}

// TestEchoLogprobsScoreTheEngine is an evaluation harness's loglikelihood
// request (token ids, echo, logprobs 1, max_tokens 1) on the real engine:
// each prompt token's value must be the engine's own prompt log-probability,
// and where the prompt token is the model's greedy choice (the second half
// of this prompt is the mock's continuation of the first) it must be the
// largest of its position, which is how a harness decides is_greedy.
func TestEchoLogprobsScoreTheEngine(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{MaxNumBatchedTokens: 5})
	head := []int{'t', 'h', 'e', ' ', 'c', 'a', 't'}
	prompt := append(head, mock.Expected(mock.Config{}, head, 8)...)
	body := postTokenPrompt(t, ms, prompt, `"echo":true,"logprobs":1,"max_tokens":1,"temperature":0`)
	var r struct {
		Choices []struct {
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []*float64           `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	lp := r.Choices[0].Logprobs
	require.Len(t, lp.TokenLogprobs, len(prompt)+1, "prompt tokens and the generated one")
	assert.Nil(t, lp.TokenLogprobs[0])
	assert.Nil(t, lp.TopLogprobs[0])

	one := 1
	ch, err := ms.eng.Generate(context.Background(), llm.Request{PromptTokens: prompt, Params: llm.SamplingParams{MaxTokens: 1, PromptLogprobs: &one}})
	require.NoError(t, err)
	var direct []llm.TokenLogprob
	for ev := range ch {
		if ev.PromptLogprobs != nil {
			direct = ev.PromptLogprobs
		}
	}
	require.Len(t, direct, len(prompt)-1)
	for i := 1; i < len(prompt); i++ {
		got := lp.TokenLogprobs[i]
		require.NotNil(t, got, "position %d", i)
		assert.InDelta(t, float64(direct[i-1].Logprob), *got, 1e-6, "position %d", i)
		best := math.Inf(-1)
		for _, v := range lp.TopLogprobs[i] {
			best = math.Max(best, v)
		}
		if i >= len(head) {
			assert.Equal(t, best, *got, "position %d: the greedy continuation is the largest", i)
		}
	}
}

// TestEchoLogprobsUnsupportedBackend: where the backend cannot return the
// rows of prompt positions, the request is a 400 naming the parameter, not
// an answer without the prompt's log-probabilities.
func TestEchoLogprobsUnsupportedBackend(t *testing.T) {
	eng, err := engine.New(struct{ engine.Backend }{mock.NewBackend(mock.Config{})}, mock.NewTokenizer(), mock.Info(), engine.Config{})
	require.NoError(t, err)
	defer eng.Close()
	srv := httptest.NewServer(NewHandler(eng))
	defer srv.Close()
	ms := &mockServer{eng: eng, srv: srv, client: srv.Client()}
	resp, err := ms.post(context.Background(), "/v1/completions", `{"prompt":"hello","echo":true,"logprobs":1,"max_tokens":0}`)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(body), `"param":"prompt_logprobs"`)
	assert.Contains(t, string(body), "does not compute prompt log-probabilities")
	// Without logprobs nothing of the prompt is scored, so echo works,
	// with max_tokens 0 (the prompt alone) or more.
	for body, want := range map[string]int{
		`{"prompt":"hello","echo":true,"max_tokens":0}`: 200,
		`{"prompt":"hello","echo":true,"max_tokens":2}`: 200,
	} {
		resp, err := ms.post(context.Background(), "/v1/completions", body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, body)
	}
	ms.client.CloseIdleConnections()
}

// TestEchoWithoutGenerationEndsByLength: with max_tokens 0 and echo no
// token is generated, so nothing that a next token would match (EOS, a stop
// token id, a stop string) may show: finish_reason is length and
// stop_reason null, streamed or not.
func TestEchoWithoutGenerationEndsByLength(t *testing.T) {
	next := mock.Expected(mock.Config{}, []int{'h', 'e', 'l', 'l', 'o'}, 1)[0]
	cases := map[string]struct {
		mcfg  mock.Config
		extra string
	}{
		"eos":           {mock.Config{EOSEvery: 1}, ``}, // every token the mock samples is EOS
		"stop token id": {mock.Config{}, fmt.Sprintf(`,"stop_token_ids":[%d]`, next)},
		"stop string":   {mock.Config{}, fmt.Sprintf(`,"stop":[%q]`, string(rune(next)))},
	}
	for name, tc := range cases {
		ms := newMockServer(t, tc.mcfg, engine.Config{})
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprint(name, "/stream=", stream), func(t *testing.T) {
				body := fmt.Sprintf(`{"prompt":"hello","echo":true,"max_tokens":0,"temperature":0,"stream":%v%s}`, stream, tc.extra)
				resp, err := ms.post(context.Background(), "/v1/completions", body)
				require.NoError(t, err)
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				require.Equal(t, 200, resp.StatusCode, string(raw))
				if stream {
					raw = []byte(sseEvents(t, string(raw))[0])
				}
				var r struct {
					Choices []struct {
						Text         string          `json:"text"`
						FinishReason string          `json:"finish_reason"`
						StopReason   json.RawMessage `json:"stop_reason"`
					} `json:"choices"`
				}
				require.NoError(t, json.Unmarshal(raw, &r), string(raw))
				require.Len(t, r.Choices, 1)
				assert.Equal(t, "hello", r.Choices[0].Text)
				assert.Equal(t, "length", r.Choices[0].FinishReason)
				assert.Equal(t, "null", string(r.Choices[0].StopReason))
			})
		}
	}
}

// TestStreamEchoSendsIncompleteTokens: with echo the prompt's chunk goes
// out with the first event, and carries its generated token even when that
// token's text is not complete yet (half of "é"): its id, and its
// log-probability after the prompt's, as vLLM's echo chunk joins the prompt
// and the first output. The next chunk's offsets start after the prompt's
// text, the text sent so far.
func TestStreamEchoSendsIncompleteTokens(t *testing.T) {
	f := newFake()
	f.script = func(req llm.Request) []llm.Event {
		base := llm.Event{StopTokenID: -1, PromptTokens: len(req.PromptTokens)}
		e1, e2 := base, base
		e1.TokenIDs, e1.CompletionTokens = []int{0xC3}, 1
		e1.Logprobs = []llm.TokenLogprob{{ID: 0xC3, Logprob: -1}}
		e1.PromptLogprobs = fakePromptLogprobs(req)
		e2.TokenIDs, e2.Text, e2.CompletionTokens, e2.Finish = []int{0xA9}, "é", 2, llm.FinishLength
		e2.Logprobs = []llm.TokenLogprob{{ID: 0xA9, Logprob: -2}}
		return []llm.Event{e1, e2}
	}
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"hi","max_tokens":2,"stream":true,"echo":true,"logprobs":0,"return_token_ids":true}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	evs := sseEvents(t, rec.Body.String())
	require.Len(t, evs, 3, "the echo with the half character, the completed character, [DONE]: %v", evs)
	var first, second respJSON
	require.NoError(t, json.Unmarshal([]byte(evs[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(evs[1]), &second))
	assert.Equal(t, "hi", first.Choices[0].Text)
	assert.Equal(t, []int{'h', 'i'}, first.Choices[0].PromptIDs)
	assert.Equal(t, []int{0xC3}, first.Choices[0].TokenIDs, "the half character's id goes with the step that made it")
	assert.JSONEq(t, `{"tokens":["h","i","\ufffd"],"token_logprobs":[null,-0.25,-1],"top_logprobs":[null,{"i":-0.25},{"\ufffd":-1}],"text_offset":[0,1,2]}`, string(first.Choices[0].Logprobs))
	assert.Equal(t, "é", second.Choices[0].Text)
	assert.Equal(t, []int{0xA9}, second.Choices[0].TokenIDs)
	assert.JSONEq(t, `{"tokens":["\ufffd"],"token_logprobs":[-2],"top_logprobs":[{"\ufffd":-2}],"text_offset":[2]}`, string(second.Choices[0].Logprobs))
}

// TestVLLMPromptLogprobsField: vLLM's prompt_logprobs request field adds
// vLLM's prompt_logprobs list to each choice (null, then per prompt token an
// object from id to logprob, rank and decoded token, the prompt token
// first); with echo and logprobs the echoed entries keep logprobs' count of
// alternatives. On a stream only 0 is accepted, and nothing is added.
func TestVLLMPromptLogprobsField(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"abc","max_tokens":1,"prompt_logprobs":2,"echo":true,"logprobs":1}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r struct {
		Choices []struct {
			Logprobs       json.RawMessage `json:"logprobs"`
			PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	assert.JSONEq(t, `[null,`+
		`{"98":{"logprob":-0.25,"rank":1,"decoded_token":"b"},"65":{"logprob":-1,"rank":1,"decoded_token":"A"},"66":{"logprob":-2,"rank":2,"decoded_token":"B"}},`+
		`{"99":{"logprob":-0.25,"rank":1,"decoded_token":"c"},"65":{"logprob":-1,"rank":1,"decoded_token":"A"},"66":{"logprob":-2,"rank":2,"decoded_token":"B"}}]`,
		string(r.Choices[0].PromptLogprobs))
	assert.True(t, strings.HasPrefix(string(r.Choices[0].PromptLogprobs), `[null,{"98":`), "the prompt token comes first: %s", r.Choices[0].PromptLogprobs)
	assert.JSONEq(t, `{"tokens":["a","b","c","a"],"token_logprobs":[null,-0.25,-0.25,-0.5],`+
		`"top_logprobs":[null,{"b":-0.25,"A":-1},{"c":-0.25,"A":-1},{"a":-0.5,"A":-1}],"text_offset":[0,1,2,3]}`, string(r.Choices[0].Logprobs))
	assert.Equal(t, 2, *f.requests()[0].Params.PromptLogprobs)

	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"abc","max_tokens":1,"prompt_logprobs":0,"stream":true}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.NotContains(t, rec.Body.String(), "prompt_logprobs")
	assert.Nil(t, f.requests()[1].Params.PromptLogprobs, "a stream shows no prompt_logprobs, so none are computed")
	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"abc","max_tokens":1}`)
	assert.NotContains(t, rec.Body.String(), "prompt_logprobs", "only when asked")
}

// TestVLLMPromptLogprobsRanks: on the real engine, each prompt token's rank
// agrees with the alternatives listed beside it.
func TestVLLMPromptLogprobsRanks(t *testing.T) {
	ms := newMockServer(t, mock.Config{}, engine.Config{})
	head := []int{'t', 'h', 'e'}
	prompt := append(head, mock.Expected(mock.Config{}, head, 4)...)
	body := postTokenPrompt(t, ms, prompt, `"prompt_logprobs":3,"max_tokens":1`)
	var r struct {
		Choices []struct {
			PromptLogprobs []map[string]struct {
				Logprob float64 `json:"logprob"`
				Rank    int     `json:"rank"`
				Token   string  `json:"decoded_token"`
			} `json:"prompt_logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &r))
	plp := r.Choices[0].PromptLogprobs
	require.Len(t, plp, len(prompt))
	assert.Nil(t, plp[0])
	for i := 1; i < len(prompt); i++ {
		own, ok := plp[i][fmt.Sprint(prompt[i])]
		require.True(t, ok, "position %d lacks its prompt token", i)
		better := 0
		for _, e := range plp[i] {
			if e.Logprob > own.Logprob {
				better++
			}
		}
		if len(plp[i]) == 3 { // the prompt token is one of the three most likely
			assert.Equal(t, better+1, own.Rank, "position %d: rank against the listed alternatives", i)
		} else {
			assert.Len(t, plp[i], 4, "position %d: the prompt token and three alternatives", i)
			assert.Greater(t, own.Rank, 3, "position %d: a token outside the three most likely", i)
		}
		if i >= len(head) {
			assert.Equal(t, 1, own.Rank, "position %d: the model's own continuation ranks first", i)
			assert.Len(t, plp[i], 3, "position %d: three alternatives, the prompt token among them", i)
		}
	}
}

// postTokenPrompt posts a completion of the token-id prompt with the other
// fields given (JSON members) and returns the body of its 200 answer.
func postTokenPrompt(t *testing.T, ms *mockServer, prompt []int, fields string) []byte {
	t.Helper()
	ids, _ := json.Marshal(prompt)
	resp, err := ms.post(context.Background(), "/v1/completions", `{"prompt":`+string(ids)+`,`+fields+`}`)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, 200, resp.StatusCode, string(body))
	return body
}
