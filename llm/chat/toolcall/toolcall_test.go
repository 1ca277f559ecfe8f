package toolcall

import (
	"reflect"
	"testing"

	"github.com/tinyserve/tinyserve/llm/chat"
)

// TestDumps: chat.Dumps, which writes call arguments; the expected text is what Python 3.11's
// json.dumps(json.loads(in), ensure_ascii=False) printed for the input.
func TestDumps(t *testing.T) {
	in := `{"a": 1, "b": 2.0, "c": 1e5, "d": 1.50, "e": 0.00001, "f": 1e16, "g": -0.0, "h": "é\u2028<>&/\u0001\t", "i": [true, null, {}], "j": 123456789012345678901234567890, "k": 1E-7, "l": 0.1, "m": 12345678901234567.0, "n": 0.0001, "o": 1e15}`
	want := "{\"a\": 1, \"b\": 2.0, \"c\": 100000.0, \"d\": 1.5, \"e\": 1e-05, \"f\": 1e+16, \"g\": -0.0, \"h\": \"é\u2028<>&/\\u0001\\t\", \"i\": [true, null, {}], \"j\": 123456789012345678901234567890, \"k\": 1e-07, \"l\": 0.1, \"m\": 1.2345678901234568e+16, \"n\": 0.0001, \"o\": 1000000000000000.0}"
	got, err := chat.Dumps([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("PyDumps:\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"a":`, `{"a": 1} x`, ``} {
		if _, err := chat.Dumps([]byte(bad)); err == nil {
			t.Errorf("chat.Dumps(%q): no error", bad)
		}
	}
}

type parseCase struct {
	name, parser, text string
	want               Delta
}

var parseCases = []parseCase{
	{"hermes: one call after content", "hermes",
		"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
		Delta{Content: "Let me check.\n", Calls: []Call{{"get_weather", `{"city": "Paris", "days": 2}`}}}},
	{"hermes: two calls, string arguments", "hermes",
		"<tool_call>\n{\"name\": \"a\", \"arguments\": \"{\\\"x\\\":1.0}\"}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
		Delta{Calls: []Call{{"a", `{"x": 1.0}`}, {"b", `{}`}}}},
	{"hermes: plain text", "hermes", "No tools needed: 2 < 3 and <tool is not a tag.", Delta{Content: "No tools needed: 2 < 3 and <tool is not a tag."}},
	{"hermes: unclosed call still parses", "hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"日本\"}}", Delta{Calls: []Call{{"f", `{"q": "日本"}`}}}},
	{"llama3_json: one call", "llama3_json", `{"name": "get_weather", "parameters": {"city": "Paris"}}`,
		Delta{Calls: []Call{{"get_weather", `{"city": "Paris"}`}}}},
	{"llama3_json: python tag, two calls", "llama3_json", `<|python_tag|>{"name": "a", "parameters": {"n": 1}}; {"name": "b", "arguments": {"s": "x;y"}}`,
		Delta{Calls: []Call{{"a", `{"n": 1}`}, {"b", `{"s": "x;y"}`}}}},
	{"llama3_json: content", "llama3_json", "The weather is fine {really}.", Delta{Content: "The weather is fine {really}."}},
	{"llama3_json: malformed stays content", "llama3_json", `{"name": "a", "parameters": {"n": 1}`, Delta{Content: `{"name": "a", "parameters": {"n": 1}`}},
	{"llama3_json: no name stays content", "llama3_json", `{"result": 4}`, Delta{Content: `{"result": 4}`}},
}

// TestParse: whole outputs, and the same outputs fed in two pieces split
// at every byte and one byte at a time, give the same content and calls.
func TestParse(t *testing.T) {
	for _, c := range parseCases {
		newP, err := New(c.parser)
		if err != nil {
			t.Fatal(err)
		}
		if got := Parse(newP, c.text); !sameDelta(got, c.want) {
			t.Errorf("%s: whole:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		for cut := 0; cut <= len(c.text); cut++ {
			if got := feedAll(newP(), c.text[:cut], c.text[cut:]); !sameDelta(got, c.want) {
				t.Fatalf("%s: split at %d:\n got %+v\nwant %+v", c.name, cut, got, c.want)
			}
		}
		pieces := make([]string, len(c.text))
		for i := 0; i < len(c.text); i++ {
			pieces[i] = c.text[i : i+1]
		}
		if got := feedAll(newP(), pieces...); !sameDelta(got, c.want) {
			t.Errorf("%s: byte by byte:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestHermesMalformedFallsBack: a call that does not parse is not a call:
// the text before it stays content, and nothing fails.
func TestHermesMalformedFallsBack(t *testing.T) {
	newP, _ := New("hermes")
	got := Parse(newP, "Hi <tool_call>{not json}</tool_call>")
	if got.Content != "Hi " || len(got.Calls) != 0 {
		t.Errorf("got %+v", got)
	}
	if _, err := New("mistral"); err == nil {
		t.Error("an unknown parser name is accepted")
	}
}

func feedAll(p Parser, pieces ...string) Delta {
	var d Delta
	for _, s := range pieces {
		x := p.Feed(s)
		d.Content += x.Content
		d.Calls = append(d.Calls, x.Calls...)
	}
	f := p.Finish()
	d.Content += f.Content
	d.Calls = append(d.Calls, f.Calls...)
	return d
}

func sameDelta(a, b Delta) bool {
	return a.Content == b.Content && (len(a.Calls) == 0 && len(b.Calls) == 0 || reflect.DeepEqual(a.Calls, b.Calls))
}
