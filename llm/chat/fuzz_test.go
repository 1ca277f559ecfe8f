package chat

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// fuzzLimits keep each fuzzed rendering short.
var fuzzLimits = Limits{MaxOutput: 1 << 20, MaxSteps: 100_000, MaxDepth: 32}

var fuzzMessages = json.RawMessage(`[{"role": "system", "content": "S"}, {"role": "user", "content": "Hi é"},
	{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 2.0}}}]},
	{"role": "tool", "content": "r"}, {"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}]}]`)

var fuzzTools = json.RawMessage(`[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}]`)

// checkRenderError fails unless err is one of the package's errors.
func checkRenderError(t *testing.T, err error) {
	var te *TemplateError
	var re *RenderError
	if err != nil && !errors.As(err, &te) && !errors.As(err, &re) {
		t.Fatalf("error of type %T: %v", err, err)
	}
}

// FuzzParse parses any text as a template and renders what parses: never a
// panic, a hang or an error of another kind. Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add("{% for m in messages %}{{ m.role }}: {{ m.content|trim }}\n{% endfor %}")
	f.Add("{{ tools|tojson(indent=2) }}{{ messages[::-1][0] }}")
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		tmpl, err := Parse(src)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("parsing took %v", d)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line < 1 || se.Col < 1 {
				t.Fatalf("parse error %T %v", err, err)
			}
			return
		}
		tmpl.Limits = fuzzLimits
		start = time.Now()
		out, err := tmpl.Render(fuzzMessages, fuzzTools, map[string]any{"bos_token": "<s>", "add_generation_prompt": true})
		checkRenderError(t, err)
		if len(out) > fuzzLimits.MaxOutput {
			t.Fatalf("%d bytes of output", len(out))
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("rendering took %v", d)
		}
	})
}

// FuzzRender renders any messages, tools and kwargs JSON with the golden
// templates: never a panic or an error of another kind.
func FuzzRender(f *testing.F) {
	g := loadGoldens(f)
	var templates []*Template
	for _, fam := range []string{"qwen3", "llama3", "llama3_1", "gemma3", "deepseek_v3"} {
		tmpl, err := Parse(g.Meta.Families[fam].ChatTemplate)
		if err != nil {
			f.Fatal(err)
		}
		tmpl.Limits = fuzzLimits
		templates = append(templates, tmpl)
	}
	for i, c := range g.Cases {
		kw, _ := json.Marshal(c.Kwargs)
		f.Add(uint8(i), []byte(c.Messages), []byte(c.Tools), kw, i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, which uint8, messages, tools, kwargs []byte, cont bool) {
		tmpl := templates[int(which)%len(templates)]
		vars := map[string]any{}
		var kw map[string]json.RawMessage
		if json.Unmarshal(kwargs, &kw) == nil {
			for k, v := range kw {
				vars[k] = v
			}
		}
		var err error
		if cont {
			_, err = tmpl.RenderContinue(messages, tools, vars)
		} else {
			_, err = tmpl.Render(messages, tools, vars)
		}
		_ = err // input errors are plain errors; a panic is the failure
	})
}
