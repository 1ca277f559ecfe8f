package llm

import "encoding/json"

// ChatTemplate renders a conversation into a model's prompt text, as
// Hugging Face's apply_chat_template does. messages is the conversation as
// a JSON array (in the shape vLLM hands its template), tools the tools'
// JSON array or nil, and vars the template's other variables
// (add_generation_prompt, the special tokens, chat_template_kwargs). An
// error is the request's fault (the template raised, or could not render
// what it was given). llm/chat's Template implements it.
type ChatTemplate interface {
	Render(messages, tools json.RawMessage, vars map[string]any) (string, error)
}

// ChatTemplater is an optional interface of an Engine whose model comes
// with a chat template: the template, or nil when the model has none, and
// the variables every rendering gets (its special tokens: bos_token,
// eos_token, ...).
type ChatTemplater interface {
	ChatTemplate() (ChatTemplate, map[string]any)
}
