package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// jsonOpts are json.dumps's arguments that Hugging Face's tojson exposes.
type jsonOpts struct {
	ensureASCII bool
	sortKeys    bool
	indented    bool   // indent is not None
	indent      string // one level
	itemSep     string
	keySep      string
}

// jsonWriter writes a value as Python's json.dumps does.
type jsonWriter struct {
	opts  jsonOpts
	b     *strings.Builder
	limit int
}

func (w *jsonWriter) newline(level int) error {
	if !w.opts.indented {
		return nil
	}
	if w.b.Len()+1+level*len(w.opts.indent) > w.limit {
		return limitErr("tojson output grew beyond %d bytes", w.limit)
	}
	w.b.WriteByte('\n')
	for i := 0; i < level; i++ {
		w.b.WriteString(w.opts.indent)
	}
	return nil
}

func (w *jsonWriter) value(v any, level int) error {
	if level > maxReprDepth {
		return limitErr("tojson: value nested deeper than %d", maxReprDepth)
	}
	if w.b.Len() > w.limit {
		return limitErr("tojson output grew beyond %d bytes", w.limit)
	}
	switch x := v.(type) {
	case nil:
		w.b.WriteString("null")
	case bool:
		if x {
			w.b.WriteString("true")
		} else {
			w.b.WriteString("false")
		}
	case int64:
		w.b.WriteString(strconv.FormatInt(x, 10))
	case bigInt:
		w.b.WriteString(x.s)
	case float64:
		switch {
		case math.IsNaN(x):
			w.b.WriteString("NaN")
		case math.IsInf(x, 1):
			w.b.WriteString("Infinity")
		case math.IsInf(x, -1):
			w.b.WriteString("-Infinity")
		default:
			w.b.WriteString(floatRepr(x))
		}
	case string:
		w.str(x)
	case []any:
		return w.list(x, level)
	case tuple:
		return w.list(x, level)
	case *dict:
		if len(x.keys) == 0 {
			w.b.WriteString("{}")
			return nil
		}
		keys := x.keys
		if w.opts.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		w.b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.b.WriteString(w.opts.itemSep)
			}
			if err := w.newline(level + 1); err != nil {
				return err
			}
			w.str(k)
			w.b.WriteString(w.opts.keySep)
			if err := w.value(x.m[k], level+1); err != nil {
				return err
			}
		}
		if err := w.newline(level); err != nil {
			return err
		}
		w.b.WriteByte('}')
	default:
		return rtErr("TypeError", "Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func (w *jsonWriter) list(items []any, level int) error {
	if len(items) == 0 {
		w.b.WriteString("[]")
		return nil
	}
	w.b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			w.b.WriteString(w.opts.itemSep)
		}
		if err := w.newline(level + 1); err != nil {
			return err
		}
		if err := w.value(it, level+1); err != nil {
			return err
		}
	}
	if err := w.newline(level); err != nil {
		return err
	}
	w.b.WriteByte(']')
	return nil
}

// str writes s as a JSON string, as Python's json module does: with
// ensure_ascii every non-ASCII character as \uXXXX (surrogate pairs
// beyond the BMP), else only quotes, backslashes and control characters
// escaped.
func (w *jsonWriter) str(s string) {
	b := w.b
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
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case !w.opts.ensureASCII || r < 0x7f:
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			}
		}
	}
	b.WriteByte('"')
}

// Dumps re-writes the JSON value raw as Python's json.dumps(json.loads(raw),
// ensure_ascii=False) writes it: keys in their order, ", " and ": " between
// items, floats as Python's repr (2.0, 1e-05), non-ASCII text kept. vLLM's
// tool-call parsers write a call's arguments this way.
func Dumps(raw []byte) (string, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	w := &jsonWriter{opts: jsonOpts{itemSep: ", ", keySep: ": "}, b: &b, limit: DefaultLimits.MaxOutput}
	if err := w.value(v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}
