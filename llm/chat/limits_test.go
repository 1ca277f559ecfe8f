package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var oneMessage = json.RawMessage(`[{"role": "user", "content": "hi"}]`)

// TestLimits renders hostile templates: each must fail with ErrLimit, soon,
// without growing memory first. Those marked run with DefaultLimits, the
// others with a tenth of the steps (to keep the test short under -race).
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		defaults  bool
	}{
		{"nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", true},
		{"loop over a long list many times", "{% set l = range(100000)|list %}{% for i in range(100000) %}{{ 5 in l }}{% endfor %}", false},
		{"string doubling", "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}", true},
		{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", false},
		{"string repetition", "{{ 'x' * 10000000000 }}", false},
		{"list repetition", "{{ [1, 2] * 10000000000 }}", false},
		{"huge replace", "{% set s = 'a' * 100000 %}{{ s.replace('a', s) }}", false},
		{"huge indent", "{{ ('a\n' * 1000)|indent(100000) }}", false},
		{"huge tojson indent", "{{ [[[[1]]]]|tojson(indent=100000000) }}", false},
		{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", false},
		{"mutually recursive macros", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", false},
		{"wide recursion", "{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}", false},
		{"output", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", false},
		{"string methods on a big string", "{% set s = 'a,' * 1000000 %}{% for i in range(100000) %}{% set p = s.split(',') %}{% endfor %}", true},
		{"iterating a big string", "{% set s = 'ab' * 5000000 %}{% for c in s %}{% endfor %}", false},
		{"filters on a big list", "{% set l = range(100000)|list %}{% for i in range(100000) %}{% set m = l|map('string')|list %}{% endfor %}", false},
		{"unique quadratic", "{{ (range(100000)|list + range(100000)|list)|unique|list|length }}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.defaults {
				tmpl.Limits = Limits{MaxSteps: DefaultLimits.MaxSteps / 10}
			}
			start := time.Now()
			out, err := tmpl.Render(oneMessage, nil, nil)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("got %d bytes, error %v; want ErrLimit", len(out), err)
			}
			var re *RenderError
			if !errors.As(err, &re) || re.Type != "LimitError" {
				t.Fatalf("error %T %v, want a *RenderError of type LimitError", err, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestLimitsSettable(t *testing.T) {
	tmpl, err := Parse("{% for m in messages %}{{ m.content }}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[{"content": "0123456789"}, {"content": "0123456789"}]`)
	tmpl.Limits = Limits{MaxOutput: 15}
	if _, err := tmpl.Render(msgs, nil, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("MaxOutput 15: %v", err)
	}
	tmpl.Limits = Limits{MaxOutput: 20}
	if out, err := tmpl.Render(msgs, nil, nil); err != nil || len(out) != 20 {
		t.Fatalf("MaxOutput 20: %q %v", out, err)
	}
	tmpl.Limits = Limits{MaxSteps: 3}
	if _, err := tmpl.Render(msgs, nil, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("MaxSteps 3: %v", err)
	}
	deep, _ := Parse("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}.{% endmacro %}{{ f(d) }}")
	deep.Limits = Limits{MaxDepth: 10}
	if out, err := deep.Render(oneMessage, nil, map[string]any{"d": 9}); err != nil || out != ".........." {
		t.Fatalf("depth 9 of 10: %q %v", out, err)
	}
	if _, err := deep.Render(oneMessage, nil, map[string]any{"d": 10}); !errors.Is(err, ErrLimit) {
		t.Fatalf("depth 10 of 10: %v", err)
	}
}

// TestParseNesting: a template nested beyond what the parser takes fails
// to parse rather than exhausting the stack.
func TestParseNesting(t *testing.T) {
	for _, src := range []string{
		"{{ " + strings.Repeat("(", 20000) + "1" + strings.Repeat(")", 20000) + " }}",
		"{{ " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + " }}",
		"{{ " + strings.Repeat("not ", 20000) + "1 }}",
		"{{ " + strings.Repeat("-", 20000) + "1 }}",
		"{{ 1" + strings.Repeat(" + 1", 20000) + " }}",
		"{{ a" + strings.Repeat(".b", 20000) + " }}",
		"{{ a" + strings.Repeat("|trim", 20000) + " }}",
		strings.Repeat("{% if true %}", 20000) + strings.Repeat("{% endif %}", 20000),
	} {
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "nested too deeply") {
			t.Errorf("%.40s...: %v, want a nesting error", src, err)
		}
	}
	// Deep but reasonable nesting parses.
	if _, err := Parse("{{ " + strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100) + strings.Repeat(" + 1", 300) + " }}"); err != nil {
		t.Fatal(err)
	}
}

// TestSandbox: nothing beyond dict keys, list items and the whitelisted
// methods is reachable, and nothing given to the template can be changed.
func TestSandbox(t *testing.T) {
	for _, tc := range []struct{ src, want, errType string }{
		{"[{{ ''.__class__ }}][{{ messages.__class__ }}][{{ (1).real }}][{{ raise_exception.__globals__ }}]", "[][][][]", ""},
		{"[{{ messages[0]._private }}][{{ namespace.__init__ }}][{{ range.__self__ }}]", "[][][]", ""},
		{"{{ messages.append(1) }}", "", "SecurityError"},
		{"{{ messages[0].update({'role': 'x'}) }}", "", "SecurityError"},
		{"{{ messages[0].pop('role') }}", "", "SecurityError"},
		{"{% for x in messages.clear %}{% endfor %}", "", "SecurityError"},
		{"{{ messages[0].role }}{% set m = messages[0] %}{% set m.role = 'x' %}", "", "TemplateRuntimeError"},
		{"{{ ''.__class__.__mro__ }}", "", "UndefinedError"},
		{"{{ 'x'.format }}", "", ""},
		{"{{ cycler }}{{ joiner }}{{ lipsum }}", "", ""},
	} {
		tmpl, err := Parse(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		out, err := tmpl.Render(oneMessage, nil, nil)
		if tc.errType == "" {
			if err != nil || out != tc.want {
				t.Errorf("%s: %q %v, want %q", tc.src, out, err, tc.want)
			}
			continue
		}
		var re *RenderError
		if !errors.As(err, &re) || re.Type != tc.errType {
			t.Errorf("%s: %q %v, want a %s", tc.src, out, err, tc.errType)
		}
	}
}

// TestLongConversation: a legitimate long conversation stays well within
// DefaultLimits (Qwen3's template computes messages|length per message).
func TestLongConversation(t *testing.T) {
	g := loadGoldens(t)
	tmpl, err := Parse(g.Meta.Families["qwen3"].ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var b strings.Builder
	b.WriteString(`[{"role": "system", "content": "S"}`)
	for i := 0; i < n; i++ {
		b.WriteString(`, {"role": "user", "content": "` + strings.Repeat("question ", 20) + `"}, {"role": "assistant", "content": "<think>\nr\n</think>\n\nanswer"}`)
	}
	b.WriteString("]")
	tmpl.Limits = Limits{MaxSteps: DefaultLimits.MaxSteps / 4}
	out, err := tmpl.Render(json.RawMessage(b.String()), nil, map[string]any{"add_generation_prompt": true})
	if err != nil {
		t.Fatalf("%d turns within a quarter of the default steps: %v", n, err)
	}
	if got := strings.Count(out, "<|im_start|>user"); got != n {
		t.Fatalf("%d user turns rendered, want %d", got, n)
	}
}
