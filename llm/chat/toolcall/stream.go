package toolcall

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/tinyserve/tinyserve/llm/chat"
)

// Piece is part of a tool call as a stream sends it, the way vLLM's
// parsers stream calls: the first piece of a call carries its Name (and no
// arguments), later pieces the next text of its Arguments. Index counts
// the calls a choice has started, from 0. For a call that parses, the
// Arguments of its pieces joined equal the Call's Arguments.
type Piece struct {
	Index     int
	Name      string
	Arguments string
}

// callStream follows one call's JSON text as it grows and says what of it
// may be sent: the name once it is whole, then the arguments object's
// Python layout as far as the text decides it.
type callStream struct {
	index int
	named bool
	sent  string // arguments sent so far
}

// progress returns the pieces that body, the call's text so far, adds.
func (c *callStream) progress(body string) []Piece {
	name, args, ok := scanCall(body)
	var out []Piece
	if !c.named {
		if name == "" {
			return nil
		}
		c.named = true
		out = append(out, Piece{Index: c.index, Name: name})
	}
	if !ok {
		return out
	}
	if p := pyPrefix(args); len(p) > len(c.sent) && strings.HasPrefix(p, c.sent) {
		out = append(out, Piece{Index: c.index, Arguments: p[len(c.sent):]})
		c.sent = p
	}
	return out
}

// finish returns the pieces that complete call, the whole call as parsed:
// its name if it was not sent yet, and the rest of its arguments. A call
// whose streamed arguments turn out not to begin its parsed ones (text
// the stream could not follow) gets nothing more: what is sent stays sent.
func (c *callStream) finish(call Call) []Piece {
	var out []Piece
	if !c.named {
		c.named = true
		out = append(out, Piece{Index: c.index, Name: call.Name})
	}
	if rest, ok := strings.CutPrefix(call.Arguments, c.sent); ok && rest != "" {
		out = append(out, Piece{Index: c.index, Arguments: rest})
		c.sent = call.Arguments
	}
	return out
}

// scanCall reads the start of a hermes call object: its "name" once that
// string is whole, and, when "arguments" is an object, the text from that
// object's start (ok). Keys are read at the top level only; a name after
// the arguments, or arguments written as a string, are not followed, and
// the call is sent whole when it closes.
func scanCall(body string) (name, args string, ok bool) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return name, "", false
		}
		key, _ := t.(string)
		switch {
		case key == "name":
			v, err := dec.Token()
			if err != nil {
				return name, "", false
			}
			if d, isDelim := v.(json.Delim); isDelim {
				if err := skipRest(dec, d); err != nil {
					return name, "", false
				}
			}
			name, _ = v.(string)
			continue
		case key == "arguments":
			// The value starts after the key's colon: skip to it.
			rest := strings.TrimLeft(body[dec.InputOffset():], " \t\r\n")
			rest, found := strings.CutPrefix(rest, ":")
			rest = strings.TrimLeft(rest, " \t\r\n")
			if !found || !strings.HasPrefix(rest, "{") || name == "" {
				return name, "", false
			}
			return name, rest, true
		}
		if err := skipValue(dec); err != nil {
			return name, "", false
		}
	}
	return name, "", false
}

// skipValue reads past one value.
func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, isDelim := t.(json.Delim); isDelim {
		return skipRest(dec, d)
	}
	return nil
}

// skipRest reads past the rest of the object or array that open began.
func skipRest(dec *json.Decoder, open json.Delim) error {
	if open != '{' && open != '[' {
		return nil
	}
	depth := 1
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// pyPrefix is the longest prefix of chat.Dumps(object) that raw, the start
// of a JSON object's text, already decides: each token is written once the
// next one shows it complete, with Python's ", " and ": " between items,
// so that what is sent never has to change. It stops at the object's end
// or at the first text that is not JSON.
func pyPrefix(raw string) string {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	type level struct {
		object bool
		items  int // values written at this level (in an object: keys)
	}
	var stack []level
	pendingKey := "" // a key, written with its ": " when its value starts
	for {
		t, err := dec.Token()
		if err == io.EOF || err != nil {
			return b.String()
		}
		top := len(stack) - 1
		inObject := top >= 0 && stack[top].object
		if d, isDelim := t.(json.Delim); isDelim && (d == '}' || d == ']') {
			b.WriteByte(byte(d))
			stack = stack[:top]
			if len(stack) == 0 {
				return b.String()
			}
			continue
		}
		if inObject && pendingKey == "" {
			key, _ := t.(string)
			if stack[top].items > 0 {
				key = ", " + pyString(key)
			} else {
				key = pyString(key)
			}
			stack[top].items++
			pendingKey = key
			continue
		}
		if _, isNumber := t.(json.Number); isNumber && dec.InputOffset() == int64(len(raw)) {
			return b.String() // more digits may follow
		}
		if pendingKey != "" {
			b.WriteString(pendingKey + ": ")
			pendingKey = ""
		} else if top >= 0 {
			if stack[top].items > 0 {
				b.WriteString(", ")
			}
			stack[top].items++
		}
		switch v := t.(type) {
		case json.Delim:
			b.WriteByte(byte(v))
			stack = append(stack, level{object: v == '{'})
		case string:
			b.WriteString(pyString(v))
		case json.Number:
			s, err := chat.Dumps([]byte(v))
			if err != nil {
				return b.String()
			}
			b.WriteString(s)
		case bool:
			if v {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		case nil:
			b.WriteString("null")
		}
	}
}

// pyString writes s as Python's json.dumps(s, ensure_ascii=False) does.
func pyString(s string) string {
	raw, _ := json.Marshal(s) // a Go string always marshals
	out, _ := chat.Dumps(raw)
	return out
}
