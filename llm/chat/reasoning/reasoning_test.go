package reasoning

import "testing"

// TestQwen3: whole outputs and the same outputs split at every byte give
// the same reasoning and content.
func TestQwen3(t *testing.T) {
	newP, err := New("qwen3")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, reasoning, content string }{
		{"<think>\nLet me add.\n</think>\n\n4", "\nLet me add.\n", "\n\n4"},
		{"\n<think>a<b</think>c</think>", "a<b", "c</think>"},
		{"4, no thinking", "", "4, no thinking"},
		{"<thi", "", "<thi"},
		{"<think>unclosed", "unclosed", ""},
		{"", "", ""},
	} {
		r, ct := Parse(newP, c.text)
		if r != c.reasoning || ct != c.content {
			t.Errorf("%q: got (%q, %q), want (%q, %q)", c.text, r, ct, c.reasoning, c.content)
		}
		for cut := 0; cut <= len(c.text); cut++ {
			p := newP()
			r1, c1 := p.Feed(c.text[:cut])
			r2, c2 := p.Feed(c.text[cut:])
			r3, c3 := p.Finish()
			if r1+r2+r3 != c.reasoning || c1+c2+c3 != c.content {
				t.Fatalf("%q split at %d: got (%q, %q)", c.text, cut, r1+r2+r3, c1+c2+c3)
			}
		}
	}
	if _, err := New("deepseek_r1"); err == nil {
		t.Error("an unknown parser is accepted")
	}
}
