package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, nil, wrong()
	}
	if len(elems) == 0 {
		return nil, nil, empty()
	}
	// The first element says which list shape this is; a null one cannot.
	switch jsonKind(elems[0]) {
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
		ids, e := tokenIDs("prompt", raw)
		if e != nil {
			return nil, nil, e
		}
		return nil, [][]int{ids}, nil
	case "an array":
		lists := make([][]int, len(elems))
		for i, el := range elems {
			if jsonKind(el) != "an array" {
				return nil, nil, mixed()
			}
			var e *apiError
			if lists[i], e = tokenIDs(fmt.Sprintf("prompt[%d]", i), el); e != nil {
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

// tokenIDs decodes one prompt given as a JSON array of token ids; path names
// it in messages. The ids are range-checked later, against the vocabulary.
func tokenIDs(path string, raw json.RawMessage) ([]int, *apiError) {
	var ptrs []*int
	if err := unmarshalWholeNumbers(raw, &ptrs); err != nil {
		got := err.Error() // not expected: raw is valid JSON already
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			got = te.Value
		}
		return nil, badRequest("prompt", "invalid_type", "%s: token ids must be integers, got %s", path, got)
	}
	return notNull("prompt", path, ptrs)
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
