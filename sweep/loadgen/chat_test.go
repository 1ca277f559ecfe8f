package loadgen

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAPIForURL(t *testing.T) {
	for u, want := range map[string]API{
		"http://h:8000/v1/completions":                    APICompletions,
		"http://h:8000/v1/chat/completions":               APIChat,
		"https://u:p@h/openai/v1/chat/completions?x=/v1":  APIChat,
		"http://h/chat/completions":                       APIChat,
		"http://h/v1/chat/completions/":                   APICompletions, // the path must end in /chat/completions
		"http://h/v1/chat":                                APICompletions,
		"http://h/v1/completions?route=/chat/completions": APICompletions, // the query is not the path
		"http://[bad":                                     APICompletions,
	} {
		assert.Equal(t, want, APIForURL(u), u)
	}
}

// bodyFor builds the request body the client sends for row with opts.
func bodyFor(t *testing.T, opts LoadOptions, row Row) string {
	t.Helper()
	require.NoError(t, opts.Validate())
	extra, err := ExtraBodyFragment(opts.ExtraBody, opts.API())
	require.NoError(t, err)
	s := &sender{opts: opts, api: opts.API(), extra: extra}
	b, err := s.body(&row)
	require.NoError(t, err)
	return string(b)
}

// TestRequestBodies pins the exact bodies of both APIs: chat sends the
// prompt as one user message and the output length as
// max_completion_tokens; completions is as before.
func TestRequestBodies(t *testing.T) {
	seven := 7
	row := Row{ID: "r", Prompt: `Say "hi" <b>`, TargetOutputTokens: &seven}
	chat := LoadOptions{URL: "http://h/v1/chat/completions", Model: "m", Concurrency: 1, Temperature: 0.5, Stream: true,
		IgnoreEOS: true, ExtraBody: json.RawMessage(`{"top_k":5,"chat_template_kwargs":{"enable_thinking":false}}`)}
	assert.Equal(t, `{"model":"m","messages":[{"role":"user","content":"Say \"hi\" <b>"}],"max_completion_tokens":7,"temperature":0.5,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"chat_template_kwargs":{"enable_thinking":false},"top_k":5}`,
		bodyFor(t, chat, row))

	chat.Stream, chat.IgnoreEOS, chat.ExtraBody, chat.Temperature = false, false, nil, 0
	assert.Equal(t, `{"model":"m","messages":[{"role":"user","content":"p"}],"max_completion_tokens":128,"temperature":0,"stream":false}`,
		bodyFor(t, chat, Row{Prompt: "p"}))

	comp := LoadOptions{URL: "http://h/v1/completions", Model: "m", Concurrency: 1, Stream: true, IgnoreEOS: true, ExtraBody: json.RawMessage(`{"top_k":5}`)}
	assert.Equal(t, `{"model":"m","prompt":"Say \"hi\" <b>","max_tokens":7,"temperature":0,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"top_k":5}`,
		bodyFor(t, comp, row))
}

// TestDecodeChatAnswer: a non-streamed chat completion's text is its
// message's reasoning and content.
func TestDecodeChatAnswer(t *testing.T) {
	a, err := decodeAnswer([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"think ","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":3}}`), APIChat)
	require.NoError(t, err)
	assert.Equal(t, "think Hi", a.text)
	assert.Equal(t, "stop", *a.finish)
	assert.Equal(t, 1, a.choices)
	assert.Equal(t, 3, *a.usage.CompletionTokens)

	a, err = decodeAnswer([]byte(`{"choices":[{"message":{"role":"assistant","content":null,"reasoning":"only"},"finish_reason":null}]}`), APIChat)
	require.NoError(t, err)
	assert.Equal(t, "only", a.text)
	assert.Nil(t, a.finish)

	// A completions body read as chat has no message: no text.
	a, err = decodeAnswer([]byte(`{"choices":[{"text":"x"}]}`), APIChat)
	require.NoError(t, err)
	assert.Equal(t, "", a.text)
	a, err = decodeAnswer([]byte(`{"choices":[{"text":"x"}]}`), APICompletions)
	require.NoError(t, err)
	assert.Equal(t, "x", a.text)

	_, err = decodeAnswer([]byte(`{"choices":[{"message":{"content":5}}]}`), APIChat)
	assert.Error(t, err)
}
