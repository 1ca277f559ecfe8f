// Package reasoning separates a reasoning model's thinking from its answer,
// as vLLM's --reasoning-parser does: for qwen3 the text inside
// <think>…</think> is reasoning_content and the rest content.
package reasoning

import (
	"fmt"
	"strings"
)

// Parser splits one choice's generated text as it comes. Feed returns the
// reasoning and content that the text so far decides; a tag cut between
// two pieces is held back until the next.
type Parser interface {
	Feed(text string) (reasoning, content string)
	Finish() (reasoning, content string)
}

// Names are the parsers New knows, as vLLM names them.
var Names = []string{"qwen3"}

// New returns a function making a Parser of the named kind for each
// choice.
func New(name string) (func() Parser, error) {
	switch name {
	case "qwen3":
		return func() Parser { return &think{} }, nil
	}
	return nil, fmt.Errorf("unknown reasoning parser %q (tinyserve has %s)", name, strings.Join(Names, ", "))
}

// Parse runs a parser over a whole text.
func Parse(newParser func() Parser, text string) (reasoning, content string) {
	p := newParser()
	r, c := p.Feed(text)
	r2, c2 := p.Finish()
	return r + r2, c + c2
}

const (
	open  = "<think>"
	close = "</think>"
)

// think is Qwen3's: an output that starts with <think> (after leading
// whitespace) is reasoning up to </think>, then content; one that does not
// is content (the template wrote "<think>\n\n</think>" itself when
// thinking is off). An unclosed <think> leaves all of it reasoning, as
// vLLM's streaming parser sends it.
type think struct {
	buf   strings.Builder
	state int // 0: before the first non-space text, 1: reasoning, 2: content
}

func (p *think) Feed(text string) (reasoning, content string) {
	if p.state == 2 {
		return "", text
	}
	p.buf.WriteString(text)
	s := p.buf.String()
	if p.state == 0 {
		t := strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(t, open):
			p.state = 1
			s = t[len(open):]
		case strings.HasPrefix(open, t):
			return "", "" // may still become <think>
		default:
			p.state = 2
			p.buf.Reset()
			return "", s
		}
	}
	// Reasoning: up to </think>, holding back what may start it.
	if i := strings.Index(s, close); i >= 0 {
		p.state = 2
		p.buf.Reset()
		return s[:i], s[i+len(close):]
	}
	keep := 0
	for n := min(len(s), len(close)-1); n > 0; n-- {
		if strings.HasSuffix(s, close[:n]) {
			keep = n
			break
		}
	}
	p.buf.Reset()
	p.buf.WriteString(s[len(s)-keep:])
	return s[:len(s)-keep], ""
}

func (p *think) Finish() (reasoning, content string) {
	s := p.buf.String()
	p.buf.Reset()
	switch p.state {
	case 0:
		return "", s
	case 1:
		return s, ""
	}
	return "", s
}
