package toolcall

import "testing"

// FuzzParsers: any model output, split anywhere, parses without a panic;
// its stream pieces come in order (a name starts each call, arguments
// follow it), and a stream of whole calls puts together to the calls.
func FuzzParsers(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.text, uint(len(c.text)/2))
	}
	f.Add("<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": 2.0}]}}</tool_call>", uint(30))
	f.Add("<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1, oops}}</tool_call>", uint(40))
	f.Fuzz(func(t *testing.T, text string, cut uint) {
		cut %= uint(len(text) + 1)
		for _, name := range Names {
			newP, _ := New(name)
			d := feedAll(newP(), text[:cut], text[cut:])
			if len(d.Pieces) > 0 && assemble(d.Pieces) == nil {
				t.Fatalf("%s: pieces out of order: %+v", name, d.Pieces)
			}
		}
	})
}
