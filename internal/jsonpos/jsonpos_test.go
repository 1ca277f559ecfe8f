package jsonpos

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestLocate(t *testing.T) {
	for _, tc := range []struct {
		data      string
		line, col int
	}{
		{"{\n  \"a\": 1,\n  \"b\": 2,\n}", 4, 1},       // trailing comma: the error is at the brace
		{"{\"a\": 1 \"b\": 2}", 1, 9},                  // missing comma
		{"{\n\t\"concurrency\": [1, 2,, 4]\n}", 2, 23}, // doubled comma, after a tab
		{"{\"a\": ", 1, 6},                             // unexpected end
	} {
		var v any
		err := json.Unmarshal([]byte(tc.data), &v)
		line, col, ok := Locate([]byte(tc.data), err)
		if !ok || line != tc.line || col != tc.col {
			t.Errorf("%q: got line %d col %d ok %v, want %d:%d (%v)", tc.data, line, col, ok, tc.line, tc.col, err)
		}
	}
	if _, _, ok := Locate(nil, errors.New("not JSON's")); ok {
		t.Error("an error without an offset was located")
	}
}

func TestWrap(t *testing.T) {
	data := []byte("{\n  \"x\": tru\n}")
	var v any
	err := Wrap("c.json", data, json.Unmarshal(data, &v))
	if err == nil || !strings.HasPrefix(err.Error(), "c.json:2:") {
		t.Fatalf("got %v, want c.json:2:<col>: ...", err)
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Error("the syntax error is not kept in the chain")
	}
	if Wrap("c.json", data, nil) != nil {
		t.Error("Wrap of nil is not nil")
	}
	if got := Wrap("c.json", data, errors.New("boom")).Error(); got != "c.json: boom" {
		t.Errorf("got %q", got)
	}
}
