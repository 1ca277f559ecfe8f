package workload

import (
	"math"
	"strings"
	"testing"
)

func TestPyFloatRepr(t *testing.T) {
	// Expected values printed by CPython 3.11: json.dumps(float).
	tests := []struct {
		in   float64
		want string
	}{
		{0.0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1.0, "1.0"},
		{0.5, "0.5"},
		{0.1, "0.1"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{123456789012345.6, "123456789012345.6"},
		{1.5e-5, "1.5e-05"},
		{0.0001, "0.0001"},
		{0.00012, "0.00012"},
		{1e-7, "1e-07"},
		{2.5e300, "2.5e+300"},
		{1e22, "1e+22"},
		{3.14159, "3.14159"},
		{100.0, "100.0"},
		{9999999999999998.0, "9999999999999998.0"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{0.7, "0.7"},
		{math.Inf(1), "Infinity"},
	}
	for _, tc := range tests {
		if got := pyFloatRepr(tc.in); got != tc.want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAppendPyJSON(t *testing.T) {
	v, err := decodeJSON([]byte(`{"c":[1,{"x":"é\u2028😀\u007f\u0000<>&/\"\\\n\t\b\f\r"}],"b":[],"a":{},"n":2.50,"big":123456789012345678901234567890,"e":1E2,"t":true,"z":null}`))
	if err != nil {
		t.Fatal(err)
	}
	// Printed by CPython 3.11: json.dumps(json.loads(same), indent=2, sort_keys=True).
	want := `{
  "a": {},
  "b": [],
  "big": 123456789012345678901234567890,
  "c": [
    1,
    {
      "x": "\u00e9\u2028\ud83d\ude00\u007f\u0000<>&/\"\\\n\t\b\f\r"
    }
  ],
  "e": 100.0,
  "n": 2.5,
  "t": true,
  "z": null
}`
	got, err := appendPyJSON(nil, v, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	compact, err := appendPyJSON(nil, map[string]any{"b": "x", "a": []any{1, 2.0}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(compact) != `{"a":[1,2.0],"b":"x"}` {
		t.Fatalf("compact = %s", compact)
	}
}

func TestPyEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"x": 4}`, `{"x": 4.0}`, true}, // Python: 4 == 4.0
		{`{"x": 4}`, `{"x": 5}`, false},
		{`{"x": [1, "a"]}`, `{"x": [1, "a"]}`, true},
		{`{"x": [1, "a"]}`, `{"x": ["a", 1]}`, false},
		{`{"x": 1}`, `{"x": 1, "y": 2}`, false},
		{`{"x": "1"}`, `{"x": 1}`, false},
		{`{"x": null}`, `{"x": false}`, false},
		{`{"x": 0.1}`, `{"x": 1e-1}`, true},
	}
	for _, tc := range tests {
		a, err := decodeJSON([]byte(tc.a))
		if err != nil {
			t.Fatal(err)
		}
		b, err := decodeJSON([]byte(tc.b))
		if err != nil {
			t.Fatal(err)
		}
		if got := pyEqual(a, b); got != tc.want {
			t.Errorf("pyEqual(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestDecodeJSONTrailingData: junk after the JSON value is refused, as
// Python's json.loads refuses it ("Extra data"); trailing whitespace is not
// junk. Before the fix only a second valid token was noticed: `{} xyz`,
// `[1]]` and `{} "x` were silently accepted.
func TestDecodeJSONTrailingData(t *testing.T) {
	for _, in := range []string{
		`{"a":1} xyz`, `[1]]`, `{"a":1}}`, `{"a":1} 2`, `{"a":1} "x`, `{"a":1},`,
		`{"a":1} :`, "{\"a\":1}\x00", `{"a":1} {"b":2}`, `1 x`, `"s"]`,
	} {
		if v, err := decodeJSON([]byte(in)); err == nil {
			t.Errorf("decodeJSON(%q) = %v, want an error", in, v)
		} else if !strings.Contains(err.Error(), "after the JSON value") {
			t.Errorf("decodeJSON(%q) err = %v, want it to name the data after the value", in, err)
		}
	}
	for _, in := range []string{`{"a":1}`, "{\"a\":1} \t\r\n", " [1] ", "2\n"} {
		if _, err := decodeJSON([]byte(in)); err != nil {
			t.Errorf("decodeJSON(%q): %v", in, err)
		}
	}
	// The callers say where: ParseConfig and ParseRows refuse it too.
	if _, err := ParseConfig([]byte(validConfig + " xyz")); err == nil {
		t.Error("ParseConfig accepted junk after the object")
	}
	row := `{"bucket":"a","id":"x","prompt":"p","workload":"w","prompt_tokens":1,"target_output_tokens":1,"target_prompt_tokens":1}`
	if _, err := ParseRows([]byte(row + "\n")); err != nil {
		t.Fatalf("ParseRows(valid row): %v", err)
	}
	if _, err := ParseRows([]byte(row + "}\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("ParseRows(row with junk) err = %v, want a line 1 error", err)
	}
}
