package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// parsePrompt accepts the four prompt shapes of the completions API. Token
// ids are range-checked later, against the vocabulary.
func parsePrompt(raw json.RawMessage) ([]string, [][]int, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, badRequest("prompt", "missing_required_parameter", "prompt is required")
	}
	// The errors are built only when needed: this runs on every request.
	empty := func() *apiError { return badRequest("prompt", "invalid_value", "prompt must not be empty") }
	wrong := func() *apiError {
		return badRequest("prompt", "invalid_type", "prompt must be %s, got %s", promptShapes, jsonKind(raw))
	}
	mixed := func() *apiError {
		return badRequest("prompt", "invalid_type", "prompt must be %s; its elements must all be of one kind", promptShapes)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, wrong()
		}
		if s == "" {
			return nil, nil, empty()
		}
		return []string{s}, nil, nil
	case '[':
	default:
		return nil, nil, wrong()
	}
	// The first element says which list shape this is; a null one cannot.
	// It is read from the bytes: splitting a list of a million token ids
	// into a million raw elements first would cost a hundred times the
	// body in memory.
	first := skipSpace(raw, 1)
	if first >= len(raw) {
		return nil, nil, wrong()
	}
	if raw[first] == ']' {
		return nil, nil, empty()
	}
	switch jsonKind(raw[first:]) {
	case "a string":
		var ptrs []*string
		if err := json.Unmarshal(raw, &ptrs); err != nil {
			return nil, nil, mixed()
		}
		texts, e := notNull("prompt", "prompt", ptrs)
		if e != nil {
			return nil, nil, e
		}
		if slices.Contains(texts, "") {
			return nil, nil, empty()
		}
		return texts, nil, nil
	case "a number":
		ids, e := tokenIDs("prompt", "prompt", raw)
		if e != nil {
			return nil, nil, e
		}
		return nil, [][]int{ids}, nil
	case "an array":
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, nil, wrong()
		}
		lists := make([][]int, len(elems))
		for i, el := range elems {
			if jsonKind(el) != "an array" {
				return nil, nil, mixed()
			}
			var e *apiError
			if lists[i], e = tokenIDs("prompt", fmt.Sprintf("prompt[%d]", i), el); e != nil {
				return nil, nil, e
			}
			if len(lists[i]) == 0 {
				return nil, nil, empty()
			}
		}
		return nil, lists, nil
	case "null":
		return nil, nil, badRequest("prompt", "invalid_type", "prompt: the element at index 0 must be a string, a token id or an array of token ids, not null")
	}
	return nil, nil, wrong()
}

// tokenIDs reads one prompt given as a JSON array of token ids, for the
// request field param; path names it in messages. The ids are range-checked later, against the vocabulary.
// raw is valid JSON (the body decoded), and is scanned here rather than
// decoded into []*int: encoding/json took 400 MB and a second of CPU for a
// 4 MiB body of ids, a pointer and an allocation per id. As the decoder
// would, it refuses the first element that is not a number (or a number
// that is not an integer) before any null; whole numbers written as 1.0 or
// 1e3 are integers, as in unmarshalWholeNumbers.
func tokenIDs(param, path string, raw []byte) ([]int, *apiError) {
	typeErr := func(got string) *apiError {
		return badRequest(param, "invalid_type", "%s: token ids must be integers, got %s", path, shorten(got))
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, typeErr(strings.TrimPrefix(strings.TrimPrefix(jsonKind(raw), "an "), "a "))
	}
	// One id per comma and one more, at most: a single allocation.
	ids := make([]int, 0, bytes.Count(raw, []byte(","))+1)
	firstNull := -1
	if i = skipSpace(raw, i+1); raw[i] == ']' {
		return ids, nil
	}
	for n := 0; ; n++ {
		i = skipSpace(raw, i)
		var end int // just past the element
		switch c := raw[i]; {
		case c == 'n':
			if firstNull < 0 {
				firstNull = n
			}
			ids = append(ids, 0)
			end = i + len("null")
		case c == '-' || '0' <= c && c <= '9':
			end = numberEnd(raw, i)
			v, ok := intBytes(raw[i:end])
			if !ok {
				return nil, typeErr("number " + string(raw[i:end]))
			}
			ids = append(ids, v)
		case c == '"':
			return nil, typeErr("string")
		case c == '[':
			return nil, typeErr("array")
		case c == '{':
			return nil, typeErr("object")
		default: // true, false
			return nil, typeErr("bool")
		}
		if i = skipSpace(raw, end); raw[i] == ']' {
			break
		}
		i++ // the comma
	}
	if firstNull >= 0 {
		return nil, badRequest(param, "invalid_type", "%s: the element at index %d must be an integer, not null", path, firstNull)
	}
	return ids, nil
}

// intBytes reads a JSON number literal as an int, without allocating for
// the plain integers of up to 18 digits that token ids are; others go
// through intLiteral.
func intBytes(b []byte) (int, bool) {
	digits := b
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return intLiteral(string(b))
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return intLiteral(string(b))
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(b) {
		v = -v
	}
	if int64(int(v)) != v {
		return 0, false // beyond a 32-bit int
	}
	return int(v), true
}

// intLiteral reads a JSON number literal as an int: a plain integer, or a
// whole number written with a fraction or an exponent (wholeInt64).
func intLiteral(lit string) (int, bool) {
	if strings.ContainsAny(lit, ".eE") {
		w, ok := wholeInt64(lit)
		if !ok {
			return 0, false
		}
		lit = w
	}
	v, err := strconv.ParseInt(lit, 10, 0)
	return int(v), err == nil
}

// skipSpace returns the index of the first byte of raw at or after i that
// is not JSON whitespace, or len(raw).
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// parseStop accepts a string or an array of strings (null means none).
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("stop", "invalid_type", "stop must be a string or an array of strings")
		}
		return []string{s}, nil
	}
	var list []*string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or an array of strings, got %s", jsonKind(raw))
	}
	return notNull("stop", "stop", list)
}
