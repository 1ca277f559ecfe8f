package openai

// Response shapes of /v1/completions, following vLLM's CompletionResponse and
// CompletionStreamResponse.
type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

// chunkWithUsage is a stream chunk of a request that set
// stream_options.include_usage. OpenAI then puts "usage" on every chunk:
// null on all but the last. encoding/json prefers this field to the embedded
// response's omitempty one because it is less deeply nested.
type chunkWithUsage struct {
	completionResponse
	Usage *usage `json:"usage"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	// StopReason is vLLM's: the stop string (a JSON string) or stop token id
	// (a number) that ended the choice, or null (EOS, length, not yet).
	StopReason     any   `json:"stop_reason"`
	PromptTokenIDs []int `json:"prompt_token_ids,omitzero"`
	TokenIDs       []int `json:"token_ids,omitzero"`
	// PromptLogprobs is vLLM's, when the request set prompt_logprobs.
	PromptLogprobs vllmPromptLogprobs `json:"prompt_logprobs,omitzero"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is OpenAI's; set only when the prefix cache
	// supplied some prompt tokens, so responses without it stay as they
	// were (vLLM sends it with --enable-prompt-tokens-details).
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails says how many prompt tokens came from the prefix
// cache rather than being computed.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// add counts one choice. A prompt's tokens count once, not once per
// choice: choice index%n == 0 counts them; the cached ones are the most any
// of the prompt's choices found (they may have run at different times).
func (u *usage) add(c *choice, n int, cached []int) {
	if c.index%n == 0 {
		u.PromptTokens += c.promptTokens
	}
	u.CompletionTokens += c.completionTokens
	cached[c.prompt] = max(cached[c.prompt], c.cachedTokens)
}

// finish sets the totals once every choice is counted.
func (u *usage) finish(cached []int) {
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	sum := 0
	for _, c := range cached {
		sum += c
	}
	if sum > 0 {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: sum}
	}
}
