package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Values inside the interpreter are Go values standing for Python's:
//
//	nil            None
//	bool           bool
//	int64          int
//	bigInt         an int beyond int64 (kept exactly for printing and tojson)
//	float64        float
//	string         str
//	[]any          list
//	tuple          tuple
//	*dict          dict (insertion ordered, string keys)
//	*undefined     jinja2.Undefined
//	*namespace     jinja2.utils.Namespace
//	*loopContext   jinja2.runtime.LoopContext
//	*macro         jinja2.runtime.Macro
//	*builtin       a global function or a bound method

type tuple []any

// bigInt is an integer literal of the input JSON that does not fit int64.
type bigInt struct{ s string }

// dict is an insertion-ordered mapping with string keys, as Python's dict
// holds what json.loads read.
type dict struct {
	keys []string
	m    map[string]any
}

func newDict(n int) *dict { return &dict{keys: make([]string, 0, n), m: make(map[string]any, n)} }

func (d *dict) get(k string) (any, bool) {
	v, ok := d.m[k]
	return v, ok
}

// set adds or replaces k; a replaced key keeps its place, as in Python.
func (d *dict) set(k string, v any) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// undefined is Jinja's default Undefined: empty when printed or iterated,
// false, and an error for anything else (arithmetic, calls, attributes).
type undefined struct {
	hint   string // the whole message, when set
	obj    any    // the object looked into, when hasObj
	hasObj bool
	name   any // the missing name, attribute or item
	unsafe bool
}

func undefinedName(name string) *undefined { return &undefined{name: name} }

func undefinedIn(obj, name any) *undefined { return &undefined{obj: obj, hasObj: true, name: name} }

// message is jinja2.Undefined._undefined_message.
func (u *undefined) message() string {
	if u.hint != "" {
		return u.hint
	}
	if !u.hasObj {
		return pyRepr(u.name) + " is undefined"
	}
	if _, ok := u.name.(string); !ok {
		return objectTypeRepr(u.obj) + " has no element " + pyRepr(u.name)
	}
	return pyRepr(objectTypeRepr(u.obj)) + " has no attribute " + pyRepr(u.name)
}

func (u *undefined) fail() error {
	if u.unsafe {
		return rtErr("SecurityError", "%s", u.message())
	}
	return rtErr("UndefinedError", "%s", u.message())
}

// namespace is the mutable object namespace() makes.
type namespace struct{ attrs *dict }

// typeName is Python's type(v).__name__.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, bigInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *dict:
		return "dict"
	case *undefined:
		return "Undefined"
	case *namespace:
		return "Namespace"
	case *loopContext:
		return "LoopContext"
	case *macro:
		return "Macro"
	case *builtin:
		return "builtin_function_or_method"
	}
	return fmt.Sprintf("%T", v)
}

// objectTypeRepr is jinja2.utils.object_type_repr.
func objectTypeRepr(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case *namespace:
		return "jinja2.utils.Namespace object"
	case *loopContext:
		return "jinja2.runtime.LoopContext object"
	case *macro:
		return "jinja2.runtime.Macro object"
	case *undefined:
		return "jinja2.runtime.Undefined object"
	}
	return typeName(v) + " object"
}

// truth is Python's bool(v).
func truth(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case bigInt:
		return true
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case tuple:
		return len(x) > 0
	case *dict:
		return len(x.keys) > 0
	case *undefined:
		return false
	}
	return true
}

// pyStr is Python's str(v), with Undefined printing as "".
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *undefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

// pyRepr is Python's repr(v).
func pyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

const maxReprDepth = 200

func writeRepr(b *strings.Builder, v any, depth int) {
	if depth > maxReprDepth {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case bigInt:
		b.WriteString(x.s)
	case float64:
		b.WriteString(floatRepr(x))
	case string:
		writeStrRepr(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1)
		}
		b.WriteByte(']')
	case tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, x.m[k], depth+1)
		}
		b.WriteByte('}')
	case *undefined:
		b.WriteString("Undefined")
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.attrs, depth+1)
		b.WriteByte('>')
	case *loopContext:
		fmt.Fprintf(b, "<LoopContext %d/%d>", x.index+1, len(x.items))
	case *macro:
		fmt.Fprintf(b, "<Macro '%s'>", x.node.name)
	case *builtin:
		fmt.Fprintf(b, "<built-in method %s>", x.name)
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

// writeStrRepr writes Python's repr of a str: single quotes unless the text
// has one and no double quote, escapes for what is not printable.
func writeStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}

// floatRepr is Python's repr of a float.
func floatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if f != 0 && (exp < -4 || exp >= 16) {
		return e // 1e-05, 1.5e+16: Python's layout too
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(out, ".") {
		out += ".0"
	}
	return out
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0,
		0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// decodeJSON reads one JSON value as the interpreter's values, keeping
// object key order as json.loads does.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

const maxJSONDepth = 10000

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		case '{':
			d := newDict(4)
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.set(k.(string), v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return d, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return numberValue(string(t)), nil
	default:
		return t, nil // string, bool, nil
	}
}

// numberValue is what json.loads makes of a number's text: an int without
// '.', 'e' or 'E', a float otherwise.
func numberValue(s string) any {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		if n, ok := new(big.Int).SetString(s, 10); ok {
			return bigInt{n.String()}
		}
	}
	f, _ := strconv.ParseFloat(s, 64) // out of range gives ±Inf, as Python
	return f
}

// fromGo turns a variable given to Render into an interpreter value.
func fromGo(v any, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("value nested too deeply")
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		return numberValue(string(x)), nil
	case json.RawMessage:
		if len(bytes.TrimSpace(x)) == 0 {
			return nil, nil
		}
		return decodeJSON(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := fromGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := newDict(len(keys))
		for _, k := range keys {
			c, err := fromGo(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.set(k, c)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}
