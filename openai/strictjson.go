package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// decodeStrict decodes a JSON object into dst, rejecting unknown fields (all
// of them named, sorted) and wrong types (with param set to the field).
func decodeStrict(body []byte, known func(string) bool, dst any) *apiError {
	_, e := decodeStrictFields(body, known, dst)
	return e
}

// decodeStrictFields is decodeStrict that also returns the object's fields
// as sent, for the rare field whose null means something else than its
// absence.
func decodeStrictFields(body []byte, known func(string) bool, dst any) (map[string]json.RawMessage, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		if !json.Valid(body) {
			return nil, badRequest("", "invalid_json", "request body is not valid JSON: %v", err)
		}
		return nil, badRequest("", "invalid_json", "request body must be a JSON object, got %s", jsonKind(body))
	}
	if fields == nil { // the body was JSON null
		return nil, badRequest("", "invalid_json", "request body must be a JSON object")
	}
	var unknown []string
	for k := range fields {
		if !known(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, u := range unknown {
			quoted[i] = fmt.Sprintf("%q", u)
		}
		return nil, badRequest(unknown[0], "unknown_field", "unknown field(s) %s: tinyserve does not support them", strings.Join(quoted, ", "))
	}
	if err := unmarshalWholeNumbers(body, dst); err != nil {
		return nil, typeError(err)
	}
	return fields, nil
}

// unmarshalWholeNumbers is json.Unmarshal, except that an integer field
// given a whole number in decimal or exponent form (10.0, 1e3) takes it,
// as vLLM's pydantic models do: Python clients that compute a max_tokens
// or token ids in floats send them so. 1.5 is still refused, and so is a
// whole number too large for an int64. The common case costs nothing: raw
// is rewritten (integralNumbers) and decoded again only after such a
// refusal.
func unmarshalWholeNumbers(raw []byte, dst any) error {
	err := json.Unmarshal(raw, dst)
	var te *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) || !isIntKind(te.Type) {
		return err
	}
	lit, ok := strings.CutPrefix(te.Value, "number ")
	if _, whole := wholeInt64(lit); !ok || !whole {
		return err
	}
	fixed, rerr := integralNumbers(raw)
	if rerr != nil {
		return err
	}
	v := reflect.ValueOf(dst).Elem()
	v.SetZero() // the failed pass may have filled some of it
	return json.Unmarshal(fixed, dst)
}

// isIntKind reports whether t, through its pointers, is an integer type.
func isIntKind(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// wholeInt64 reads a JSON number literal exactly and returns its value in
// plain integer form when it is a whole number that fits an int64. It works
// on the literal's digits, in time linear in its length: exact arithmetic
// (big.Rat) would build 1e999999 as a million-digit integer, 20 ms of CPU
// for 10 bytes of a body whose every number is read here.
func wholeInt64(lit string) (string, bool) {
	neg := strings.HasPrefix(lit, "-")
	mant, exp, hasExp := strings.Cut(strings.TrimPrefix(lit, "-"), "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(mant, "E")
	}
	intPart, frac, hasFrac := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || hasFrac && (frac == "" || !allDigits(frac)) {
		return "", false
	}
	// The value is digits times 10^e, digits without leading or trailing
	// zeros.
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0", true // -0.0 and 0e999 too
	}
	var e int64
	if hasExp {
		unsigned := strings.TrimLeft(exp, "+-")
		if unsigned == "" || len(exp)-len(unsigned) > 1 || !allDigits(unsigned) {
			return "", false
		}
		// Out of range, ParseInt gives the int64 of the sign's side;
		// clamped to ±2^40, beyond any length a literal can have, the sums
		// below cannot overflow and still say "not a whole int64".
		n, _ := strconv.ParseInt(exp, 10, 64)
		e = max(min(n, 1<<40), -1<<40)
	}
	trimmed := strings.TrimRight(digits, "0")
	e += int64(len(digits) - len(trimmed) - len(frac))
	if e < 0 || int64(len(trimmed))+e > 19 {
		return "", false // a fraction, or more than 19 digits
	}
	plain := trimmed + strings.Repeat("0", int(e))
	if neg {
		plain = "-" + plain
	}
	v, err := strconv.ParseInt(plain, 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(v, 10), true
}

// allDigits reports whether s is empty or only ASCII digits.
func allDigits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

// integralNumbers rewrites every number of the JSON value raw that is a
// whole int64 written with a fraction or an exponent as a plain integer,
// in place: every other byte is kept, so that the second decode sees the
// body's own order (the first wrong field is the one reported), its
// duplicate keys (an earlier one's wrong value still refused) and its
// strings as written. A re-encoding through map[string]any would lose the
// first two.
func integralNumbers(raw []byte) ([]byte, error) {
	if !json.Valid(raw) {
		return nil, errors.New("not valid JSON") // the scan below relies on it
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			j := i + 1
			for raw[j] != '"' {
				if raw[j] == '\\' {
					j++ // an escaped byte, a quote maybe; \uXXXX's are hex
				}
				j++
			}
			out = append(out, raw[i:j+1]...)
			i = j + 1
		case c == '-' || '0' <= c && c <= '9':
			j := numberEnd(raw, i)
			if s, ok := wholeInt64(string(raw[i:j])); ok {
				out = append(out, s...)
			} else {
				out = append(out, raw[i:j]...)
			}
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	return out, nil
}

// numberEnd returns the index just past the JSON number literal that
// starts at raw[i] (valid JSON: the literal is well formed).
func numberEnd(raw []byte, i int) int {
	j := i + 1
	for j < len(raw) && strings.IndexByte("0123456789.eE+-", raw[j]) >= 0 {
		j++
	}
	return j
}

// typeError turns an encoding/json error into a 400 naming the field.
func typeError(err error) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		param := te.Field
		if i := strings.IndexByte(param, '['); i >= 0 {
			param = param[:i]
		}
		if lit, ok := strings.CutPrefix(te.Value, "number "); ok && outOfRange(te.Type, lit) {
			return badRequest(param, "invalid_value", "%s: the number %s is out of range", param, shorten(lit))
		}
		return badRequest(param, "invalid_type", "%s: expected %s, got %s", param, typeName(te.Type), shorten(te.Value))
	}
	return badRequest("", "invalid_json", "request body is not valid JSON: %v", err)
}

// shorten cuts a value quoted from the request to 64 bytes: a number a
// megabyte long would otherwise come back whole in the error body and in
// the server's log line about it.
func shorten(v string) string {
	const most = 64
	if len(v) <= most {
		return v
	}
	return v[:most-3] + "..."
}

// outOfRange reports whether a JSON number that encoding/json could not
// store in t was refused for its size rather than its form, so that the
// message does not say "expected a number" of a number: any number for a
// float type (it overflowed), a plain integer for an integer type (1.5 and
// 1e3 are not integers in form and keep the type error).
func outOfRange(t reflect.Type, lit string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		digits := strings.TrimPrefix(lit, "-")
		return digits != "" && strings.Trim(digits, "0123456789") == ""
	}
	return false
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(typeName(t.Elem()), "an "), "a ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// notNull returns the values list points to, or a 400 naming param when an
// element is null. encoding/json leaves a null array element at its zero
// value, so decoding into []int would silently read [15496,null] as
// [15496,0]; every JSON list of the API is therefore decoded into []*T and
// passed through here. path is what the message names: param itself, or
// an inner list of it ("prompt[2]").
func notNull[T any](param, path string, list []*T) ([]T, *apiError) {
	if list == nil {
		return nil, nil
	}
	out := make([]T, len(list))
	for i, v := range list {
		if v == nil {
			// pydantic's sense, as vLLM reports it: the element, by index,
			// and what it should have been.
			return nil, badRequest(param, "invalid_type", "%s: the element at index %d must be %s, not null",
				path, i, typeName(reflect.TypeFor[T]()))
		}
		out[i] = *v
	}
	return out, nil
}

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
