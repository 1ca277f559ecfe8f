package openai

import (
	"context"
	"net/http"
	"time"
)

// chatChunkWithUsage is a chat stream chunk of a request that set
// stream_options.include_usage: "usage" is on every chunk, null on all but
// the last (see chunkWithUsage).
type chatChunkWithUsage struct {
	chatResponse
	Usage *usage `json:"usage"`
}

// streamChat writes the choices as chat.completion.chunk events, as vLLM's
// chat stream does: first each choice's role, then its deltas (reasoning,
// content, and tool calls: a call's name once written, then its arguments
// in pieces as they are written), then its
// finish reason; usage when asked; then [DONE]. Events queued behind one
// another merge into one chunk, as in streamCompletion.
func (h *handler) streamChat(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter,
	r *http.Request, req *chatRequest, prompts []promptIn, choices []*choice) {
	lg := requestLogger(r)
	sse, ok := h.startSSE(w, r, cancel)
	if !ok {
		return
	}
	base := chatResponse{ID: "chatcmpl-" + requestInfo(r).id, Object: "chat.completion.chunk", Created: time.Now().Unix(),
		Model: h.modelName(req.model)}
	emit := func(cc chatChoice, u *usage) error {
		chunk := base
		chunk.Choices = []chatChoice{cc}
		if req.includeUsage {
			return sse.event(chatChunkWithUsage{chatResponse: chunk, Usage: u})
		}
		return sse.event(chunk)
	}
	parses := make([]*chatParse, len(choices))
	calls := make([]int, len(choices)) // tool calls begun per choice
	for i, c := range choices {
		parses[i] = h.newChatParse(req)
		empty := ""
		if err := emit(chatChoice{Index: c.index, Delta: &chatMessage{Role: "assistant", Content: &empty}}, nil); err != nil {
			cancel()
			lg.Info("stream aborted: writing to the client failed", "err", err)
			return
		}
	}
	send := func(c *choice, finished bool) error {
		c.held = false
		d := parses[c.index].feed(c.text.String(), finished)
		c.text.Reset()
		c.tokenIDs = nil
		delta := &chatMessage{}
		if d.reasoning != "" {
			delta.ReasoningContent = &d.reasoning
		}
		if d.content != "" {
			delta.Content = &d.content
		}
		for _, p := range d.pieces {
			if p.Name != "" {
				calls[c.index]++
				delta.ToolCalls = append(delta.ToolCalls, chatToolCall{Index: &p.Index, ID: toolCallID(), Type: "function",
					Function: chatToolFunction{Name: p.Name}})
				continue
			}
			// Pieces of one call that come together go out as one entry.
			if n := len(delta.ToolCalls); n > 0 && *delta.ToolCalls[n-1].Index == p.Index {
				last := &delta.ToolCalls[n-1].Function
				args := p.Arguments
				if last.Arguments != nil {
					args = *last.Arguments + args
				}
				last.Arguments = &args
				continue
			}
			delta.ToolCalls = append(delta.ToolCalls, chatToolCall{Index: &p.Index, Function: chatToolFunction{Arguments: &p.Arguments}})
		}
		cc := chatChoice{Index: c.index, Delta: delta}
		if req.chatLogprobs && len(c.lps) > 0 {
			cc.Logprobs = h.chatLogprobsOf(c, req)
		}
		if finished {
			fr := string(c.finish)
			if calls[c.index] > 0 {
				fr = "tool_calls"
			}
			cc.FinishReason, cc.StopReason = &fr, c.stopReason
		} else if delta.ReasoningContent == nil && delta.Content == nil && delta.ToolCalls == nil && cc.Logprobs == nil {
			return nil // nothing decided yet (a tag or call held back)
		}
		var u *usage
		if req.continuousUsage {
			u = &usage{PromptTokens: c.promptTokens, CompletionTokens: c.completionTokens, TotalTokens: c.promptTokens + c.completionTokens}
		}
		return emit(cc, u)
	}
	done := 0
	var writeErr error
	failed := h.applyEach(ctx, cancel, choices, req.completionRequest, func(c *choice, finished, queued bool) bool {
		if queued {
			c.held = true
			return true
		}
		if writeErr = send(c, finished); writeErr != nil {
			return false
		}
		if finished {
			done++
		}
		return done < len(choices)
	})
	if !h.endStream(r, sse, cancel, choices, failed, writeErr, send) {
		return
	}
	var final any
	if req.includeUsage {
		u := totalUsage(req.completionRequest, prompts, choices)
		chunk := base
		chunk.Choices = []chatChoice{}
		final = chatChunkWithUsage{chatResponse: chunk, Usage: &u}
	}
	closeStream(lg, sse, final)
}
