package loadgen

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// fastParser is the small JSON scanner behind the SSE fast paths
// (ssefast.go, ssefastchat.go). Its readers accept only input they are
// sure encoding/json reads the same way and report false for anything
// else, so that the caller can fall back to encoding/json.
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

// object reads an object whose keys are plain strings, handing each key
// to member, which must read the value; false when member does or the
// syntax is not JSON.
func (p *fastParser) object(member func(key []byte) bool) bool {
	if !p.consume('{') {
		return false
	}
	p.ws()
	if p.peek() == '}' {
		p.i++
		return true
	}
	for {
		key, ok := p.key()
		if !ok || !member(key) {
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
}

// array reads null, leaving the caller's slice empty as the chunk's reset
// left it (encoding/json makes it nil: no element either way), or an array
// whose every element elem reads.
func (p *fastParser) array(elem func() bool) bool {
	p.ws()
	if p.literal("null") {
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
		if !elem() {
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
}

// optBytes reads null (null true) or a plain string with valid UTF-8.
func (p *fastParser) optBytes() (s []byte, null, ok bool) {
	p.ws()
	if p.literal("null") {
		return nil, true, true
	}
	s, ok = p.plainString()
	return s, false, ok && utf8.Valid(s)
}

// optString reads null (leaving *dst alone, as encoding/json does) or a
// plain string with valid UTF-8 into *dst.
func (p *fastParser) optString(dst *string) bool {
	s, null, ok := p.optBytes()
	if ok && !null {
		*dst = string(s)
	}
	return ok
}

// optStringPtr reads null (leaving *dst alone) or a plain string with
// valid UTF-8 into a new *dst. Nothing is allocated for null, the common
// finish_reason.
func (p *fastParser) optStringPtr(dst **string) bool {
	s, null, ok := p.optBytes()
	if ok && !null {
		str := string(s)
		*dst = &str
	}
	return ok
}

// foldsToAny reports whether key equals one of names under Unicode case
// folding, the way encoding/json matches keys to fields: such a key must
// not be skipped as unknown.
func foldsToAny(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}
