package toolcall

import (
	"reflect"
	"strings"
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
		d.Pieces = append(d.Pieces, x.Pieces...)
	}
	f := p.Finish()
	d.Content += f.Content
	d.Calls = append(d.Calls, f.Calls...)
	d.Pieces = append(d.Pieces, f.Pieces...)
	return d
}

// sameDelta compares content and calls, and checks that a's stream
// pieces put together give a's calls.
func sameDelta(a, b Delta) bool {
	return a.Content == b.Content && (len(a.Calls) == 0 && len(b.Calls) == 0 || reflect.DeepEqual(a.Calls, b.Calls)) &&
		(len(a.Calls) == 0 && len(a.Pieces) == 0 || reflect.DeepEqual(assemble(a.Pieces), a.Calls))
}

// assemble puts stream pieces together as a client does: a piece with a
// name starts call Index, the others append to its arguments. It returns
// nil if a piece comes out of order.
func assemble(pieces []Piece) []Call {
	var calls []Call
	for _, p := range pieces {
		switch {
		case p.Name != "" && p.Index == len(calls) && p.Arguments == "":
			calls = append(calls, Call{Name: p.Name})
		case p.Name == "" && p.Index == len(calls)-1 && p.Arguments != "":
			calls[p.Index].Arguments += p.Arguments
		default:
			return nil
		}
	}
	return calls
}

// TestHermesStreamsArguments: a call's arguments stream in pieces as the
// model writes them (the name first), in Python's layout whatever layout
// the model used, and the pieces joined are the call's arguments at every
// split of the text.
func TestHermesStreamsArguments(t *testing.T) {
	newP, _ := New("hermes")
	text := "<tool_call>\n{\"name\":\"search\",\"arguments\":{\"query\":\"caf\\u00e9 <b>\",\"limit\":10,\"ratio\":1.50,\"tags\":[\"a\",{\"x\":null}],\"deep\":{\"ok\":true,\"e\":1e5}}}\n</tool_call>"
	want := `{"query": "café <b>", "limit": 10, "ratio": 1.5, "tags": ["a", {"x": null}], "deep": {"ok": true, "e": 100000.0}}`
	p := newP()
	var pieces []Piece
	argPieces := 0
	for i := range len(text) {
		d := p.Feed(text[i : i+1])
		for _, x := range d.Pieces {
			if x.Arguments != "" {
				argPieces++
			}
			if x.Name != "" && argPieces > 0 {
				t.Fatalf("the name came after arguments")
			}
		}
		pieces = append(pieces, d.Pieces...)
		if i == strings.Index(text, `"limit"`) {
			if calls := assemble(pieces); len(calls) != 1 || calls[0].Name != "search" || !strings.HasPrefix(want, calls[0].Arguments) || calls[0].Arguments == "" {
				t.Fatalf("mid-call: %+v", calls)
			}
		}
	}
	pieces = append(pieces, p.Finish().Pieces...)
	calls := assemble(pieces)
	if len(calls) != 1 || calls[0].Arguments != want {
		t.Fatalf("got %+v, want arguments %s", calls, want)
	}
	if argPieces < 10 {
		t.Errorf("arguments came in %d pieces: not streamed", argPieces)
	}
	for _, bad := range []string{
		"<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"late\"}</tool_call>",                         // name after the arguments
		"<tool_call>{\"name\": \"s\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",                    // arguments as a string
		"<tool_call>{\"name\": {\"x\": 1}, \"name\": \"n\", \"arguments\": {\"a\": [1, 2]}}</tool_call>", // an odd name first
	} {
		for cut := 0; cut <= len(bad); cut++ {
			if got := feedAll(newP(), bad[:cut], bad[cut:]); len(got.Calls) != 1 || !reflect.DeepEqual(assemble(got.Pieces), got.Calls) {
				t.Fatalf("%s split at %d: calls %+v, pieces %+v", bad, cut, got.Calls, got.Pieces)
			}
		}
	}
}

// TestPyPrefix: every prefix of a JSON object's text gives a prefix of
// its Python layout, growing with the text, and the whole text all of it.
func TestPyPrefix(t *testing.T) {
	for _, raw := range []string{
		`{"a": 1, "b": [1, 2.50, "x"], "c": {"d": {}}, "e": [], "f": "\"q\"", "g": -0.0, "h": false}`,
		`{ "k" :  [ { } , [ ] , 3e2 ] }`, `{}`,
	} {
		whole, err := chat.Dumps([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		last := ""
		for n := 0; n <= len(raw); n++ {
			got := pyPrefix(raw[:n])
			if !strings.HasPrefix(whole, got) || !strings.HasPrefix(got, last) {
				t.Fatalf("%s[:%d]: %q (before %q), not a growing prefix of %q", raw, n, got, last, whole)
			}
			last = got
		}
		if last != whole {
			t.Errorf("%s: whole text gives %q, want %q", raw, last, whole)
		}
	}
}
