package loadgen

import (
	"net/url"
	"strings"
)

// API is the OpenAI API the load client speaks. The endpoint's URL decides
// it ([APIForURL]), as it does for vLLM's benchmark, so a sweep config keeps
// serving-inference's schema: no key says which API to use.
type API string

const (
	// APICompletions is the legacy /v1/completions API: the row's prompt is
	// sent as prompt, and choices[0].text is the answer.
	APICompletions API = "completions"
	// APIChat is /v1/chat/completions: the row's prompt is sent as one user
	// message, and choices[0].delta.content (streaming) or
	// choices[0].message.content is the answer, with reasoning_content
	// (or reasoning) counted as text too.
	APIChat API = "chat"
)

// APIForURL returns the API to speak to the endpoint u: chat when its path
// ends in /chat/completions, completions otherwise (also for a URL that
// does not parse, which [LoadOptions.Validate] refuses anyway).
func APIForURL(u string) API {
	parsed, err := url.Parse(u)
	if err == nil && strings.HasSuffix(parsed.Path, "/chat/completions") {
		return APIChat
	}
	return APICompletions
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionBody is a /v1/completions request. Field order is the body's
// key order.
type completionBody struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatBody is a /v1/chat/completions request. The output length goes in
// max_completion_tokens, OpenAI's current name and the one vLLM's benchmark
// sends (max_tokens is deprecated for chat).
type chatBody struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxCompletionTokens int            `json:"max_completion_tokens"`
	Temperature         float64        `json:"temperature"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS           bool           `json:"ignore_eos,omitempty"`
}
