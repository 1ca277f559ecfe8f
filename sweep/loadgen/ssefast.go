package loadgen

import (
	"bytes"
)

// fastChunk decodes the common shape of an OpenAI completions SSE chunk
// without encoding/json, which was most of the client's CPU on long streams.
// It fills c exactly as json.Unmarshal would and reports true, or reports
// false for anything it is not certain about (escapes in text, keys that
// match ours only case-insensitively, duplicate keys, unusual types, an
// error member), and the caller then uses json.Unmarshal. FuzzParseStream checks the two agree.
func fastChunk(data []byte, c *sseChunk) bool {
	return fastTopLevel(data, c, nil)
}

// fastTopLevel reads a chunk's top-level object into comp (completions) or,
// when comp is nil, chat; members other than choices and usage are
// skipped. It gives up (false) on an error member, on keys that match
// choices, usage or error only case-insensitively, and on duplicates, all
// of which encoding/json decides. (Two pointers rather than a callback:
// calling a func value with the parser would move it to the heap, one
// allocation per chunk.)
func fastTopLevel(data []byte, comp *sseChunk, chat *chatChunk) bool {
	p := fastParser{b: data}
	var usage **Usage
	if comp != nil {
		usage = &comp.Usage
	} else {
		usage = &chat.Usage
	}
	var seenChoices, seenUsage bool
	ok := p.object(func(key []byte) bool {
		switch {
		case string(key) == "choices":
			if seenChoices {
				return false
			}
			if comp != nil && !p.choices(comp) || comp == nil && !p.chatChoices(chat) {
				return false
			}
			seenChoices = true
		case string(key) == "usage":
			if seenUsage || !p.usage(usage) {
				return false
			}
			seenUsage = true
		case foldsToAny(key, "choices", "usage"):
			return false // encoding/json would match it case-insensitively
		case bytes.EqualFold(key, []byte("error")):
			return false // rare, and its value is kept raw: encoding/json decides
		default:
			return p.skip()
		}
		return true
	})
	return ok && p.end()
}

// choices reads the choices array: objects whose text and finish_reason are
// strings or null; every element is checked, as encoding/json does.
func (p *fastParser) choices(c *sseChunk) bool {
	return p.array(func() bool {
		c.Choices = append(c.Choices, struct {
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		}{})
		el := &c.Choices[len(c.Choices)-1]
		var seenText, seenFinish bool
		// null elements and other types fail here: encoding/json decides.
		return p.object(func(key []byte) bool {
			switch {
			case string(key) == "text":
				if seenText {
					return false
				}
				seenText = true
				return p.optString(&el.Text)
			case string(key) == "finish_reason":
				if seenFinish {
					return false
				}
				seenFinish = true
				return p.optStringPtr(&el.FinishReason)
			case foldsToAny(key, "text", "finish_reason"):
				return false
			}
			return p.skip()
		})
	})
}

// usage reads the usage object into *dst; token counts must be plain
// integers.
func (p *fastParser) usage(dst **Usage) bool {
	p.ws()
	if p.literal("null") {
		return true
	}
	u := &Usage{}
	*dst = u
	var seenP, seenC bool
	return p.object(func(key []byte) bool {
		switch {
		case string(key) == "prompt_tokens":
			if seenP {
				return false
			}
			seenP = true
			return p.intOrNull(&u.PromptTokens)
		case string(key) == "completion_tokens":
			if seenC {
				return false
			}
			seenC = true
			return p.intOrNull(&u.CompletionTokens)
		case foldsToAny(key, "prompt_tokens", "completion_tokens"):
			return false
		}
		return p.skip()
	})
}
