package loadgen

// fastChatChunk is [fastChunk] for a chat completions chunk: it fills c
// exactly as json.Unmarshal would and reports true, or reports false and
// leaves the chunk to encoding/json. The common shapes it claims are
// vLLM's: a delta with role and an empty content first, deltas with
// content (or reasoning_content) after, finish_reason on the last choice
// chunk, then a usage chunk with empty choices.
func fastChatChunk(data []byte, c *chatChunk) bool {
	return fastTopLevel(data, nil, c)
}

// chatChoices reads the choices array of a chat chunk: objects, every one
// checked, as encoding/json does.
func (p *fastParser) chatChoices(c *chatChunk) bool {
	return p.array(func() bool {
		c.Choices = append(c.Choices, chatChoice{})
		// null elements and other types fail here: encoding/json decides.
		return p.chatChoice(&c.Choices[len(c.Choices)-1])
	})
}

// chatChoice reads one choice object: its delta and finish_reason; other
// members (index, logprobs, stop_reason) are skipped.
func (p *fastParser) chatChoice(el *chatChoice) bool {
	var seenDelta, seenFinish bool
	return p.object(func(key []byte) bool {
		switch {
		case string(key) == "delta":
			if seenDelta {
				return false
			}
			seenDelta = true
			return p.chatDelta(&el.Delta)
		case string(key) == "finish_reason":
			if seenFinish {
				return false
			}
			seenFinish = true
			return p.optStringPtr(&el.FinishReason)
		case foldsToAny(key, "delta", "finish_reason"):
			return false
		}
		return p.skip()
	})
}

// chatDelta reads a delta (or null, which leaves it empty): content,
// reasoning_content and reasoning as strings or null; role, tool_calls and
// the rest are skipped.
func (p *fastParser) chatDelta(d *chatDelta) bool {
	p.ws()
	if p.literal("null") {
		return true
	}
	var seen [3]bool
	return p.object(func(key []byte) bool {
		var dst *string
		var i int
		switch string(key) {
		case "content":
			dst, i = &d.Content, 0
		case "reasoning_content":
			dst, i = &d.ReasoningContent, 1
		case "reasoning":
			dst, i = &d.Reasoning, 2
		default:
			if foldsToAny(key, "content", "reasoning_content", "reasoning") {
				return false
			}
			return p.skip()
		}
		if seen[i] {
			return false
		}
		seen[i] = true
		return p.optString(dst)
	})
}
