package sweep

import (
	"bytes"
	"unicode/utf8"
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
	p.ws()
	if p.literal("null") {
		c.Choices = c.Choices[:0]
		return true
	}
	if !p.consume('[') {
		return false
	}
	p.ws()
	if p.peek() == ']' {
		p.i++
		return true
	}
	for {
		p.ws()
		if !p.consume('{') {
			return false // null elements and other types: let encoding/json decide
		}
		c.Choices = append(c.Choices, struct {
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		}{})
		el := &c.Choices[len(c.Choices)-1]
		var seenText, seenFinish bool
		p.ws()
		if p.peek() == '}' {
			p.i++
		} else {
			for {
				key, ok := p.key()
				if !ok {
					return false
				}
				switch {
				case string(key) == "text":
					if seenText {
						return false
					}
					seenText = true
					p.ws()
					if !p.literal("null") {
						s, ok := p.plainString()
						if !ok || !utf8.Valid(s) {
							return false
						}
						el.Text = string(s)
					}
				case string(key) == "finish_reason":
					if seenFinish {
						return false
					}
					seenFinish = true
					p.ws()
					if !p.literal("null") {
						s, ok := p.plainString()
						if !ok || !utf8.Valid(s) {
							return false
						}
						fr := string(s)
						el.FinishReason = &fr
					}
				case bytes.EqualFold(key, []byte("text")) || bytes.EqualFold(key, []byte("finish_reason")):
					return false
				default:
					if !p.skip() {
						return false
					}
				}
				p.ws()
				sep := p.next()
				if sep == '}' {
					break
				}
				if sep != ',' {
					return false
				}
			}
		}
		p.ws()
		switch p.next() {
		case ',':
		case ']':
			return true
		default:
			return false
		}
	}
}

// usage reads the usage object into *dst; token counts must be plain
// integers.
func (p *fastParser) usage(dst **Usage) bool {
	p.ws()
	if p.literal("null") {
		return true
	}
	if !p.consume('{') {
		return false
	}
	u := &Usage{}
	*dst = u
	p.ws()
	if p.peek() == '}' {
		p.i++
		return true
	}
	var seenP, seenC bool
	for {
		key, ok := p.key()
		if !ok {
			return false
		}
		switch {
		case string(key) == "prompt_tokens":
			if seenP || !p.intOrNull(&u.PromptTokens) {
				return false
			}
			seenP = true
		case string(key) == "completion_tokens":
			if seenC || !p.intOrNull(&u.CompletionTokens) {
				return false
			}
			seenC = true
		case bytes.EqualFold(key, []byte("prompt_tokens")) || bytes.EqualFold(key, []byte("completion_tokens")):
			return false
		default:
			if !p.skip() {
				return false
			}
		}
		p.ws()
		switch p.next() {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}
