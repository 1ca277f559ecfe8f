package sweep

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// fastChunk decodes the common shape of an OpenAI completions SSE chunk
// without encoding/json, which was most of the client's CPU on long streams.
// It fills c exactly as json.Unmarshal would and reports true, or reports
// false for anything it is not certain about (escapes in text, keys that
// match ours only case-insensitively, duplicate keys, unusual types, an
// error member), and the caller then uses json.Unmarshal. FuzzParseStream checks the two agree.
func fastChunk(data []byte, c *sseChunk) bool {
	p := fastParser{b: data}
	if !p.consume('{') {
		return false
	}
	var seenChoices, seenUsage bool
	p.ws()
	if p.peek() == '}' {
		p.i++
		return p.end()
	}
	for {
		key, ok := p.key()
		if !ok {
			return false
		}
		switch {
		case string(key) == "choices":
			if seenChoices || !p.choices(c) {
				return false
			}
			seenChoices = true
		case string(key) == "usage":
			if seenUsage || !p.usage(c) {
				return false
			}
			seenUsage = true
		case bytes.EqualFold(key, []byte("choices")) || bytes.EqualFold(key, []byte("usage")):
			return false // encoding/json would match it case-insensitively
		case bytes.EqualFold(key, []byte("error")):
			return false // rare, and its value is kept raw: encoding/json decides
		default:
			if !p.skip() {
				return false
			}
		}
		p.ws()
		switch p.next() {
		case ',':
			continue
		case '}':
			return p.end()
		default:
			return false
		}
	}
}

type fastParser struct {
	b     []byte
	i     int
	depth int // nesting of skipped values
}

// maxSkipDepth is far below encoding/json's nesting limit (10,000), so the
// fast path never accepts what encoding/json rejects for depth.
const maxSkipDepth = 100

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *fastParser) next() byte {
	if p.i < len(p.b) {
		p.i++
		return p.b[p.i-1]
	}
	return 0
}

func (p *fastParser) consume(ch byte) bool {
	p.ws()
	if p.peek() != ch {
		return false
	}
	p.i++
	return true
}

// end reports whether only whitespace is left.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// plainString reads a string without escapes and returns its bytes; false
// for escapes or control characters (the caller then falls back).
func (p *fastParser) plainString() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		ch := p.b[p.i]
		switch {
		case ch == '"':
			p.i++
			return p.b[start : p.i-1], true
		case ch == '\\' || ch < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// key reads an object key and the colon after it.
func (p *fastParser) key() ([]byte, bool) {
	k, ok := p.plainString()
	if !ok || !p.consume(':') {
		return nil, false
	}
	return k, true
}

func (p *fastParser) literal(word string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		p.i += len(word)
		return true
	}
	return false
}

// skip steps over one valid JSON value of any type.
func (p *fastParser) skip() bool {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxSkipDepth {
		return false
	}
	p.ws()
	switch ch := p.peek(); {
	case ch == '"':
		return p.skipString()
	case ch == '{':
		p.i++
		p.ws()
		if p.peek() == '}' {
			p.i++
			return true
		}
		for {
			p.ws()
			if !p.skipString() || !p.consume(':') || !p.skip() {
				return false
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
	case ch == '[':
		p.i++
		p.ws()
		if p.peek() == ']' {
			p.i++
			return true
		}
		for {
			if !p.skip() {
				return false
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
	case ch == 't':
		return p.literal("true")
	case ch == 'f':
		return p.literal("false")
	case ch == 'n':
		return p.literal("null")
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return p.skipNumber()
	default:
		return false
	}
}

// skipString steps over a string, validating escapes as JSON does.
func (p *fastParser) skipString() bool {
	if p.peek() != '"' {
		return false
	}
	p.i++
	for p.i < len(p.b) {
		ch := p.b[p.i]
		p.i++
		switch {
		case ch == '"':
			return true
		case ch < 0x20:
			return false
		case ch == '\\':
			if p.i >= len(p.b) {
				return false
			}
			e := p.b[p.i]
			p.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if p.i+4 > len(p.b) {
					return false
				}
				for _, h := range p.b[p.i : p.i+4] {
					if !isHex(h) {
						return false
					}
				}
				p.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(h byte) bool {
	return (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')
}

// skipNumber steps over a number in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fastParser) skipNumber() bool {
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.peek() == '-' {
		p.i++
	}
	switch {
	case p.peek() == '0':
		p.i++
	case p.peek() >= '1' && p.peek() <= '9':
		digits()
	default:
		return false
	}
	if p.peek() == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.peek() == 'e' || p.peek() == 'E' {
		p.i++
		if p.peek() == '+' || p.peek() == '-' {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
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

// usage reads the usage object; token counts must be plain integers.
func (p *fastParser) usage(c *sseChunk) bool {
	p.ws()
	if p.literal("null") {
		return true
	}
	if !p.consume('{') {
		return false
	}
	u := &Usage{}
	c.Usage = u
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

// intOrNull reads null or a plain integer that fits an int.
func (p *fastParser) intOrNull(dst **int) bool {
	p.ws()
	if p.literal("null") {
		return true
	}
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	if n == 0 || n > 18 {
		return false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return false
	}
	text := p.b[start:p.i]
	if (text[0] == '0' && len(text) > 1) || (text[0] == '-' && text[1] == '0' && len(text) > 2) {
		return false // leading zeros are not JSON
	}
	v, err := strconv.Atoi(string(text))
	if err != nil {
		return false
	}
	*dst = &v
	return true
}
