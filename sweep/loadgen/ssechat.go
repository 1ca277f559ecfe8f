package loadgen

import "encoding/json"

// chatChunk is one chat completions SSE chunk, as far as the client reads
// it. The delta's role (sent alone, with an empty content, in vLLM's first
// chunk) is not read: it is no text.
type chatChunk struct {
	Choices []chatChoice `json:"choices"`
	Usage   *Usage       `json:"usage"`
	// Error is kept raw, as in sseChunk.
	Error json.RawMessage `json:"error"`
}

type chatChoice struct {
	Delta        chatDelta `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

// chatDelta is a streamed delta, and also the shape of a non-streamed
// choice's message.
type chatDelta struct {
	Content string `json:"content"`
	// ReasoningContent is what reasoning models stream before the answer
	// in vLLM (and DeepSeek's API); newer vLLM servers call it Reasoning.
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

// reasoning is the delta's reasoning text. reasoning_content wins over
// reasoning: a server that sends both (one as a deprecated alias) sends
// the same text twice.
func (d *chatDelta) reasoning() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	return d.Reasoning
}

func (c *chatChunk) reset() {
	clear(c.Choices[:cap(c.Choices)])
	c.Choices, c.Usage, c.Error = c.Choices[:0], nil, nil
}

// decodeChat decodes data into the reused chat chunk and its view.
func (d *lineDecoder) decodeChat(data []byte, v *chunkView) bool {
	c := &d.chat
	c.reset()
	if !fastChatChunk(data, c) {
		c.reset()
		if json.Unmarshal(data, c) != nil {
			return false
		}
	}
	*v = chunkView{usage: c.Usage, err: c.Error}
	if len(c.Choices) > 0 {
		ch := &c.Choices[0]
		v.choice, v.text, v.reasoning, v.finish = true, ch.Delta.Content, ch.Delta.reasoning(), ch.FinishReason
	}
	return true
}
