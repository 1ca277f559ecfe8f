package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/chat/reasoning"
	"github.com/tinyserve/tinyserve/llm/chat/toolcall"
)

// lineTemplate is a chat template written in Go for the handler's tests:
// "<role>content\n" per message, "<assistant>" when asked, and the vars it
// saw. It raises for a message whose content is "raise".
type lineTemplate struct{ vars map[string]any }

func (t *lineTemplate) Render(messages, tools json.RawMessage, vars map[string]any) (string, error) {
	t.vars = vars
	var msgs []struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(messages, &msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	if tools != nil {
		fmt.Fprintf(&b, "<tools>%s\n", tools)
	}
	for _, m := range msgs {
		c := ""
		if m.Content != nil {
			c = *m.Content
		}
		if c == "raise" {
			return "", errors.New("Conversation roles must alternate")
		}
		fmt.Fprintf(&b, "<%s>%s\n", m.Role, c)
	}
	if vars["add_generation_prompt"] == true {
		b.WriteString("<assistant>")
	}
	return b.String(), nil
}

// scriptedText makes the fake engine answer every request with the given
// pieces of text, one event each (one token id per piece).
func scriptedText(pieces ...string) func(llm.Request) []llm.Event {
	return func(req llm.Request) []llm.Event {
		var evs []llm.Event
		for i, p := range pieces {
			ev := llm.Event{TokenIDs: []int{'x'}, Text: p, StopTokenID: -1, PromptTokens: len(req.PromptTokens), CompletionTokens: i + 1}
			if req.Params.Logprobs != nil {
				ev.Logprobs = []llm.TokenLogprob{{ID: 'x', Logprob: -0.5, Top: []llm.TopLogprob{{ID: 'y', Logprob: -1}}}}
			}
			if i == len(pieces)-1 {
				ev.Finish = llm.FinishStop
			}
			evs = append(evs, ev)
		}
		return evs
	}
}

func chatHandler(t *testing.T, f *fakeEngine, opts ...Option) (*lineTemplate, *httptest.Server) {
	t.Helper()
	tmpl := &lineTemplate{}
	opts = append([]Option{WithChatTemplate(tmpl, map[string]any{"eos_token": "<eos>"})}, opts...)
	srv := httptest.NewServer(NewHandler(f, opts...))
	t.Cleanup(srv.Close)
	return tmpl, srv
}

func postChat(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestChatCompletion: the conversation is rendered by the template (with
// add_generation_prompt and the special tokens), tokenized without added
// special tokens, and answered as a chat.completion.
func TestChatCompletion(t *testing.T) {
	f := newFake()
	f.info.MaxModelLen = 256
	f.script = scriptedText("Hel", "lo!")
	tmpl, srv := chatHandler(t, f)
	status, body := postChat(t, srv.URL, `{"model":"fake","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]}],"chat_template_kwargs":{"enable_thinking":false}}`)
	require.Equal(t, 200, status, body)
	var resp struct {
		ID, Object string
		Choices    []struct {
			Message struct {
				Role             string
				Content          *string
				ReasoningContent *string `json:"reasoning_content"`
				ToolCalls        []any   `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage usage
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	assert.True(t, strings.HasPrefix(resp.ID, "chatcmpl-"), resp.ID)
	assert.Equal(t, "chat.completion", resp.Object)
	require.Len(t, resp.Choices, 1)
	m := resp.Choices[0].Message
	assert.Equal(t, "assistant", m.Role)
	assert.Equal(t, "Hello!", *m.Content)
	assert.Nil(t, m.ReasoningContent)
	assert.Empty(t, m.ToolCalls)
	assert.Equal(t, "stop", resp.Choices[0].FinishReason)
	prompt := "<system>Be brief.\n<user>Hi\nthere\n<assistant>" // text parts joined with newlines, as vLLM
	assert.Equal(t, len(prompt), resp.Usage.PromptTokens)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, prompt, byteTok{}.Decode(reqs[0].PromptTokens, false))
	assert.Equal(t, math64(reqs[0].Params.MaxTokens), math64(256-len(prompt)), "max_tokens left out fills the context, as vLLM's chat")
	assert.Equal(t, "<eos>", tmpl.vars["eos_token"])
	assert.Equal(t, false, tmpl.vars["enable_thinking"])
	assert.Equal(t, true, tmpl.vars["add_generation_prompt"])
}

func math64(n int) int64 { return int64(n) }

// TestChatStream: the role first, then content deltas, the finish reason,
// usage when asked, [DONE].
func TestChatStream(t *testing.T) {
	f := newFake()
	f.script = scriptedText("Hel", "lo", "!")
	_, srv := chatHandler(t, f)
	status, body := postChat(t, srv.URL, `{"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":3,"logprobs":true,"top_logprobs":1}`)
	require.Equal(t, 200, status, body)
	events := sseEvents(t, body)
	require.Equal(t, "[DONE]", events[len(events)-1])
	var chunks []map[string]any
	for _, e := range events[:len(events)-1] {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(e), &m), e)
		assert.Equal(t, "chat.completion.chunk", m["object"])
		chunks = append(chunks, m)
	}
	first := chunks[0]["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"role": "assistant", "content": ""}, first["delta"])
	assert.Nil(t, chunks[0]["usage"], "usage is null until the last chunk")
	text, finish, lps := "", "", 0
	for _, c := range chunks[1 : len(chunks)-1] {
		ch := c["choices"].([]any)[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		if s, ok := d["content"].(string); ok {
			text += s
		}
		if fr, ok := ch["finish_reason"].(string); ok {
			finish = fr
		}
		if lp, ok := ch["logprobs"].(map[string]any); ok {
			for _, e := range lp["content"].([]any) {
				lps++
				assert.Len(t, e.(map[string]any)["top_logprobs"], 1)
			}
		}
	}
	assert.Equal(t, "Hello!", text)
	assert.Equal(t, "stop", finish)
	assert.Equal(t, 3, lps)
	last := chunks[len(chunks)-1]
	assert.Empty(t, last["choices"])
	assert.EqualValues(t, 3, last["usage"].(map[string]any)["completion_tokens"])
}

// TestChatToolsAndReasoning: with vLLM's qwen3 reasoning parser and hermes
// tool-call parser, the model's text splits into reasoning_content,
// content and tool_calls, whole and streamed, however the text is cut.
func TestChatToolsAndReasoning(t *testing.T) {
	out := "<think>\nNeed the weather.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	hermes, err := toolcall.New("hermes")
	require.NoError(t, err)
	qwen3, err := reasoning.New("qwen3")
	require.NoError(t, err)
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	for _, cut := range []int{1, 3, 7, 11, 40} {
		var pieces []string
		for s := out; s != ""; {
			n := min(cut, len(s))
			pieces, s = append(pieces, s[:n]), s[n:]
		}
		f := newFake()
		f.info.MaxModelLen = 1024
		f.script = scriptedText(pieces...)
		tmpl, srv := chatHandler(t, f, WithToolCallParser(hermes, true), WithReasoningParser(qwen3))
		status, body := postChat(t, srv.URL, `{"messages":[{"role":"user","content":"Weather?"}],"tools":`+tools+`}`)
		require.Equal(t, 200, status, body)
		assert.NotNil(t, tmpl.vars)
		var resp struct {
			Choices []struct {
				Message struct {
					Content          string
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						ID, Type string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		require.NoError(t, json.Unmarshal([]byte(body), &resp))
		m := resp.Choices[0].Message
		assert.Equal(t, "\nNeed the weather.\n", m.ReasoningContent)
		assert.Equal(t, "\n\nChecking.", m.Content)
		require.Len(t, m.ToolCalls, 1)
		assert.Equal(t, "get_weather", m.ToolCalls[0].Function.Name)
		assert.Equal(t, `{"city": "Paris"}`, m.ToolCalls[0].Function.Arguments)
		assert.True(t, strings.HasPrefix(m.ToolCalls[0].ID, "chatcmpl-tool-"))
		assert.Equal(t, "tool_calls", resp.Choices[0].FinishReason)

		status, body = postChat(t, srv.URL, `{"messages":[{"role":"user","content":"Weather?"}],"tools":`+tools+`,"stream":true}`)
		require.Equal(t, 200, status, body)
		var reasoningText, content, finish string
		var calls []map[string]any // the stream's call entries
		callName, callArgs := "", ""
		for _, e := range sseEvents(t, body) {
			if e == "[DONE]" {
				continue
			}
			var ch struct {
				Choices []struct {
					Delta struct {
						Content          string
						ReasoningContent string           `json:"reasoning_content"`
						ToolCalls        []map[string]any `json:"tool_calls"`
					}
					FinishReason *string `json:"finish_reason"`
				}
			}
			require.NoError(t, json.Unmarshal([]byte(e), &ch))
			d := ch.Choices[0].Delta
			reasoningText += d.ReasoningContent
			content += d.Content
			calls = append(calls, d.ToolCalls...)
			for _, tc := range d.ToolCalls {
				assert.EqualValues(t, 0, tc["index"])
				fn := tc["function"].(map[string]any)
				if name, ok := fn["name"].(string); ok {
					assert.Empty(t, callName, "a second call")
					assert.True(t, strings.HasPrefix(tc["id"].(string), "chatcmpl-tool-"))
					callName = name
				} else {
					assert.NotEmpty(t, callName, "arguments before the call's name")
				}
				args, _ := fn["arguments"].(string)
				callArgs += args
			}
			if fr := ch.Choices[0].FinishReason; fr != nil {
				finish = *fr
			}
		}
		assert.Equal(t, m.ReasoningContent, reasoningText, "cut %d", cut)
		assert.Equal(t, m.Content, content, "cut %d", cut)
		assert.Equal(t, "get_weather", callName, "cut %d", cut)
		assert.Equal(t, `{"city": "Paris"}`, callArgs, "cut %d", cut)
		if cut == 1 {
			assert.Greater(t, len(calls), 2, "byte by byte, the arguments stream in pieces")
		}
		assert.Equal(t, "tool_calls", finish)
	}
}

// TestChatContinueFinalMessage: the final message's content is continued:
// the rendered text ends where its content ends, as transformers cuts it.
func TestChatContinueFinalMessage(t *testing.T) {
	f := newFake()
	_, srv := chatHandler(t, f)
	status, body := postChat(t, srv.URL, `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Well, "}],"continue_final_message":true,"add_generation_prompt":false,"max_tokens":2}`)
	require.Equal(t, 200, status, body)
	assert.Equal(t, "<user>Hi\n<assistant>Well, ", byteTok{}.Decode(f.requests()[0].PromptTokens, false))
}

// TestChatRefusals: what the endpoint refuses, each a 400 in the OpenAI
// shape that names the cause.
func TestChatRefusals(t *testing.T) {
	hermes, _ := toolcall.New("hermes")
	tools := `[{"type":"function","function":{"name":"f"}}]`
	cases := []struct {
		name, body, param, has string
		opts                   []Option
	}{
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages", `messages[0].content[0]: content part type "image_url" is not supported`, nil},
		{"no messages", `{"messages":[]}`, "messages", "must not be empty", nil},
		{"no role", `{"messages":[{"content":"x"}]}`, "messages", "messages[0].role is required", nil},
		{"template raises", `{"messages":[{"role":"user","content":"raise"}]}`, "messages", "Conversation roles must alternate", nil},
		{"auto without the flags", `{"messages":[{"role":"user","content":"x"}],"tools":` + tools + `}`, "tool_choice", "--enable-auto-tool-choice", nil},
		{"auto without enabling", `{"messages":[{"role":"user","content":"x"}],"tools":` + tools + `}`, "tool_choice", "--enable-auto-tool-choice", []Option{WithToolCallParser(hermes, false)}},
		{"required", `{"messages":[{"role":"user","content":"x"}],"tools":` + tools + `,"tool_choice":"required"}`, "tool_choice", "guided decoding", nil},
		{"named function", `{"messages":[{"role":"user","content":"x"}],"tools":` + tools + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, "tool_choice", "guided decoding", nil},
		{"json output", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, "response_format", "not supported", nil},
		{"both continue and generation prompt", `{"messages":[{"role":"user","content":"x"}],"continue_final_message":true}`, "continue_final_message", "Cannot set both", nil},
		{"top_logprobs alone", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, "top_logprobs", "`logprobs` must be set to true", nil},
		{"a prompt field", `{"messages":[{"role":"user","content":"x"}],"prompt":"x"}`, "prompt", "", nil},
		{"template in the request", `{"messages":[{"role":"user","content":"x"}],"chat_template":"{{x}}"}`, "chat_template", "is not accepted", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, srv := chatHandler(t, newFake(), c.opts...)
			status, body := postChat(t, srv.URL, c.body)
			require.Equal(t, 400, status, body)
			var e errJSON
			require.NoError(t, json.Unmarshal([]byte(body), &e))
			require.NotNil(t, e.Error.Param, body)
			assert.Equal(t, c.param, *e.Error.Param)
			assert.Contains(t, e.Error.Message, c.has)
		})
	}
	// A model without a template: vLLM's 400.
	srv := httptest.NewServer(NewHandler(newFake()))
	defer srv.Close()
	status, body := postChat(t, srv.URL, `{"messages":[{"role":"user","content":"x"}]}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, "you must provide a chat template")
}

// TestTokenizeMessages: /tokenize renders messages with the chat template,
// as vLLM's does, and counts the rendered prompt without added special
// tokens.
func TestTokenizeMessages(t *testing.T) {
	_, srv := chatHandler(t, newFake())
	resp, err := http.Post(srv.URL+"/tokenize", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":false}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out tokenizeResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	assert.Equal(t, byteTok{}.Encode("<user>Hi\n", true), out.Tokens)
	resp2, err := http.Post(srv.URL+"/tokenize", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"prompt":"x"}`))
	require.NoError(t, err)
	resp2.Body.Close()
	assert.Equal(t, 400, resp2.StatusCode)
}
