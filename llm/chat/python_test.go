package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pythonCase is one rendering of testdata/python_cases.json, made by
// testdata/gen_python_cases.py with Python's Jinja2 in Hugging Face's
// environment.
type pythonCase struct {
	Name        string                     `json:"name"`
	Template    string                     `json:"template"`
	Vars        map[string]json.RawMessage `json:"vars"`
	Rendered    *string                    `json:"rendered"`
	SyntaxError bool                       `json:"syntax_error"`
	Error       *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestPythonCases compares snippets and whole templates with Python's
// renderings: output byte for byte, errors by Python's type and message.
func TestPythonCases(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "python_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []pythonCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 100 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
	clock := func() time.Time { return time.Date(2024, 7, 26, 9, 5, 3, 0, time.UTC) }
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			tmpl, err := Parse(c.Template)
			if c.SyntaxError {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("parsed (err %v), want a syntax error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tmpl.now = clock
			messages := json.RawMessage("[]")
			var tools json.RawMessage
			vars := map[string]any{}
			for k, v := range c.Vars {
				switch k {
				case "messages":
					messages = v
				case "tools":
					tools = v
				default:
					vars[k] = v
				}
			}
			got, err := tmpl.Render(messages, tools, vars)
			switch {
			case c.Rendered != nil:
				if err != nil {
					t.Fatalf("error %v, want %q", err, *c.Rendered)
				}
				if got != *c.Rendered {
					t.Fatalf("rendered\n%q\nwant\n%q", got, *c.Rendered)
				}
			case c.Error.Type == "RecursionError":
				if !errors.Is(err, ErrLimit) {
					t.Fatalf("error %v, want a limit (Python: RecursionError)", err)
				}
			default:
				var te *TemplateError
				var re *RenderError
				typ, msg := "", ""
				switch {
				case errors.As(err, &te):
					typ, msg = "TemplateError", te.Message
				case errors.As(err, &re):
					typ, msg = re.Type, re.Message
				default:
					t.Fatalf("got %q, %v; want %s %q", got, err, c.Error.Type, c.Error.Message)
				}
				if typ != c.Error.Type || msg != c.Error.Message {
					t.Fatalf("error %s %q, want %s %q", typ, msg, c.Error.Type, c.Error.Message)
				}
			}
		})
	}
}
