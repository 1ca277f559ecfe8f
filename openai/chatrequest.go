package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// chatRequest is a decoded /v1/chat/completions body: the sampling fields
// it shares with completions (whose single prompt is the rendered
// conversation, filled in once the template has run), and the chat's own.
type chatRequest struct {
	*completionRequest
	messages            json.RawMessage // normalized as vLLM passes them to the template
	tools               json.RawMessage // nil when none
	toolChoice          string          // "none" or "auto"
	addGenerationPrompt bool
	continueFinal       bool
	templateKwargs      map[string]any
	// topLogprobs is the chat form of logprobs: logprobs true asks for the
	// chosen token's, top_logprobs for that many alternatives.
	chatLogprobs bool
}

// rawChatRequest is the JSON shape: the completion fields it shares, with
// the chat's own beside them (a field of the same name here, logprobs,
// takes the place of the embedded one).
type rawChatRequest struct {
	rawCompletionRequest
	Messages             json.RawMessage `json:"messages"`
	Logprobs             *bool           `json:"logprobs"`
	TopLogprobs          *int            `json:"top_logprobs"`
	MaxCompletionTokens  *int            `json:"max_completion_tokens"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage *bool           `json:"continue_final_message"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	ResponseFormat       json.RawMessage `json:"response_format"`
	Tools                json.RawMessage `json:"tools"`
	ToolChoice           json.RawMessage `json:"tool_choice"`
	ParallelToolCalls    *bool           `json:"parallel_tool_calls"`
	ChatTemplate         *string         `json:"chat_template"`
}

func knownChatField(name string) bool {
	switch name {
	case "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
		"seed", "n", "stop", "stop_token_ids", "ignore_eos", "min_tokens", "logprobs", "top_logprobs",
		"stream", "stream_options", "user", "presence_penalty", "frequency_penalty", "repetition_penalty",
		"logit_bias", "include_stop_str_in_output", "skip_special_tokens", "allowed_token_ids", "bad_words",
		"priority", "add_special_tokens", "add_generation_prompt", "continue_final_message",
		"chat_template_kwargs", "response_format", "tools", "tool_choice", "parallel_tool_calls",
		"chat_template", "truncate_prompt_tokens", "return_tokens_as_token_ids":
		return true
	}
	return false
}

// decodeChat decodes and validates a /v1/chat/completions body.
func decodeChat(body []byte) (*chatRequest, *apiError) {
	var raw rawChatRequest
	fields, e := decodeStrictFields(body, knownChatField, &raw)
	if e != nil {
		return nil, e
	}
	if raw.ChatTemplate != nil {
		// vLLM takes a template per request only when started with
		// --trust-request-chat-template: a template is code.
		return nil, badRequest("chat_template", "unsupported_parameter",
			"chat_template in a request is not accepted (a template is code): the model's own template is used")
	}
	// The chat's max_completion_tokens is max_tokens' new name; left out,
	// both mean vLLM's "as many as fit" (not completions' 16).
	if raw.MaxCompletionTokens != nil {
		raw.MaxTokens = raw.MaxCompletionTokens
	}
	if raw.MaxTokens == nil {
		if fields == nil {
			fields = map[string]json.RawMessage{}
		}
		fields["max_tokens"] = json.RawMessage("null")
	}
	switch {
	case raw.Logprobs != nil && *raw.Logprobs:
		n := 0
		if raw.TopLogprobs != nil {
			n = *raw.TopLogprobs
		}
		raw.rawCompletionRequest.Logprobs = &n
	case raw.TopLogprobs != nil && *raw.TopLogprobs > 0:
		return nil, badRequest("top_logprobs", "invalid_value", "when using `top_logprobs`, `logprobs` must be set to true.")
	}
	if e := checkResponseFormat(raw.ResponseFormat); e != nil {
		return nil, e
	}
	c, e := decodeSampling(&raw.rawCompletionRequest, fields, []string{""}, nil)
	if e != nil {
		return nil, e
	}
	req := &chatRequest{completionRequest: c, chatLogprobs: raw.Logprobs != nil && *raw.Logprobs}
	// vLLM's chat default: the template writes the special tokens.
	req.addSpecial = raw.AddSpecialTokens != nil && *raw.AddSpecialTokens
	req.addGenerationPrompt = raw.AddGenerationPrompt == nil || *raw.AddGenerationPrompt
	req.continueFinal = raw.ContinueFinalMessage != nil && *raw.ContinueFinalMessage
	if req.continueFinal && req.addGenerationPrompt {
		return nil, badRequest("continue_final_message", "invalid_value",
			"Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	}
	if req.messages, e = normalizeMessages(raw.Messages, req.continueFinal); e != nil {
		return nil, e
	}
	if req.tools, req.toolChoice, e = decodeTools(raw.Tools, raw.ToolChoice); e != nil {
		return nil, e
	}
	if k := bytes.TrimSpace(raw.ChatTemplateKwargs); len(k) > 0 && !bytes.Equal(k, []byte("null")) {
		if err := json.Unmarshal(k, &req.templateKwargs); err != nil || req.templateKwargs == nil {
			return nil, badRequest("chat_template_kwargs", "invalid_type", "chat_template_kwargs: expected an object, got %s", jsonKind(k))
		}
	}
	return req, nil
}

// checkResponseFormat accepts {"type": "text"}, the default; structured
// output (json_object, json_schema) needs guided decoding, which tinyserve
// does not have.
func checkResponseFormat(raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var rf struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return badRequest("response_format", "invalid_type", "response_format: expected an object with a type")
	}
	if rf.Type != "text" {
		return badRequest("response_format", "unsupported_parameter",
			"response_format %q is not supported by tinyserve (no guided decoding): only {\"type\": \"text\"} is accepted", rf.Type)
	}
	return nil
}

// decodeTools checks the tools (an array of {"type": "function",
// "function": {"name", ...}}) and tool_choice: "none", "auto" (the default
// when tools are given, as in OpenAI and vLLM) or left out. A named
// function and "required" need guided decoding and are refused.
func decodeTools(tools, choice json.RawMessage) (json.RawMessage, string, *apiError) {
	tools = bytes.TrimSpace(tools)
	if bytes.Equal(tools, []byte("null")) {
		tools = nil
	}
	if len(tools) > 0 {
		var list []struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(tools, &list); err != nil {
			return nil, "", badRequest("tools", "invalid_type", "tools: expected an array of {\"type\": \"function\", \"function\": {...}} objects")
		}
		for i, t := range list {
			if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
				return nil, "", badRequest("tools", "invalid_value", "tools[%d]: expected type \"function\" and a function with a name", i)
			}
		}
		if len(list) == 0 {
			tools = nil
		}
	}
	mode := "none"
	if len(tools) > 0 {
		mode = "auto"
	}
	choice = bytes.TrimSpace(choice)
	if len(choice) > 0 && !bytes.Equal(choice, []byte("null")) {
		var s string
		if err := json.Unmarshal(choice, &s); err != nil {
			return nil, "", badRequest("tool_choice", "unsupported_parameter",
				"tool_choice naming a function is not supported by tinyserve (it needs guided decoding): use \"auto\" or \"none\"")
		}
		switch s {
		case "none", "auto":
			mode = s
		case "required":
			return nil, "", badRequest("tool_choice", "unsupported_parameter",
				"tool_choice \"required\" is not supported by tinyserve (it needs guided decoding): use \"auto\" or \"none\"")
		default:
			return nil, "", badRequest("tool_choice", "invalid_value", "tool_choice must be \"none\", \"auto\", \"required\" or a function, got %q", s)
		}
	}
	return tools, mode, nil
}

// continueSentinel is what transformers appends to the final message to
// find where its content ends in the rendered text (continue_final_message).
const continueSentinel = "CONTINUE_FINAL_MESSAGE_TAG "

// normalizeMessages checks the conversation and rewrites it as vLLM hands
// it to the template, keeping every object's keys in order (a template's
// tojson shows them): a content given as text parts becomes their texts
// joined with newlines; a part that is not text is refused, naming it; a
// tool call's arguments written as a JSON string become the object. With
// continueFinal the sentinel is appended to the final message's content.
func normalizeMessages(raw json.RawMessage, continueFinal bool) (json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	var msgs []json.RawMessage
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest("messages", "missing_required_parameter", "messages is required")
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, badRequest("messages", "invalid_type", "messages: expected an array of message objects, got %s", jsonKind(raw))
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "invalid_value", "messages must not be empty")
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			out.WriteByte(',')
		}
		last := i == len(msgs)-1
		b, e := normalizeMessage(m, i, continueFinal && last)
		if e != nil {
			return nil, e
		}
		out.Write(b)
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

// normalizeMessage is normalizeMessages for messages[i].
func normalizeMessage(raw json.RawMessage, i int, sentinel bool) ([]byte, *apiError) {
	where := fmt.Sprintf("messages[%d]", i)
	keys, vals, ok := orderedObject(raw)
	if !ok {
		return nil, badRequest("messages", "invalid_type", "%s: expected an object with a role, got %s", where, jsonKind(raw))
	}
	role := ""
	for k, key := range keys {
		if key == "role" {
			if json.Unmarshal(vals[k], &role) != nil || role == "" {
				return nil, badRequest("messages", "invalid_value", "%s.role must be a non-empty string", where)
			}
		}
	}
	if role == "" {
		return nil, badRequest("messages", "missing_required_parameter", "%s.role is required", where)
	}
	hasContent := false
	for k, key := range keys {
		switch key {
		case "content":
			hasContent = true
			v, e := normalizeContent(vals[k], where+".content", sentinel)
			if e != nil {
				return nil, e
			}
			vals[k] = v
		case "tool_calls":
			v, e := normalizeToolCalls(vals[k], where+".tool_calls")
			if e != nil {
				return nil, e
			}
			vals[k] = v
		}
	}
	if sentinel && !hasContent {
		return nil, badRequest("continue_final_message", "invalid_value", "continue_final_message: the final message has no content to continue")
	}
	return writeObject(keys, vals), nil
}

// normalizeContent is a message's content: a string, null, or text parts
// joined with newlines.
func normalizeContent(raw json.RawMessage, where string, sentinel bool) (json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	var s string
	switch {
	case bytes.Equal(raw, []byte("null")):
		if sentinel {
			return nil, badRequest("continue_final_message", "invalid_value", "continue_final_message: the final message has no content to continue")
		}
		return raw, nil
	case json.Unmarshal(raw, &s) == nil:
	default:
		var parts []json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, badRequest("messages", "invalid_type", "%s: expected a string or an array of content parts, got %s", where, jsonKind(raw))
		}
		texts := make([]string, 0, len(parts))
		for j, p := range parts {
			var part struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(p, &part); err != nil {
				return nil, badRequest("messages", "invalid_type", "%s[%d]: expected a content part object", where, j)
			}
			if part.Type != "text" {
				return nil, badRequest("messages", "invalid_value",
					"%s[%d]: content part type %q is not supported: tinyserve serves text models, and only \"text\" parts are accepted", where, j, part.Type)
			}
			if part.Text == nil {
				return nil, badRequest("messages", "missing_required_parameter", "%s[%d].text is required", where, j)
			}
			texts = append(texts, *part.Text)
		}
		s = strings.Join(texts, "\n")
	}
	if sentinel {
		s += continueSentinel
	}
	b, _ := json.Marshal(s)
	return b, nil
}

// normalizeToolCalls turns string arguments of an assistant's tool calls
// into the JSON objects they hold, as vLLM does before rendering.
func normalizeToolCalls(raw json.RawMessage, where string) (json.RawMessage, *apiError) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return raw, nil
	}
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, badRequest("messages", "invalid_type", "%s: expected an array of tool calls", where)
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for j, c := range calls {
		if j > 0 {
			out.WriteByte(',')
		}
		keys, vals, ok := orderedObject(c)
		if !ok {
			return nil, badRequest("messages", "invalid_type", "%s[%d]: expected a tool call object", where, j)
		}
		for k, key := range keys {
			if key != "function" {
				continue
			}
			fk, fv, ok := orderedObject(vals[k])
			if !ok {
				return nil, badRequest("messages", "invalid_type", "%s[%d].function: expected an object", where, j)
			}
			for a, akey := range fk {
				var s string
				if akey != "arguments" || json.Unmarshal(fv[a], &s) != nil {
					continue
				}
				if t := strings.TrimSpace(s); !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
					return nil, badRequest("messages", "invalid_value", "%s[%d].function.arguments is not a JSON object", where, j)
				}
				fv[a] = json.RawMessage(strings.TrimSpace(s))
			}
			vals[k] = writeObject(fk, fv)
		}
		out.Write(writeObject(keys, vals))
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

// orderedObject reads a JSON object's members in order.
func orderedObject(raw json.RawMessage) (keys []string, vals []json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		k, isKey := t.(string)
		if err != nil || !isKey {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, true
}

// writeObject writes members back as one JSON object, in order.
func writeObject(keys []string, vals []json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vals[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}
