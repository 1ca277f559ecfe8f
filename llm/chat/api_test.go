package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
	}{
		{"abc\n{% if x %}\n  {{ x + }}", 3, 10},
		{"é{{ x }}\n\n  {% bogus %}", 3, 6},
		{"{% for x in y %}\n{{ x }}", 2, 8},
		{"line\n  {{ 'unterminated }}", 2, 6},
		{"{% if x %}{% endfor %}", 1, 14},
		{"{{ a ]}}", 1, 6},
	} {
		_, err := Parse(tc.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: %v, want a *SyntaxError", tc.src, err)
		}
		if se.Line != tc.line || se.Col != tc.col {
			t.Errorf("%q: %v, want line %d col %d", tc.src, err, tc.line, tc.col)
		}
		if !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: %q names no line", tc.src, err)
		}
	}
}

func TestRenderErrorsAndVars(t *testing.T) {
	tmpl, err := Parse("{{ messages|length }} {{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ m|tojson }} {{ l }} {{ n }} {{ f }} {{ r|tojson }}")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{
		"m": map[string]any{"b": 1, "a": []any{true, nil}},
		"l": []string{"x", "y"},
		"n": json.Number("3"),
		"f": 2.0,
		"r": json.RawMessage(`{"z": 1.50, "a": {"k": 1e3}}`),
	}
	out, err := tmpl.Render(oneMessage, nil, vars)
	want := `1 True True False {"a": [true, null], "b": 1} ['x', 'y'] 3 2.0 {"z": 1.5, "a": {"k": 1000.0}}`
	if err != nil || out != want {
		t.Fatalf("got %q %v\nwant %q", out, err, want)
	}
	for _, bad := range []json.RawMessage{nil, json.RawMessage(`{"role": "user"}`), json.RawMessage(`[{"role": `), json.RawMessage(`[] []`)} {
		if _, err := tmpl.Render(bad, nil, nil); err == nil {
			t.Errorf("messages %q rendered", bad)
		}
	}
	if _, err := tmpl.Render(oneMessage, json.RawMessage(`[{`), nil); err == nil {
		t.Error("broken tools rendered")
	}
	if _, err := tmpl.Render(oneMessage, nil, map[string]any{"x": struct{}{}}); err == nil {
		t.Error("a struct variable rendered")
	}
	vars["add_generation_prompt"] = true
	out, err = tmpl.Render(oneMessage, json.RawMessage(`null`), vars)
	if err != nil || !strings.HasPrefix(out, "1 True True True") {
		t.Errorf("tools null: %q %v", out, err)
	}
}

func TestRaiseException(t *testing.T) {
	tmpl, err := Parse(`{% if messages[0].role != 'system' %}{{ raise_exception("System first, got '" ~ messages[0].role ~ "'") }}{% endif %}ok`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(oneMessage, nil, nil)
	var te *TemplateError
	if !errors.As(err, &te) || te.Message != "System first, got 'user'" || err.Error() != te.Message {
		t.Fatalf("%T %v", err, err)
	}
	if errors.Is(err, ErrLimit) {
		t.Error("a TemplateError matches ErrLimit")
	}
}

func TestRenderContinue(t *testing.T) {
	trimmed, _ := Parse("{% for m in messages %}<{{ m.role }}>{{ m.content|trim }}</>{% endfor %}")
	verbatim, _ := Parse("{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}")
	parts, _ := Parse("{% for m in messages %}<{{ m.role }}>{% for p in m.content %}{{ p.text }}{% endfor %}</>{% endfor %}")
	dropper, _ := Parse("{% for m in messages %}<{{ m.role }}></>{% endfor %}")
	conv := json.RawMessage(`[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Once upon "}]`)
	for _, tc := range []struct {
		tmpl *Template
		msgs json.RawMessage
		want string
	}{
		{trimmed, conv, "<user>Hi</><assistant>Once upon"},
		{verbatim, conv, "<user>Hi</><assistant>Once upon "},
		{parts, json.RawMessage(`[{"role": "assistant", "content": [{"type": "text", "text": "a "}, {"type": "image"}, {"type": "text", "text": "b"}, {"type": "image"}]}]`), "<assistant>a b"},
	} {
		got, err := tc.tmpl.RenderContinue(tc.msgs, nil, nil)
		if err != nil || got != tc.want {
			t.Errorf("got %q %v, want %q", got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		tmpl *Template
		msgs string
	}{
		{dropper, `[{"role": "assistant", "content": "x"}]`},
		{verbatim, `[{"role": "assistant", "content": null}]`},
		{verbatim, `[{"role": "assistant", "content": [{"type": "image"}]}]`},
		{verbatim, `[]`},
		{verbatim, `[1]`},
	} {
		if got, err := tc.tmpl.RenderContinue(json.RawMessage(tc.msgs), nil, nil); err == nil {
			t.Errorf("%s: rendered %q", tc.msgs, got)
		}
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2025, 3, 4, 15, 6, 7, 890000000, time.UTC)
	for f, want := range map[string]string{
		"%d %b %Y":             "04 Mar 2025",
		"%-d %B %Y":            "4 March 2025",
		"%A %a %H:%M:%S %p %I": "Tuesday Tue 15:06:07 PM 03",
		"%Y-%m-%d %j %y %e%%":  "2025-03-04 063 25  4%",
		"%F %T %D %f %u %w %Q": "2025-03-04 15:06:07 03/04/25 890000 2 2 %Q",
		"%z %Z %c":             "+0000 UTC Tue Mar  4 15:06:07 2025",
		"trailing %":           "trailing %",
	} {
		if got := strftime(tm, f); got != want {
			t.Errorf("%q: %q, want %q", f, got, want)
		}
	}
	tmpl, _ := Parse("{{ strftime_now('%Y') }}")
	out, err := tmpl.Render(oneMessage, nil, nil)
	if err != nil || out != time.Now().Format("2006") {
		t.Errorf("strftime_now: %q %v", out, err)
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	listCfg := `{"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "unk_token": null,
		"additional_special_tokens": ["<a>", {"content": "<b>"}],
		"chat_template": [{"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T{{ eos_token }}"}]}`
	render := func(tmpl *Template, toks SpecialTokens) string {
		out, err := tmpl.Render(oneMessage, nil, toks.Vars())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	dir := writeFiles(t, map[string]string{"tokenizer_config.json": listCfg})
	tmpl, toks, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := render(tmpl, toks); got != "D<s>" {
		t.Errorf("default: %q", got)
	}
	if toks.BOS != "<s>" || toks.EOS != "</s>" || toks.UNK != "" || toks.PAD != "" || strings.Join(toks.Additional, ",") != "<a>,<b>" {
		t.Errorf("tokens %+v", toks)
	}
	if v := toks.Vars(); len(v) != 3 || v["additional_special_tokens"] == nil {
		t.Errorf("vars %v", v)
	}
	if tmpl, toks, err = Load(dir, "tool_use"); err != nil || render(tmpl, toks) != "T</s>" {
		t.Errorf("tool_use: %v", err)
	}
	if _, _, err := Load(dir, "nope"); err == nil || !strings.Contains(err.Error(), "tool_use") {
		t.Errorf("unknown name: %v", err)
	}

	// chat_template.jinja wins over the config's; named files live in
	// additional_chat_templates.
	dir = writeFiles(t, map[string]string{
		"tokenizer_config.json":               `{"eos_token": "E", "chat_template": "config"}`,
		"chat_template.jinja":                 "file{{ eos_token }}\n",
		"additional_chat_templates/rag.jinja": "rag",
	})
	if tmpl, toks, err = Load(dir, ""); err != nil || render(tmpl, toks) != "fileE" {
		t.Errorf("chat_template.jinja: %v", err)
	}
	if tmpl, toks, err = Load(dir, "rag"); err != nil || render(tmpl, toks) != "rag" {
		t.Errorf("additional template: %v", err)
	}
	if _, _, err := Load(dir, "nope"); err == nil {
		t.Error("an unknown name loaded")
	}

	for name, files := range map[string]map[string]string{
		"no template":   {"tokenizer_config.json": `{"eos_token": "E"}`},
		"null template": {"tokenizer_config.json": `{"chat_template": null}`},
		"no default":    {"tokenizer_config.json": `{"chat_template": [{"name": "x", "template": "x"}]}`},
		"bad template":  {"tokenizer_config.json": `{"chat_template": "{% if %}"}`},
		"bad token":     {"tokenizer_config.json": `{"chat_template": "x", "eos_token": 5}`},
		"bad json":      {"tokenizer_config.json": `{`},
		"empty folder":  {},
		"wrong type":    {"tokenizer_config.json": `{"chat_template": 5}`},
	} {
		if _, _, err := Load(writeFiles(t, files), ""); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	// A folder with only chat_template.jinja loads, without tokens.
	if tmpl, toks, err = Load(writeFiles(t, map[string]string{"chat_template.jinja": "x"}), ""); err != nil || render(tmpl, toks) != "x" {
		t.Errorf("only chat_template.jinja: %v", err)
	}
}

// TestConcurrentRender renders the goldens from many goroutines at once
// with shared templates (run with -race).
func TestConcurrentRender(t *testing.T) {
	g := loadGoldens(t)
	templates := map[string]*Template{}
	for fam, f := range g.Meta.Families {
		templates[fam], _ = Parse(f.ChatTemplate)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range g.Cases {
				got, err := renderCase(templates[c.Family], c)
				if c.Rendered != nil && (err != nil || got != *c.Rendered) {
					t.Errorf("%s: %q %v", c.Name, got, err)
				}
			}
		}()
	}
	wg.Wait()
}
