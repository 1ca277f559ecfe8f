package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseCallJSON reads one call object: a "name" string and its arguments
// under the first of argKeys present (an object, or a string holding
// one). ok is false for anything else.
func parseCallJSON(s string, argKeys ...string) (Call, bool) {
	s = strings.TrimSpace(s)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return Call{}, false
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return Call{}, false
	}
	args := json.RawMessage("{}")
	for _, k := range argKeys {
		if v, ok := obj[k]; ok {
			args = v
			break
		}
	}
	var str string
	if json.Unmarshal(args, &str) == nil {
		args = json.RawMessage(str) // arguments written as a JSON string
	}
	if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' {
		return Call{}, false
	}
	dumped, err := PyDumps(args)
	if err != nil {
		return Call{}, false
	}
	return Call{Name: name, Arguments: dumped}, true
}

// PyDumps re-writes the JSON value raw as Python's json.dumps(value,
// ensure_ascii=False) writes what json.loads read from it: keys in their
// order, ", " and ": " between items, floats as Python's repr, non-ASCII
// text kept. vLLM's tool parsers write a call's arguments this way.
func PyDumps(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := pyValue(dec, &b); err != nil {
		return "", err
	}
	if rest := bytes.TrimSpace(raw[dec.InputOffset():]); len(rest) > 0 {
		return "", fmt.Errorf("trailing data after the JSON value")
	}
	return b.String(), nil
}

func pyValue(dec *json.Decoder, b *strings.Builder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		closing := json.Delim('}')
		if t == '[' {
			closing = ']'
		}
		b.WriteByte(byte(t))
		for i := 0; dec.More(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				pyString(b, k.(string))
				b.WriteString(": ")
			}
			if err := pyValue(dec, b); err != nil {
				return err
			}
		}
		end, err := dec.Token()
		if err != nil || end != closing {
			return fmt.Errorf("unbalanced JSON")
		}
		b.WriteByte(byte(closing))
	case string:
		pyString(b, t)
	case json.Number:
		b.WriteString(pyNumber(string(t)))
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case nil:
		b.WriteString("null")
	}
	return nil
}

// pyNumber writes a JSON number as Python prints what json.loads made of
// it: an integer as itself, anything else as the float's repr.
func pyNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		return strings.TrimPrefix(s, "+")
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !math.IsInf(f, 0):
		return s
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if f != 0 && (exp < -4 || exp >= 16) {
		return e // 1e-05, 1.5e+16: Python's layout too
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(out, '.') {
		out += ".0"
	}
	return out
}

// pyString writes s as a JSON string the way Python's json module does
// with ensure_ascii=False.
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
