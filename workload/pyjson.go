package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// The prompt files and sidecars must be byte-identical to what Python's json
// module writes (serving-inference's generate_prompts.py), so this file
// re-implements that output format for the JSON values encoding/json decodes
// with UseNumber: map[string]any, []any, string, json.Number, bool and nil.
//
// What Python does, and Go's encoding/json does not:
//   - ensure_ascii: every character outside ' '..'~' is written as \uXXXX
//     (lower-case hex, UTF-16 surrogate pairs above U+FFFF), except \n, \r,
//     \t, \b, \f, which have short escapes; '<', '>', '&' are not escaped.
//   - numbers keep Python's types: 32 stays 32, 0.0 stays 0.0 (a float is
//     written with repr(), always with a '.' or an exponent).
//   - sort_keys with indent=2 uses ", " nowhere: items end with "," and a
//     newline, keys with ": ".

// decodeJSON parses data the way Python's json.loads would see it: numbers
// stay json.Number so ints and floats keep their identity.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// Only JSON whitespace may follow the value, as json.loads says "Extra
	// data" otherwise. Asking dec.Token() for a next token is not enough: it
	// errors on junk such as `xyz` or a stray `]`, and an error there was
	// taken for "nothing more", so `{...} xyz` was accepted.
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("unexpected data after the JSON value at offset %d: %q", len(data)-len(rest), head(rest, 16))
	}
	return v, nil
}

// head returns at most the first n bytes of b, for error messages.
func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// isPyFloat reports whether Python's json module reads this number as a
// float (it has a fraction or an exponent) rather than an int.
func isPyFloat(n json.Number) bool {
	return strings.ContainsAny(string(n), ".eE")
}

// appendPyString writes s as json.dumps(s) with ensure_ascii=True.
func appendPyString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r >= ' ' && r <= '~':
			dst = append(dst, byte(r))
		default:
			units := []rune{r}
			if r > 0xFFFF {
				r -= 0x10000
				units = []rune{0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF}
			}
			for _, u := range units {
				dst = append(dst, '\\', 'u', hex[u>>12&0xF], hex[u>>8&0xF], hex[u>>4&0xF], hex[u&0xF])
			}
		}
	}
	return append(dst, '"')
}

// pyFloatRepr formats f as Python's repr(float) (and so json.dumps) does:
// the shortest round-tripping digits, positional notation for exponents
// -4..15 (always with a fractional part, so 0.0 and 2048.0), scientific
// notation otherwise with a signed two-digit-minimum exponent (1e+16, 1e-05).
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	sign := ""
	if math.Signbit(f) {
		sign = "-"
		f = -f
	}
	if f == 0 {
		return sign + "0.0"
	}
	// "d.ddddde±XX": the shortest digits and the decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	if exp >= -4 && exp < 16 {
		if exp < 0 {
			return sign + "0." + strings.Repeat("0", -exp-1) + digits
		}
		if len(digits) <= exp+1 {
			return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
		}
		return sign + digits[:exp+1] + "." + digits[exp+1:]
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}

// appendPyNumber writes a decoded number as Python would after reading it.
func appendPyNumber(dst []byte, n json.Number) ([]byte, error) {
	if isPyFloat(n) {
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil && !math.IsInf(f, 0) { // Python reads 1e400 as inf
			return nil, fmt.Errorf("bad number %q", n)
		}
		return append(dst, pyFloatRepr(f)...), nil
	}
	i, ok := new(big.Int).SetString(string(n), 10)
	if !ok {
		return nil, fmt.Errorf("bad number %q", n)
	}
	return i.Append(dst, 10), nil
}

// appendPyJSON writes v as json.dumps(v, sort_keys=True, ...) does: with
// indent > 0 as indent=indent (pretty, separators "," and ": "), with
// indent == 0 compact with separators "," and ":".
func appendPyJSON(dst []byte, v any, indent, level int) ([]byte, error) {
	newline := func(dst []byte, level int) []byte {
		if indent == 0 {
			return dst
		}
		dst = append(dst, '\n')
		return append(dst, strings.Repeat(" ", indent*level)...)
	}
	var err error
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendPyString(dst, x), nil
	case json.Number:
		return appendPyNumber(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float64:
		return append(dst, pyFloatRepr(x)...), nil
	case []any:
		if len(x) == 0 {
			return append(dst, "[]"...), nil
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, level+1)
			if dst, err = appendPyJSON(dst, e, indent, level+1); err != nil {
				return nil, err
			}
		}
		dst = newline(dst, level)
		return append(dst, ']'), nil
	case map[string]any:
		if len(x) == 0 {
			return append(dst, "{}"...), nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// Python sorts str keys by code point; UTF-8 byte order is the same.
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, level+1)
			dst = appendPyString(dst, k)
			dst = append(dst, ':')
			if indent > 0 {
				dst = append(dst, ' ')
			}
			if dst, err = appendPyJSON(dst, x[k], indent, level+1); err != nil {
				return nil, err
			}
		}
		dst = newline(dst, level)
		return append(dst, '}'), nil
	default:
		return nil, fmt.Errorf("cannot write %T as JSON", v)
	}
}

// pyEqual compares two decoded JSON values the way Python's == compares what
// json.loads returned: numbers by value (so 4 == 4.0), containers deeply.
func pyEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numbersEqual(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !pyEqual(xv, yv) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

func numbersEqual(a, b json.Number) bool {
	if !isPyFloat(a) && !isPyFloat(b) {
		x, okX := new(big.Int).SetString(string(a), 10)
		y, okY := new(big.Int).SetString(string(b), 10)
		return okX && okY && x.Cmp(y) == 0
	}
	x, errX := strconv.ParseFloat(string(a), 64)
	y, errY := strconv.ParseFloat(string(b), 64)
	return (errX == nil || math.IsInf(x, 0)) && (errY == nil || math.IsInf(y, 0)) && x == y
}
