// Package interop_test runs the interoperability checks of openai-node.mjs
// with the official OpenAI Go SDK (openai-go) against the handler serving
// the engine that run.sh's server serves (tiny-gpt2, prefix caching, API key
// interop-key), in process, so that `go test ./...` keeps them from
// drifting. node_test.go runs openai-node.mjs itself when Node.js and the
// npm package "openai" are installed.
package interop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/openai"
)

// The flags run.sh starts tinyserve-serve with by default.
const (
	modelName = "tiny-gpt2"
	apiKey    = "interop-key"
)

// server is the handler of an engine configured as run.sh's server, on a
// loopback port.
type server struct {
	base   string // http://127.0.0.1:PORT
	http   *http.Client
	client sdk.Client
	model  string // the served name; models.list checks that it lists it first
}

// startServer opens the engine as tinyserve-serve --model tiny-gpt2
// --enable-prefix-caching --api-key interop-key does and serves it with
// httptest; the cleanup shuts both down in cmd/serve's order.
func startServer(t *testing.T) *server {
	t.Helper()
	eng, err := tinyserve.Open(context.Background(), tinyserve.Config{Model: modelName, EnablePrefixCaching: true})
	require.NoError(t, err)
	srv := httptest.NewServer(openai.NewHandler(eng, openai.WithAPIKeys(apiKey)))
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
		_ = eng.Close()
	})
	return &server{
		base: srv.URL,
		http: srv.Client(),
		client: sdk.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(apiKey),
			option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0), option.WithRequestTimeout(60*time.Second)),
		model: eng.Info().ID,
	}
}

// ---- assertions -------------------------------------------------------------

func now() int64 { return time.Now().Unix() }

// decodeRaw decodes a response field's JSON (raw is "" when it is absent).
func decodeRaw(t *testing.T, raw string, v any, what string) {
	t.Helper()
	require.NotEmpty(t, raw, "%s: absent", what)
	require.NoError(t, json.Unmarshal([]byte(raw), v), "%s: %s", what, raw)
}

// checkUsage checks a CompletionUsage: the openai-go types are integers
// already, so "a non-negative integer" is each field present and valid.
func checkUsage(t *testing.T, c *sdk.Completion, what string) {
	t.Helper()
	require.True(t, c.JSON.Usage.Valid(), "%s: usage is missing (%q)", what, c.JSON.Usage.Raw())
	u := c.Usage
	for k, f := range map[string]struct {
		valid bool
		v     int64
	}{
		"prompt_tokens": {u.JSON.PromptTokens.Valid(), u.PromptTokens}, "completion_tokens": {u.JSON.CompletionTokens.Valid(), u.CompletionTokens},
		"total_tokens": {u.JSON.TotalTokens.Valid(), u.TotalTokens},
	} {
		require.True(t, f.valid && f.v >= 0, "%s: usage.%s is %s, want a non-negative integer", what, k, u.RawJSON())
	}
	require.Equal(t, u.PromptTokens+u.CompletionTokens, u.TotalTokens, "%s: usage.total_tokens", what)
}

// usageIs checks that usage is exactly these counts, no other field (as
// openai-node.mjs's eq compares the whole object).
func usageIs(t *testing.T, c *sdk.Completion, prompt, completion int, what string) {
	t.Helper()
	require.JSONEq(t, fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, completion, prompt+completion),
		c.JSON.Usage.Raw(), "%s: usage", what)
}

// logprobs is a CompletionChoice's logprobs as sent. openai-go's type
// decodes null as 0 (token_logprobs) or a nil map; decoded from the raw
// JSON here, a null is a nil pointer or a nil map, as the Node checks tell
// null from a number.
type logprobs struct {
	Tokens        []string              `json:"tokens"`
	TokenLogprobs []*float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]*float64 `json:"top_logprobs"`
	TextOffset    []int64               `json:"text_offset"`
}

// logprobsOf decodes ch's logprobs and checks that openai-go's decoding of
// them agrees.
func logprobsOf(t *testing.T, ch sdk.CompletionChoice, what string) logprobs {
	t.Helper()
	require.True(t, ch.JSON.Logprobs.Valid(), "%s: logprobs is %q, want an object", what, ch.JSON.Logprobs.Raw())
	var lp logprobs
	decodeRaw(t, ch.JSON.Logprobs.Raw(), &lp, what+": logprobs")
	require.Equal(t, lp.Tokens, ch.Logprobs.Tokens, "%s: openai-go's logprobs.tokens", what)
	require.Equal(t, lp.TextOffset, ch.Logprobs.TextOffset, "%s: openai-go's logprobs.text_offset", what)
	return lp
}

// checkLogprobs checks a CompletionChoice.Logprobs against the choice's text.
func checkLogprobs(t *testing.T, lp logprobs, text string, maxTop int, what string) {
	t.Helper()
	n := len(lp.Tokens)
	require.True(t, len(lp.TokenLogprobs) == n && len(lp.TopLogprobs) == n && len(lp.TextOffset) == n,
		"%s: logprobs' arrays are not all of %d", what, n)
	require.Equal(t, text, strings.Join(lp.Tokens, ""), "%s: logprobs.tokens joined", what)
	var offset int64
	if n > 0 {
		offset = lp.TextOffset[0]
	}
	for i := range n {
		require.True(t, lp.TokenLogprobs[i] != nil && *lp.TokenLogprobs[i] <= 0,
			"%s: token_logprobs[%d] = %v, want a number <= 0", what, i, lp.TokenLogprobs[i])
		top := lp.TopLogprobs[i]
		require.NotNil(t, top, "%s: top_logprobs[%d] is not an object", what, i)
		require.True(t, len(top) >= 1 && len(top) <= maxTop+1, "%s: top_logprobs[%d] has %d entries, want 1..%d", what, i, len(top), maxTop+1)
		for _, v := range top {
			require.True(t, v != nil && *v <= 0, "%s: top_logprobs[%d] has a value that is not a number <= 0", what, i)
		}
		require.Equal(t, offset, lp.TextOffset[i], "%s: text_offset[%d]", what, i)
		offset += int64(len([]rune(lp.Tokens[i])))
	}
}

// checkCompletion checks one Completion (a response, or a chunk of a
// stream). openai-go's types make id, created and the rest a string or an
// integer already; each field's metadata says whether it came as one.
func checkCompletion(t *testing.T, c *sdk.Completion, what string, chunk bool) {
	t.Helper()
	require.True(t, c.JSON.ID.Valid() && c.ID != "", "%s: id is %q", what, c.JSON.ID.Raw())
	require.Equal(t, `"text_completion"`, c.JSON.Object.Raw(), "%s: object", what)
	require.True(t, c.JSON.Created.Valid(), "%s: created is %q", what, c.JSON.Created.Raw())
	require.InDelta(t, now(), c.Created, 3600, "%s: created, want a Unix time in seconds near now", what)
	require.True(t, c.JSON.Model.Valid() && c.Model != "", "%s: model is %q", what, c.JSON.Model.Raw())
	require.True(t, strings.HasPrefix(c.JSON.Choices.Raw(), "["), "%s: choices is not an array", what)
	for _, ch := range c.Choices {
		require.True(t, ch.JSON.Index.Valid() && ch.Index >= 0, "%s: choice index is %q", what, ch.JSON.Index.Raw())
		require.True(t, ch.JSON.Text.Valid(), "%s: choice %d text is not a string", what, ch.Index)
		require.NotEmpty(t, ch.JSON.Logprobs.Raw(), "%s: choice %d has no logprobs field (want null or an object)", what, ch.Index)
		fr := ch.JSON.FinishReason.Raw()
		want := []string{`"stop"`, `"length"`}
		if chunk {
			want = append(want, "null")
		}
		require.Contains(t, want, fr, "%s: choice %d finish_reason", what, ch.Index)
	}
	if !chunk {
		checkUsage(t, c, what)
	}
}

// collect reads a stream to its end and checks every chunk.
func collect(t *testing.T, s *ssestream.Stream[sdk.Completion], what string) []sdk.Completion {
	t.Helper()
	defer s.Close()
	var chunks []sdk.Completion
	for s.Next() {
		c := s.Current()
		checkCompletion(t, &c, fmt.Sprintf("%s: chunk %d", what, len(chunks)), true)
		chunks = append(chunks, c)
	}
	require.NoError(t, s.Err(), what)
	require.NotEmpty(t, chunks, "%s: the stream had no chunks", what)
	for _, c := range chunks {
		require.Equal(t, chunks[0].ID, c.ID, "%s: the chunks do not share one id", what)
	}
	return chunks
}

type folded struct {
	text, finish string
	tokens       []string
}

// fold folds a stream's chunks into each choice's text and finish_reason,
// checking that each choice finishes exactly once, in its last chunk.
func fold(t *testing.T, chunks []sdk.Completion, what string) map[int64]*folded {
	t.Helper()
	out := map[int64]*folded{}
	for _, c := range chunks {
		for _, ch := range c.Choices {
			s := out[ch.Index]
			if s == nil {
				s = &folded{}
				out[ch.Index] = s
			}
			require.Empty(t, s.finish, "%s: choice %d has a chunk after its finish_reason", what, ch.Index)
			s.text += ch.Text
			s.finish = string(ch.FinishReason)
			if ch.JSON.Logprobs.Valid() {
				s.tokens = append(s.tokens, ch.Logprobs.Tokens...)
			}
		}
	}
	for i, s := range out {
		require.NotEmpty(t, s.finish, "%s: choice %d never got a finish_reason", what, i)
	}
	return out
}

func keys(m map[int64]*folded) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func indices(c *sdk.Completion) []int64 {
	var is []int64
	for _, ch := range c.Choices {
		is = append(is, ch.Index)
	}
	return is
}

func texts(c *sdk.Completion) []string {
	var ts []string
	for _, ch := range c.Choices {
		ts = append(ts, ch.Text)
	}
	return ts
}

// apiErr is what an error response must carry; param "" means null.
type apiErr struct {
	status         int
	typ, code, prm string
	message        *regexp.Regexp
}

// expectAPIError checks that err is openai-go's *openai.Error with want's
// fields. openai-go has one error type for every status where the Node SDK
// has a class per status (BadRequestError, NotFoundError,
// AuthenticationError), so the status stands for the class; its Error()
// is a summary that names the status but not the server's message (the
// Node SDK's message is "<status> <message>"), and the request id is the
// response's X-Request-ID header (the Node SDK's err.requestID).
func expectAPIError(t *testing.T, err error, want apiErr, what string) *sdk.Error {
	t.Helper()
	require.Error(t, err, "%s: no error was returned", what)
	var e *sdk.Error
	require.True(t, errors.As(err, &e), "%s: returned %T: %v, want an *openai.Error", what, err, err)
	require.Equal(t, want.status, e.StatusCode, "%s: status", what)
	require.Equal(t, want.typ, e.Type, "%s: type", what)
	require.Equal(t, want.code, e.Code, "%s: code", what)
	if want.prm == "" {
		require.Equal(t, "null", e.JSON.Param.Raw(), "%s: param", what)
	} else {
		require.Equal(t, want.prm, e.Param, "%s: param", what)
	}
	require.Regexp(t, want.message, e.Message, "%s: message", what)
	require.Contains(t, e.Error(), strconv.Itoa(want.status), "%s: the SDK's message", what)
	require.NotNil(t, e.Response, "%s: no response", what)
	require.NotEmpty(t, e.Response.Header.Get("X-Request-ID"), "%s: X-Request-ID", what)
	return e
}

// streamError starts a stream that the server must refuse and returns the
// stream's error.
func streamError(s *ssestream.Stream[sdk.Completion]) error {
	defer s.Close()
	for s.Next() {
	}
	return s.Err()
}

// ---- helpers over the server's own (vLLM) routes ------------------------------

func (s *server) promptTokens(t *testing.T, text string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"prompt": text})
	r, err := s.http.Post(s.base+"/tokenize", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	defer r.Body.Close()
	require.Equal(t, 200, r.StatusCode, "/tokenize")
	var out struct{ Count int }
	require.NoError(t, json.NewDecoder(r.Body).Decode(&out))
	return out.Count
}

func (s *server) get(t *testing.T, path string) (int, string) {
	t.Helper()
	r, err := s.http.Get(s.base + path)
	require.NoError(t, err)
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return r.StatusCode, string(b)
}

// metric sums the samples of name whose labels contain labels.
func (s *server) metric(t *testing.T, name, labels string) float64 {
	t.Helper()
	_, text := s.get(t, "/metrics")
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, labels) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			sum += v
		}
	}
	return sum
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	const d = 10 * time.Second
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not so after %v", what, d)
}

func (s *server) healthy(t *testing.T, what string) {
	t.Helper()
	code, body := s.get(t, "/health")
	require.Equal(t, 200, code, "%s: /health", what)
	require.JSONEq(t, `{"status":"ok"}`, body, "%s: /health", what)
}

// ---- the checks -----------------------------------------------------------------

const prompt = "Hello, my name is"

var helloIDs = []int64{15496, 11, 616, 1438, 318} // GPT-2's tokens of prompt

func str(s string) sdk.CompletionNewParamsPromptUnion {
	return sdk.CompletionNewParamsPromptUnion{OfString: sdk.String(s)}
}

func withExtra(p sdk.CompletionNewParams, extra map[string]any) sdk.CompletionNewParams {
	p.SetExtraFields(extra)
	return p
}

// TestOpenAIGo runs openai-node.mjs's checks, one subtest each under the
// same name, with openai-go. They share state as the script's do (the
// greedy 12-token text of the first completion check), so they run in order.
func TestOpenAIGo(t *testing.T) {
	s := startServer(t)
	client := s.client
	ctx := context.Background()
	model := s.model
	var greedy12 string // the greedy 12-token continuation of prompt

	// greedy is the request most checks vary: prompt, greedy, max tokens.
	greedy := func(max int64) sdk.CompletionNewParams {
		return sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt), MaxTokens: sdk.Int(max), Temperature: sdk.Float(0)}
	}
	create := func(t *testing.T, p sdk.CompletionNewParams, opts ...option.RequestOption) *sdk.Completion {
		t.Helper()
		c, err := client.Completions.New(ctx, p, opts...)
		require.NoError(t, err)
		return c
	}

	t.Run("models.list", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, page.Data, "models.list: data is empty")
		for _, m := range page.Data {
			require.NotEmpty(t, m.ID, "model id")
			require.Equal(t, `"model"`, m.JSON.Object.Raw(), "model %s: object", m.ID)
			require.True(t, m.JSON.Created.Valid(), "model %s: created is %q", m.ID, m.JSON.Created.Raw())
			require.InDelta(t, now(), m.Created, 86400, "model %s: created", m.ID)
			require.True(t, m.JSON.OwnedBy.Valid(), "model %s: owned_by is %q", m.ID, m.JSON.OwnedBy.Raw())
		}
		// The Node script's for await over the page is ListAutoPaging here;
		// it ends after one page.
		var seen, want []string
		iter := client.Models.ListAutoPaging(ctx)
		for iter.Next() {
			seen = append(seen, iter.Current().ID)
		}
		require.NoError(t, iter.Err())
		for _, m := range page.Data {
			want = append(want, m.ID)
		}
		require.Equal(t, want, seen, "models.list: auto-paging")
		require.Equal(t, model, page.Data[0].ID, "the served model first")
	})

	t.Run("models.retrieve", func(t *testing.T) {
		m, err := client.Models.Get(ctx, model)
		require.NoError(t, err)
		require.Equal(t, model, m.ID)
		require.Equal(t, `"model"`, m.JSON.Object.Raw())
		_, err = client.Models.Get(ctx, "no-such-model")
		expectAPIError(t, err, apiErr{404, "invalid_request_error", "model_not_found", "model",
			regexp.MustCompile("^The model `no-such-model` does not exist\\.$")}, "models.retrieve unknown")
	})

	t.Run("completions: string prompt, greedy, max_tokens", func(t *testing.T) {
		// The Node SDK's c._request_id is the X-Request-ID header; openai-go
		// has no such field, so the header is read from the response.
		var resp *http.Response
		c := create(t, greedy(12), option.WithResponseInto(&resp))
		checkCompletion(t, c, "completion", false)
		require.Equal(t, model, c.Model)
		require.Len(t, c.Choices, 1)
		require.Equal(t, int64(0), c.Choices[0].Index)
		require.Equal(t, "null", c.Choices[0].JSON.Logprobs.Raw(), "logprobs without asking")
		require.Equal(t, sdk.CompletionChoiceFinishReasonLength, c.Choices[0].FinishReason)
		usageIs(t, c, 5, 12, "completion")
		require.NotEmpty(t, resp.Header.Get("X-Request-ID"), "the response has no X-Request-ID")
		greedy12 = c.Choices[0].Text
		require.Equal(t, greedy12, create(t, greedy(12)).Choices[0].Text, "greedy text, second time")
		one := create(t, greedy(1))
		require.Equal(t, sdk.CompletionChoiceFinishReasonLength, one.Choices[0].FinishReason, "max_tokens 1")
		require.Equal(t, int64(1), one.Usage.CompletionTokens, "max_tokens 1")
		require.True(t, strings.HasPrefix(greedy12, one.Choices[0].Text), "max_tokens 1: not a prefix of the 12-token text")
	})

	t.Run("completions: max_tokens null fills the context (as vLLM)", func(t *testing.T) {
		// An omitted max_tokens is 16; an explicit null (param.Null) is
		// vLLM's "no limit": generation runs to the end of the context.
		page, err := client.Models.List(ctx)
		require.NoError(t, err)
		var ctxLen int64
		for _, m := range page.Data {
			if m.ID == model {
				decodeRaw(t, m.JSON.ExtraFields["max_model_len"].Raw(), &ctxLen, "models.list: max_model_len")
			}
		}
		require.Greater(t, ctxLen, int64(5), "models.list: max_model_len")
		p := greedy(0)
		p.MaxTokens = param.Null[int64]()
		c := create(t, withExtra(p, map[string]any{"ignore_eos": true}))
		checkCompletion(t, c, "completion", false)
		require.Equal(t, ctxLen-c.Usage.PromptTokens, c.Usage.CompletionTokens, "completion_tokens (the rest of the context)")
		require.Equal(t, sdk.CompletionChoiceFinishReasonLength, c.Choices[0].FinishReason)
		require.True(t, strings.HasPrefix(c.Choices[0].Text, greedy12), "not the greedy continuation")
	})

	t.Run("completions: list of prompts", func(t *testing.T) {
		prompts := []string{"Hello", "The quick brown fox", prompt}
		p := greedy(12)
		p.Prompt = sdk.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts}
		c := create(t, p)
		checkCompletion(t, c, "completion", false)
		require.Equal(t, []int64{0, 1, 2}, indices(c))
		require.Equal(t, greedy12, c.Choices[2].Text, "the third prompt's text (as alone)")
		want := 0
		for _, p := range prompts {
			want += s.promptTokens(t, p)
		}
		require.Equal(t, int64(want), c.Usage.PromptTokens)
		require.Equal(t, int64(36), c.Usage.CompletionTokens)
	})

	t.Run("completions: token-id prompts", func(t *testing.T) {
		p := greedy(12)
		p.Prompt = sdk.CompletionNewParamsPromptUnion{OfArrayOfTokens: helloIDs}
		c := create(t, p)
		checkCompletion(t, c, "completion", false)
		require.Equal(t, greedy12, c.Choices[0].Text, "text (as from the string prompt)")
		require.Equal(t, int64(5), c.Usage.PromptTokens)
		p.Prompt = sdk.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{helloIDs, {15496}}}
		l := create(t, p)
		checkCompletion(t, l, "list of token lists", false)
		require.Equal(t, []int64{0, 1}, indices(l))
		require.Equal(t, greedy12, l.Choices[0].Text)
		require.Equal(t, int64(6), l.Usage.PromptTokens)
	})

	t.Run("completions: n=2 with seed", func(t *testing.T) {
		p := sdk.CompletionNewParams{
			Model: sdk.CompletionNewParamsModel(model), Prompt: sdk.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"Once upon a time", "Hello"}},
			N: sdk.Int(2), Seed: sdk.Int(7), Temperature: sdk.Float(1), MaxTokens: sdk.Int(8),
		}
		a := create(t, p)
		checkCompletion(t, a, "completion", false)
		require.Equal(t, []int64{0, 1, 2, 3}, indices(a), "indices (prompt p, choice j at p*n+j)")
		require.NotEqual(t, a.Choices[0].Text, a.Choices[1].Text, "the two choices of a seeded n=2 request are the same")
		require.Equal(t, int64(s.promptTokens(t, "Once upon a time")+1), a.Usage.PromptTokens, "usage.prompt_tokens counts each prompt once")
		require.Equal(t, int64(4*8), a.Usage.CompletionTokens)
		require.Equal(t, texts(a), texts(create(t, p)), "the same seeded request again")
	})

	t.Run("completions: seed", func(t *testing.T) {
		p := sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt), Seed: sdk.Int(1234),
			Temperature: sdk.Float(1), TopP: sdk.Float(1), MaxTokens: sdk.Int(8)}
		a := create(t, p)
		require.Equal(t, a.Choices[0].Text, create(t, p).Choices[0].Text, "the same seed twice")
		p.Seed = sdk.Int(1235)
		require.NotEqual(t, a.Choices[0].Text, create(t, p).Choices[0].Text, "seeds 1234 and 1235 gave the same text")
	})

	t.Run("completions: logprobs", func(t *testing.T) {
		p := greedy(12)
		p.Logprobs = sdk.Int(3)
		c := create(t, p)
		checkCompletion(t, c, "completion", false)
		ch := c.Choices[0]
		require.Equal(t, greedy12, ch.Text)
		lp := logprobsOf(t, ch, "logprobs")
		checkLogprobs(t, lp, ch.Text, 3, "logprobs")
		require.Len(t, lp.Tokens, 12, "one logprobs entry per token")
		require.Equal(t, int64(0), lp.TextOffset[0], "text_offset[0]")
		p = greedy(4)
		p.Logprobs = sdk.Int(0)
		z := create(t, p)
		checkLogprobs(t, logprobsOf(t, z.Choices[0], "logprobs 0"), z.Choices[0].Text, 0, "logprobs 0")
	})

	t.Run("completions: echo", func(t *testing.T) {
		p := greedy(12)
		p.Echo = sdk.Bool(true)
		c := create(t, p)
		checkCompletion(t, c, "completion", false)
		require.Equal(t, prompt+greedy12, c.Choices[0].Text)
		p.Prompt = sdk.CompletionNewParamsPromptUnion{OfArrayOfTokens: helloIDs}
		require.Equal(t, prompt+greedy12, create(t, p).Choices[0].Text, "token-id prompt: text")
	})

	t.Run("completions: echo with logprobs scores the prompt (max_tokens 0 and 12)", func(t *testing.T) {
		p := greedy(0)
		p.Echo, p.Logprobs = sdk.Bool(true), sdk.Int(1)
		c := create(t, p)
		checkCompletion(t, c, "completion", false)
		ch := c.Choices[0]
		require.Equal(t, prompt, ch.Text, "max_tokens 0: the prompt alone")
		require.Equal(t, int64(0), c.Usage.CompletionTokens, "max_tokens 0: completion_tokens")
		require.Equal(t, sdk.CompletionChoiceFinishReasonLength, ch.FinishReason, "max_tokens 0: finish_reason")
		lp := logprobsOf(t, ch, "max_tokens 0")
		require.Len(t, lp.Tokens, len(helloIDs), "one entry per prompt token")
		require.Nil(t, lp.TokenLogprobs[0], "the first prompt token: token_logprobs null")
		require.Nil(t, lp.TopLogprobs[0], "the first prompt token: top_logprobs null")
		// The rest is a well-formed logprobs object over the prompt's tail.
		rest := logprobs{Tokens: lp.Tokens[1:], TokenLogprobs: lp.TokenLogprobs[1:], TopLogprobs: lp.TopLogprobs[1:], TextOffset: lp.TextOffset[1:]}
		checkLogprobs(t, rest, prompt[len(lp.Tokens[0]):], 1, "prompt logprobs")
		p = greedy(12)
		p.Prompt, p.Echo, p.Logprobs = sdk.CompletionNewParamsPromptUnion{OfArrayOfTokens: helloIDs}, sdk.Bool(true), sdk.Int(1)
		g := create(t, p)
		gl := logprobsOf(t, g.Choices[0], "max_tokens 12")
		require.Equal(t, prompt+greedy12, g.Choices[0].Text, "max_tokens 12: text")
		require.Len(t, gl.Tokens, len(helloIDs)+12, "max_tokens 12: prompt and completion entries")
		require.Equal(t, lp.TokenLogprobs, gl.TokenLogprobs[:len(helloIDs)], "the same prompt scores the same, as text or token ids")
	})

	t.Run("completions: vLLM's prompt_logprobs field", func(t *testing.T) {
		p := greedy(1)
		p.Prompt = sdk.CompletionNewParamsPromptUnion{OfArrayOfTokens: helloIDs}
		c := create(t, withExtra(p, map[string]any{"prompt_logprobs": 2}))
		checkCompletion(t, c, "completion", false)
		var plp []json.RawMessage
		decodeRaw(t, c.Choices[0].JSON.ExtraFields["prompt_logprobs"].Raw(), &plp, "prompt_logprobs")
		require.Len(t, plp, len(helloIDs), "prompt_logprobs: want one entry per prompt token")
		require.Equal(t, "null", string(plp[0]), "the first prompt token has none")
		for i := 1; i < len(plp); i++ {
			// The first key of the object, in the order sent.
			dec := json.NewDecoder(strings.NewReader(string(plp[i])))
			_, err := dec.Token() // {
			require.NoError(t, err)
			key, err := dec.Token()
			require.NoError(t, err)
			require.Equal(t, strconv.FormatInt(helloIDs[i], 10), key, "position %d: the prompt token comes first", i)
			var first struct {
				Logprob      *float64 `json:"logprob"`
				Rank         *float64 `json:"rank"`
				DecodedToken *string  `json:"decoded_token"`
			}
			require.NoError(t, dec.Decode(&first))
			require.True(t, first.Rank != nil && *first.Rank >= 1 && *first.Rank == float64(int64(*first.Rank)) &&
				first.Logprob != nil && *first.Logprob <= 0 && first.DecodedToken != nil,
				"position %d: %s is not a {logprob, rank, decoded_token}", i, plp[i])
		}
	})

	t.Run("completions: penalties steer greedy decoding", func(t *testing.T) {
		p := greedy(24)
		p.Logprobs = sdk.Int(0)
		plain := create(t, p)
		p.FrequencyPenalty, p.PresencePenalty = sdk.Float(2), sdk.Float(2)
		pen := create(t, p)
		checkCompletion(t, pen, "completion", false)
		most := func(toks []string) int {
			m := map[string]int{}
			best := 0
			for _, tok := range toks {
				m[tok]++
				best = max(best, m[tok])
			}
			return best
		}
		require.NotEqual(t, plain.Choices[0].Text, pen.Choices[0].Text, "frequency_penalty 2 and presence_penalty 2 changed nothing")
		require.LessOrEqual(t, most(pen.Choices[0].Logprobs.Tokens), most(plain.Choices[0].Logprobs.Tokens),
			"the penalized completion repeats its most frequent token more often than the plain one")
	})

	t.Run("completions: logit_bias", func(t *testing.T) {
		p := greedy(4)
		p.LogitBias = map[string]int64{"15496": 100}
		c := create(t, p)
		checkCompletion(t, c, "completion", false)
		require.Equal(t, "HelloHelloHelloHello", c.Choices[0].Text, `a +100 bias on "Hello" (15496)`)
	})

	// greedyStop returns the greedy 24-token text of prompt and a stop string
	// from its middle: a token of plain letters.
	letters := regexp.MustCompile(`^ ?[A-Za-z]{2,}$`)
	greedyStop := func(t *testing.T) (text, stop string) {
		t.Helper()
		p := greedy(24)
		p.Logprobs = sdk.Int(0)
		full := create(t, p)
		toks := full.Choices[0].Logprobs.Tokens
		for i, tok := range toks {
			if i >= 2 && letters.MatchString(tok) {
				return full.Choices[0].Text, strings.TrimSpace(tok)
			}
		}
		t.Fatalf("no token of plain letters in %q to stop on", toks)
		return "", ""
	}
	stopReason := func(t *testing.T, ch sdk.CompletionChoice) string {
		t.Helper()
		var r string
		decodeRaw(t, ch.JSON.ExtraFields["stop_reason"].Raw(), &r, "stop_reason")
		return r
	}

	t.Run("completions: stop", func(t *testing.T) {
		text, stop := greedyStop(t)
		want := text[:strings.Index(text, stop)]
		for _, st := range []struct {
			what string
			stop sdk.CompletionNewParamsStopUnion
		}{
			{fmt.Sprintf("stop %q", stop), sdk.CompletionNewParamsStopUnion{OfString: sdk.String(stop)}},
			{fmt.Sprintf("stop [%q]", stop), sdk.CompletionNewParamsStopUnion{OfStringArray: []string{stop}}},
			{fmt.Sprintf(`stop ["\u0000never", %q]`, stop), sdk.CompletionNewParamsStopUnion{OfStringArray: []string{"\x00never", stop}}},
		} {
			what := st.what
			p := greedy(24)
			p.Stop = st.stop
			c := create(t, p)
			checkCompletion(t, c, what, false)
			require.Equal(t, want, c.Choices[0].Text, "%s: text", what)
			require.Equal(t, sdk.CompletionChoiceFinishReasonStop, c.Choices[0].FinishReason, "%s: finish_reason", what)
			require.Equal(t, stop, stopReason(t, c.Choices[0]), "%s: stop_reason (vLLM's)", what)
		}
	})

	t.Run("completions: vLLM's min_p, include_stop_str_in_output, continuous_usage_stats", func(t *testing.T) {
		// Extra fields openai-go's types do not know go in with
		// SetExtraFields, on the params and on stream_options.
		text, stop := greedyStop(t)
		p := greedy(24)
		p.Stop = sdk.CompletionNewParamsStopUnion{OfString: sdk.String(stop)}
		c := create(t, withExtra(p, map[string]any{"include_stop_str_in_output": true, "min_p": 0.05}))
		checkCompletion(t, c, "include_stop_str_in_output", false)
		require.Equal(t, text[:strings.Index(text, stop)+len(stop)], c.Choices[0].Text, "the text ends with the stop string")
		require.Equal(t, stop, stopReason(t, c.Choices[0]), "stop_reason")
		p = greedy(4)
		p.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
		p.StreamOptions.SetExtraFields(map[string]any{"continuous_usage_stats": true})
		chunks := collect(t, client.Completions.NewStreaming(ctx, p), "continuous usage")
		// Usage so far on every chunk; merged chunks skip counts, so the
		// counts only grow and end at 4.
		var counts []int64
		for _, ch := range chunks[:len(chunks)-1] {
			require.True(t, ch.JSON.Usage.Valid(), "a chunk without usage")
			counts = append(counts, ch.Usage.CompletionTokens)
		}
		okCounts := len(counts) >= 1 && counts[len(counts)-1] == 4
		for i, n := range counts {
			okCounts = okCounts && n >= 1 && n <= 4 && (i == 0 || n > counts[i-1])
		}
		require.True(t, okCounts, "usage so far on every chunk: %v, want increasing counts ending at 4", counts)
		usageIs(t, &chunks[len(chunks)-1], 5, 4, "the final usage")
	})

	t.Run("completions: vLLM's allowed_token_ids, return_tokens_as_token_ids", func(t *testing.T) {
		// Sampled at temperature 1 from GPT-2's tokens for "," (11) and "."
		// (13) alone: every generated token is one of them, and the
		// logprobs name each token by id.
		p := sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt), MaxTokens: sdk.Int(8),
			Seed: sdk.Int(7), Logprobs: sdk.Int(1)}
		c := create(t, withExtra(p, map[string]any{"allowed_token_ids": []int{11, 13}, "return_tokens_as_token_ids": true, "return_token_ids": true}))
		checkCompletion(t, c, "allowed_token_ids", false)
		var ids []int
		decodeRaw(t, c.Choices[0].JSON.ExtraFields["token_ids"].Raw(), &ids, "token_ids")
		require.Len(t, ids, 8, "token_ids %v", ids)
		var want []string
		for _, id := range ids {
			require.Contains(t, []int{11, 13}, id, "token_ids %v", ids)
			want = append(want, fmt.Sprintf("token_id:%d", id))
		}
		require.Equal(t, want, c.Choices[0].Logprobs.Tokens, "logprobs tokens as ids")
		require.Regexp(t, `^[,.]{8}$`, c.Choices[0].Text)
	})

	t.Run("completions: stream", func(t *testing.T) {
		chunks := collect(t, client.Completions.NewStreaming(ctx, greedy(12)), "stream")
		f := fold(t, chunks, "stream")
		require.Equal(t, []int64{0}, keys(f), "choice indices")
		require.Equal(t, greedy12, f[0].text, "streamed text")
		require.Equal(t, "length", f[0].finish, "finish_reason")
		for _, c := range chunks {
			require.Len(t, c.Choices, 1, "a chunk without exactly one choice")
			require.False(t, c.JSON.Usage.Valid(), "a chunk carries usage without include_usage")
		}
		// A chunk per token at most: tokens that are ready together while the
		// client reads go out merged in one chunk (docs/server.md), so a slow
		// reader sees fewer.
		require.True(t, len(chunks) >= 1 && len(chunks) <= 12, "chunks: %d, want 1 to 12 (at most one per token)", len(chunks))
	})

	t.Run("completions: stream with include_usage", func(t *testing.T) {
		// include_obfuscation is in the SDK's type of stream_options; false is what tinyserve does.
		p := greedy(12)
		p.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true), IncludeObfuscation: sdk.Bool(false)}
		chunks := collect(t, client.Completions.NewStreaming(ctx, p), "stream")
		last := chunks[len(chunks)-1]
		require.JSONEq(t, `[]`, last.JSON.Choices.Raw(), "the usage chunk's choices")
		checkUsage(t, &last, "the usage chunk")
		usageIs(t, &last, 5, 12, "usage")
		for _, c := range chunks[:len(chunks)-1] {
			require.False(t, c.JSON.Usage.Valid(), "usage on a chunk before the last")
		}
		require.Equal(t, greedy12, fold(t, chunks[:len(chunks)-1], "stream")[0].text, "streamed text")
	})

	t.Run("completions: stream n=2, list of prompts, logprobs, echo", func(t *testing.T) {
		p := sdk.CompletionNewParams{
			Model: sdk.CompletionNewParamsModel(model), Prompt: sdk.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{prompt, "Once upon a time"}},
			N: sdk.Int(2), Seed: sdk.Int(3), Temperature: sdk.Float(1), MaxTokens: sdk.Int(10),
		}
		sp := p
		sp.Logprobs = sdk.Int(2)
		sp.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
		chunks := collect(t, client.Completions.NewStreaming(ctx, sp), "stream")
		f := fold(t, chunks[:len(chunks)-1], "stream")
		require.Equal(t, []int64{0, 1, 2, 3}, keys(f), "choice indices")
		ns := create(t, p)
		for _, ch := range ns.Choices {
			require.Equal(t, ch.Text, f[ch.Index].text, "choice %d: streamed text (as not streamed)", ch.Index)
			require.Equal(t, ch.Text, strings.Join(f[ch.Index].tokens, ""), "choice %d: streamed logprobs tokens", ch.Index)
		}
		require.JSONEq(t, ns.JSON.Usage.Raw(), chunks[len(chunks)-1].JSON.Usage.Raw(), "usage (as not streamed)")
		ep := greedy(12)
		ep.Echo = sdk.Bool(true)
		ec := collect(t, client.Completions.NewStreaming(ctx, ep), "echo stream")
		require.True(t, strings.HasPrefix(ec[0].Choices[0].Text, prompt), "echo: the first chunk does not start with the prompt")
		require.Equal(t, prompt+greedy12, fold(t, ec, "echo stream")[0].text, "echo: streamed text")
	})

	t.Run("completions: stream with stop", func(t *testing.T) {
		text, stop := greedyStop(t)
		p := greedy(24)
		p.Stop = sdk.CompletionNewParamsStopUnion{OfString: sdk.String(stop)}
		f := fold(t, collect(t, client.Completions.NewStreaming(ctx, p), "stream"), "stream")[0]
		require.Equal(t, []string{text[:strings.Index(text, stop)], "stop"}, []string{f.text, f.finish}, "streamed text and finish_reason")
	})

	ctxMessage := regexp.MustCompile(`^This model's maximum context length is \d+ tokens\. However, you requested \d+ tokens \(5 in the prompt, 5000 in the completion\)\.`)

	t.Run("errors: max_tokens over the context", func(t *testing.T) {
		want := apiErr{400, "invalid_request_error", "context_length_exceeded", "prompt", ctxMessage}
		p := sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt), MaxTokens: sdk.Int(5000)}
		_, err := client.Completions.New(ctx, p)
		expectAPIError(t, err, want, "non-streaming")
		expectAPIError(t, streamError(client.Completions.NewStreaming(ctx, p)), want, "streaming")
	})

	t.Run("errors: unknown model", func(t *testing.T) {
		// OpenAI's type and code for an unknown model.
		want := apiErr{404, "invalid_request_error", "model_not_found", "model", regexp.MustCompile("^The model `gpt-4o` does not exist\\.$")}
		p := sdk.CompletionNewParams{Model: "gpt-4o", Prompt: str(prompt)}
		_, err := client.Completions.New(ctx, p)
		expectAPIError(t, err, want, "non-streaming")
		expectAPIError(t, streamError(client.Completions.NewStreaming(ctx, p)), want, "streaming")
	})

	t.Run("errors: wrong API key", func(t *testing.T) {
		bad := sdk.NewClient(option.WithBaseURL(s.base+"/v1/"), option.WithAPIKey("not-the-key"),
			option.WithHTTPClient(s.http), option.WithMaxRetries(0))
		want := apiErr{401, "invalid_request_error", "invalid_api_key", "", regexp.MustCompile(`API key`)}
		_, err := bad.Completions.New(ctx, sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt)})
		expectAPIError(t, err, want, "completions")
		_, err = bad.Models.List(ctx)
		expectAPIError(t, err, want, "models.list")
	})

	t.Run("prefix cache: a repeated prompt reports cached_tokens", func(t *testing.T) {
		long := strings.Repeat("The quick brown fox jumps over the lazy dog.", 8)
		n := s.promptTokens(t, long)
		p := greedy(4)
		p.Prompt = str(long)
		first := create(t, p)
		again := create(t, p)
		checkUsage(t, again, "again")
		require.Equal(t, first.Choices[0].Text, again.Choices[0].Text, "the cache changes no token")
		require.Equal(t, int64(n), again.Usage.PromptTokens)
		// Whole blocks of 16, never the last prompt token.
		require.True(t, again.Usage.PromptTokensDetails.JSON.CachedTokens.Valid(), "prompt_tokens_details.cached_tokens is missing")
		require.Equal(t, int64((n-1)/16*16), again.Usage.PromptTokensDetails.CachedTokens, "prompt_tokens_details.cached_tokens")
	})

	t.Run("errors: negative temperature", func(t *testing.T) {
		_, err := client.Completions.New(ctx, sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt), Temperature: sdk.Float(-0.5)})
		expectAPIError(t, err, apiErr{400, "invalid_request_error", "invalid_value", "temperature", regexp.MustCompile(`temperature`)}, "temperature -0.5")
	})

	t.Run("errors: unsupported parameter, penalty out of range", func(t *testing.T) {
		base := sdk.CompletionNewParams{Model: sdk.CompletionNewParamsModel(model), Prompt: str(prompt)}
		p := base
		p.Suffix = sdk.String(" and so on")
		_, err := client.Completions.New(ctx, p)
		expectAPIError(t, err, apiErr{400, "invalid_request_error", "unsupported_parameter", "suffix", regexp.MustCompile(`suffix`)}, "suffix")
		p = base
		p.PresencePenalty = sdk.Float(2.5)
		_, err = client.Completions.New(ctx, p)
		expectAPIError(t, err, apiErr{400, "invalid_request_error", "invalid_value", "presence_penalty", regexp.MustCompile(`\[-2, 2\]`)}, "presence_penalty 2.5")
		p = base
		p.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeObfuscation: sdk.Bool(true)}
		expectAPIError(t, streamError(client.Completions.NewStreaming(ctx, p)),
			apiErr{400, "invalid_request_error", "unsupported_parameter", "stream_options.include_obfuscation", regexp.MustCompile(`include_obfuscation`)},
			"stream_options.include_obfuscation true")
	})

	abortCount := func(t *testing.T) float64 {
		return s.metric(t, "vllm:request_success_total", `finished_reason="abort"`)
	}
	// afterAbort checks that the server counted one more abort, has nothing
	// running, waiting or in the KV cache, is healthy, and still answers.
	afterAbort := func(t *testing.T, before float64) {
		t.Helper()
		waitFor(t, func() bool { return abortCount(t) == before+1 }, `vllm:request_success_total{finished_reason="abort"} went up by 1`)
		waitFor(t, func() bool { return s.metric(t, "vllm:num_requests_running", "") == 0 }, "vllm:num_requests_running is 0")
		require.Zero(t, s.metric(t, "vllm:num_requests_waiting", ""), "vllm:num_requests_waiting")
		require.Zero(t, s.metric(t, "vllm:kv_cache_usage_perc", ""), "vllm:kv_cache_usage_perc")
		s.healthy(t, "after the abort")
		require.Equal(t, greedy12, create(t, greedy(12)).Choices[0].Text, "a completion after the abort")
	}
	// long is a request that runs long enough to be aborted: 1000 tokens
	// (ignore_eos is vLLM's).
	long := func() sdk.CompletionNewParams { return withExtra(greedy(1000), map[string]any{"ignore_eos": true}) }

	// abortMidStream starts a long stream, stops it after two chunks (by
	// cancelling its context, openai-go's AbortController, or by leaving the
	// loop and closing the stream, its break out of for await), and checks
	// that it ends early without an error other than the cancellation, and
	// that the server is left clean.
	abortMidStream := func(t *testing.T, cancelCtx bool) {
		before := abortCount(t)
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		st := client.Completions.NewStreaming(actx, long())
		n, finished := 0, false
		for st.Next() {
			c := st.Current()
			checkCompletion(t, &c, fmt.Sprintf("chunk %d", n), true)
			for _, ch := range c.Choices {
				finished = finished || ch.FinishReason != ""
			}
			if n++; n == 2 {
				if !cancelCtx {
					break
				}
				cancel()
			}
		}
		err := st.Err()
		_ = st.Close()
		require.True(t, err == nil || errors.Is(err, context.Canceled), "the aborted stream ended with %T: %v, want nothing or context.Canceled", err, err)
		// After the cancellation the SDK may still yield chunks it had read.
		require.True(t, n >= 2 && !finished, "the stream ran to its end (%d chunks) despite the abort", n)
		afterAbort(t, before)
	}

	t.Run("abort: AbortController mid-stream", func(t *testing.T) {
		abortMidStream(t, true)
	})

	t.Run("abort: break out of for await", func(t *testing.T) {
		abortMidStream(t, false)
	})

	t.Run("abort: AbortController during a non-streamed request", func(t *testing.T) {
		before := abortCount(t)
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := client.Completions.New(actx, long())
			done <- err
		}()
		waitFor(t, func() bool { return s.metric(t, "vllm:num_requests_running", "") == 1 }, "the request is running")
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		afterAbort(t, before)
	})
}
