// Package toolcall parses the tool calls a model writes into its text, as
// vLLM's --tool-call-parser does: hermes (Qwen2.5, Qwen3:
// <tool_call>{"name": …, "arguments": …}</tool_call>) and llama3_json
// (Llama 3.1+: a JSON object {"name": …, "parameters": …}, optionally after
// <|python_tag|>, several joined by ";"). A parser takes the text as it is
// generated, so that a stream can send content as it comes and each tool
// call's arguments as they are written; text that does not parse stays
// content, never an error.
package toolcall

import (
	"fmt"
	"slices"
	"strings"
)

// Call is one parsed tool call. Arguments is the arguments object as JSON
// text, in Python's json.dumps layout (", " and ": "), as vLLM sends it.
type Call struct {
	Name, Arguments string
}

// Delta is what one Feed or Finish adds: content text, whole calls (for a
// complete response), and the same calls as stream pieces (for a stream,
// which sends each call's name and then its arguments as they are written).
type Delta struct {
	Content string
	Calls   []Call
	Pieces  []Piece
}

// Parser splits one choice's generated text. Feed takes the next piece of
// text; Finish ends it. A Parser holds back text that may still turn out
// to be a tool call.
type Parser interface {
	Feed(text string) Delta
	Finish() Delta
}

// Names are the parsers New knows, as vLLM names them.
var Names = []string{"hermes", "llama3_json"}

// New returns a function making a Parser of the named kind for each
// choice.
func New(name string) (func() Parser, error) {
	switch name {
	case "hermes":
		return func() Parser { return &hermes{} }, nil
	case "llama3_json":
		return func() Parser { return &llama3JSON{} }, nil
	}
	return nil, fmt.Errorf("unknown tool-call parser %q (tinyserve has %s)", name, strings.Join(Names, ", "))
}

// Parse runs a parser of kind newParser over a whole text.
func Parse(newParser func() Parser, text string) Delta {
	p := newParser()
	d := p.Feed(text)
	f := p.Finish()
	d.Content += f.Content
	d.Calls = append(d.Calls, f.Calls...)
	d.Pieces = append(d.Pieces, f.Pieces...)
	return d
}

// hermes is the <tool_call>JSON</tool_call> format. The text before the
// first call is content; text after it outside the tags is dropped, as
// vLLM's hermes parser keeps only the text before the first call.
type hermes struct {
	buf     strings.Builder // text not yet decided
	inCall  bool
	sawCall bool
	call    callStream // the call being written, when inCall
	started int        // calls whose pieces have begun
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

func (h *hermes) Feed(text string) Delta {
	h.buf.WriteString(text)
	var d Delta
	for {
		s := h.buf.String()
		if !h.inCall {
			i := strings.Index(s, hermesOpen)
			if i < 0 {
				// Hold back a tail that may be the start of the tag.
				keep := partialSuffix(s, hermesOpen)
				if !h.sawCall {
					d.Content += s[:len(s)-keep]
				}
				h.reset(s[len(s)-keep:])
				return d
			}
			if !h.sawCall {
				d.Content += s[:i]
			}
			h.inCall, h.sawCall = true, true
			h.call = callStream{index: h.started}
			h.reset(s[i+len(hermesOpen):])
			continue
		}
		j := strings.Index(s, hermesClose)
		if j < 0 {
			d.Pieces = append(d.Pieces, h.progress(s)...)
			return d
		}
		h.closeCall(s[:j], &d)
		h.inCall = false
		h.reset(s[j+len(hermesClose):])
	}
}

// progress streams what the open call's text so far decides.
func (h *hermes) progress(body string) []Piece {
	p := h.call.progress(body)
	if len(p) > 0 && p[0].Name != "" {
		h.started++
	}
	return p
}

// closeCall ends the open call, whole in body. One that does not parse is
// dropped, as vLLM drops it (a stream that began it cannot take it back).
func (h *hermes) closeCall(body string, d *Delta) {
	call, ok := parseCallJSON(body, "arguments")
	if !ok {
		return
	}
	d.Calls = append(d.Calls, call)
	if !h.call.named {
		h.started++
	}
	d.Pieces = append(d.Pieces, h.call.finish(call)...)
}

func (h *hermes) reset(rest string) {
	h.buf.Reset()
	h.buf.WriteString(rest)
}

func (h *hermes) Finish() Delta {
	var d Delta
	s := h.buf.String()
	switch {
	case h.inCall:
		// An unclosed call: vLLM's hermes parser still reads a complete
		// JSON object there (generation stopped at </tool_call>'s stop).
		h.closeCall(s, &d)
		h.inCall = false
	case !h.sawCall:
		d.Content = s
	}
	h.buf.Reset()
	return d
}

// llama3JSON is Llama 3.1's JSON tool-call format: the whole output is one
// or more JSON objects ({"name": …, "parameters": …}, joined by ";"),
// optionally after <|python_tag|>. Output that starts otherwise is content
// and streams at once; output that starts like a call is held to the end.
type llama3JSON struct {
	buf     strings.Builder
	decided bool
	isCall  bool
}

const pythonTag = "<|python_tag|>"

func (l *llama3JSON) Feed(text string) Delta {
	if l.decided && !l.isCall {
		return Delta{Content: text}
	}
	l.buf.WriteString(text)
	if l.decided {
		return Delta{}
	}
	s := strings.TrimLeft(l.buf.String(), " \t\r\n")
	switch {
	case s == "" || strings.HasPrefix(pythonTag, s):
		return Delta{} // not yet known
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, pythonTag):
		l.decided, l.isCall = true, true
		return Delta{}
	}
	l.decided = true
	out := l.buf.String()
	l.buf.Reset()
	return Delta{Content: out}
}

func (l *llama3JSON) Finish() Delta {
	s := l.buf.String()
	l.buf.Reset()
	if !l.isCall {
		return Delta{Content: s}
	}
	body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), pythonTag))
	var d Delta
	for _, part := range splitTopLevel(body, ';') {
		call, ok := parseCallJSON(part, "parameters", "arguments")
		if !ok {
			return Delta{Content: s} // not a call after all: the text as it came
		}
		d.Calls = append(d.Calls, call)
		// Held to the end, each call streams whole: its name, then its
		// arguments.
		cs := callStream{index: len(d.Calls) - 1}
		d.Pieces = append(d.Pieces, cs.finish(call)...)
	}
	if len(d.Calls) == 0 {
		return Delta{Content: s}
	}
	return d
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// splitTopLevel splits s at sep outside JSON strings, objects and arrays.
func splitTopLevel(s string, sep byte) []string {
	var parts []string
	depth, start, inStr, esc := 0, 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == sep && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	parts = append(parts, s[start:])
	return slices.DeleteFunc(parts, func(p string) bool { return strings.TrimSpace(p) == "" })
}
