package openai

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/chat/reasoning"
	"github.com/tinyserve/tinyserve/llm/chat/toolcall"
)

// ChatTemplate renders a conversation into a prompt (see llm.ChatTemplate).
type ChatTemplate = llm.ChatTemplate

// ChatTemplater is an engine with a chat template (see llm.ChatTemplater).
type ChatTemplater = llm.ChatTemplater

// WithChatTemplate sets the template of /v1/chat/completions (vLLM's
// --chat-template) and the variables it is rendered with, in place of the
// engine's own (ChatTemplater).
func WithChatTemplate(t ChatTemplate, vars map[string]any) Option {
	return func(c *config) { c.chatTemplate, c.chatVars = t, vars }
}

// WithToolCallParser parses the tool calls the model writes (vLLM's
// --tool-call-parser; make one with llm/chat/toolcall.New). autoToolChoice
// is vLLM's --enable-auto-tool-choice: without it a request whose
// tool_choice is "auto" (the default when it has tools) is refused, as
// vLLM refuses it.
func WithToolCallParser(newParser func() toolcall.Parser, autoToolChoice bool) Option {
	return func(c *config) { c.toolParser, c.autoToolChoice = newParser, autoToolChoice }
}

// WithReasoningParser separates the model's reasoning into
// reasoning_content (vLLM's --reasoning-parser; make one with
// llm/chat/reasoning.New).
func WithReasoningParser(newParser func() reasoning.Parser) Option {
	return func(c *config) { c.reasoningParser = newParser }
}

// chatTemplate is the template in force and its variables, or nil.
func (h *handler) chatTemplate() (ChatTemplate, map[string]any) {
	if h.cfg.chatTemplate != nil {
		return h.cfg.chatTemplate, h.cfg.chatVars
	}
	if ct, ok := h.eng.(ChatTemplater); ok {
		return ct.ChatTemplate()
	}
	return nil, nil
}

// errNoChatTemplate is vLLM's answer for a model without a template.
var errNoChatTemplate = badRequest("", "invalid_value",
	"As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.")

func (h *handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	req, e := decodeChat(body)
	if e != nil {
		writeError(w, r, e)
		return
	}
	if !h.checkModel(w, r, req.model) {
		return
	}
	if req.toolChoice == "auto" && (h.cfg.toolParser == nil || !h.cfg.autoToolChoice) {
		writeError(w, r, badRequest("tool_choice", "invalid_value",
			"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"))
		return
	}
	text, e := h.renderChat(req)
	if e != nil {
		writeError(w, r, e)
		return
	}
	req.texts = []string{text}
	req.withModelDefaults(h.info.Defaults)
	req.raiseTinyTemperature()
	if e := req.checkGreedyN(); e != nil {
		writeError(w, r, e)
		return
	}
	prompts, e := h.preparePrompts(r.Context(), req.completionRequest)
	if e != nil {
		if r.Context().Err() != nil {
			requestLogger(r).Info("client went away while its prompt was tokenized", "err", context.Cause(r.Context()))
			return
		}
		writeError(w, r, e)
		return
	}
	h.serve(w, r, req.completionRequest, prompts, func(ctx context.Context, cancel context.CancelFunc, choices []*choice) {
		if req.stream {
			h.streamChat(ctx, cancel, w, r, req, prompts, choices)
			return
		}
		h.finishChat(ctx, cancel, w, r, req, prompts, choices)
	})
}

// renderChat renders the request's conversation with the template, as
// vLLM does: with add_generation_prompt, the tools (also under tool_choice
// "none", as vLLM passes them), the special tokens and the request's
// chat_template_kwargs, which may not replace the others.
func (h *handler) renderChat(req *chatRequest) (string, *apiError) {
	tmpl, base := h.chatTemplate()
	if tmpl == nil {
		return "", errNoChatTemplate
	}
	vars := make(map[string]any, len(base)+len(req.templateKwargs)+1)
	for k, v := range req.templateKwargs {
		vars[k] = v
	}
	for k, v := range base {
		vars[k] = v
	}
	vars["add_generation_prompt"] = req.addGenerationPrompt
	text, err := tmpl.Render(req.messages, req.tools, vars)
	if err != nil {
		return "", badRequest("messages", "invalid_value", "the chat template could not render the conversation: %v", err)
	}
	if req.continueFinal {
		// As transformers: cut at the sentinel appended to the final
		// message; a template that trimmed the content also lost the
		// sentinel's space, and what precedes it is trimmed too.
		i := strings.LastIndex(text, strings.TrimSpace(continueSentinel))
		if i < 0 {
			return "", badRequest("continue_final_message", "invalid_value",
				"continue_final_message: the template does not write the final message's content, so it cannot be continued")
		}
		exact := strings.HasPrefix(text[i:], continueSentinel)
		text = text[:i]
		if !exact {
			text = strings.TrimRight(text, " \t\r\n\v\f")
		}
	}
	return text, nil
}

// chatParse splits one choice's generated text into reasoning, content
// and tool calls, as it comes.
type chatParse struct {
	reasoning reasoning.Parser // nil: no reasoning parser
	tools     toolcall.Parser  // nil: tool calls are not parsed
}

func (h *handler) newChatParse(req *chatRequest) *chatParse {
	p := &chatParse{}
	if h.cfg.reasoningParser != nil {
		p.reasoning = h.cfg.reasoningParser()
	}
	if h.cfg.toolParser != nil && req.toolChoice == "auto" {
		p.tools = h.cfg.toolParser()
	}
	return p
}

// chatDelta is what a piece of text adds to a message.
type chatDelta struct {
	reasoning, content string
	calls              []toolcall.Call
	pieces             []toolcall.Piece
}

func (p *chatParse) feed(text string, final bool) chatDelta {
	var d chatDelta
	content := text
	if p.reasoning != nil {
		d.reasoning, content = p.reasoning.Feed(text)
		if final {
			r, c := p.reasoning.Finish()
			d.reasoning += r
			content += c
		}
	}
	if p.tools == nil {
		d.content = content
		return d
	}
	td := p.tools.Feed(content)
	if final {
		f := p.tools.Finish()
		td.Content += f.Content
		td.Calls = append(td.Calls, f.Calls...)
		td.Pieces = append(td.Pieces, f.Pieces...)
	}
	d.content, d.calls, d.pieces = td.Content, td.Calls, td.Pieces
	return d
}

// Response shapes of /v1/chat/completions, following vLLM's.
type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatMessage  `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	StopReason   any           `json:"stop_reason"`
}

// chatMessage is a response's message, or a stream chunk's delta (whose
// fields are left out when empty).
type chatMessage struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	Index    *int             `json:"index,omitempty"` // stream deltas only
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatToolFunction `json:"function"`
}

// chatToolFunction is a call's function. In a stream a call's first delta
// names it without arguments and later ones carry only arguments text, as
// vLLM's do; a whole message always has both.
type chatToolFunction struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// chatLogprobs is the chat form: one entry per generated token.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprobsOf formats the log-probabilities a choice has not yet sent.
func (h *handler) chatLogprobsOf(c *choice, req *chatRequest) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, 0, len(c.lps))}
	name := h.tokenText
	if req.tokensAsIDs {
		name = tokenIDText
	}
	for _, lp := range c.lps {
		tok := name(lp.ID)
		e := chatTokenLogprob{Token: tok, Logprob: finiteLogprob(lp.Logprob), Bytes: byteList(tok), TopLogprobs: []chatTopLogprob{}}
		for _, alt := range lp.Top[:min(*req.params.Logprobs, len(lp.Top))] {
			at := name(alt.ID)
			e.TopLogprobs = append(e.TopLogprobs, chatTopLogprob{Token: at, Logprob: finiteLogprob(alt.Logprob), Bytes: byteList(at)})
		}
		out.Content = append(out.Content, e)
	}
	c.lps = nil
	return out
}

func byteList(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// toolCallID names a tool call as vLLM does: "chatcmpl-tool-" and 32 hex
// digits, random.
func toolCallID() string { return "chatcmpl-tool-" + newRequestID() }

// finishChat waits for every choice and writes one chat.completion.
func (h *handler) finishChat(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request,
	req *chatRequest, prompts []promptIn, choices []*choice) {
	done := 0
	failed := h.applyEach(ctx, cancel, choices, req.completionRequest, func(c *choice, finished, _ bool) bool {
		if finished {
			done++
		}
		return done < len(choices)
	})
	if err := r.Context().Err(); err != nil {
		requestLogger(r).Info("client went away; request aborted", "err", context.Cause(r.Context()))
		return
	}
	if failed != nil {
		writeError(w, r, engineError(h.eventError(failed.err)))
		return
	}
	id := requestInfo(r).id
	resp := chatResponse{ID: "chatcmpl-" + id, Object: "chat.completion", Created: time.Now().Unix(),
		Model: h.modelName(req.model), Choices: make([]chatChoice, len(choices))}
	u := usage{}
	cached := make([]int, len(prompts))
	for _, c := range choices {
		d := h.newChatParse(req).feed(c.text.String(), true)
		fr := string(c.finish)
		msg := &chatMessage{Role: "assistant", Content: &d.content}
		if d.reasoning != "" {
			msg.ReasoningContent = &d.reasoning
		}
		for _, call := range d.calls {
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: toolCallID(), Type: "function",
				Function: chatToolFunction{Name: call.Name, Arguments: &call.Arguments}})
		}
		if len(d.calls) > 0 {
			fr = "tool_calls"
		}
		cc := chatChoice{Index: c.index, Message: msg, FinishReason: &fr, StopReason: c.stopReason}
		if req.chatLogprobs {
			cc.Logprobs = h.chatLogprobsOf(c, req)
		}
		resp.Choices[c.index] = cc
		u.add(c, req.n, cached)
	}
	u.finish(cached)
	resp.Usage = &u
	h.writeJSON(w, r, http.StatusOK, resp)
}
