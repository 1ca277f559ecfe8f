package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goldenDir holds the reference renderings (see its README.md).
var goldenDir = filepath.Join("..", "..", "testdata", "chat")

type goldenFile struct {
	Meta struct {
		Families map[string]struct {
			Config        string         `json:"config"`
			ChatTemplate  string         `json:"chat_template"`
			SpecialTokens map[string]any `json:"special_tokens"`
		} `json:"families"`
	} `json:"meta"`
	Cases []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name     string                     `json:"name"`
	Family   string                     `json:"family"`
	Messages json.RawMessage            `json:"messages"`
	Tools    json.RawMessage            `json:"tools"`
	Kwargs   map[string]json.RawMessage `json:"kwargs"`
	Rendered *string                    `json:"rendered"`
	Error    *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func loadGoldens(t testing.TB) goldenFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "golden_chat.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) != 46 {
		t.Fatalf("%d golden cases, want 46", len(g.Cases))
	}
	return g
}

// renderCase renders a golden case as its README says: kwargs as
// variables, continue_final_message through RenderContinue.
func renderCase(tmpl *Template, c goldenCase) (string, error) {
	vars := map[string]any{}
	cont := false
	for k, v := range c.Kwargs {
		if k == "continue_final_message" {
			cont = string(v) == "true"
			continue
		}
		vars[k] = v
	}
	if cont {
		return tmpl.RenderContinue(c.Messages, c.Tools, vars)
	}
	return tmpl.Render(c.Messages, c.Tools, vars)
}

func TestGoldens(t *testing.T) {
	g := loadGoldens(t)
	templates := map[string]*Template{}
	for fam, f := range g.Meta.Families {
		tmpl, err := Parse(f.ChatTemplate)
		if err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		templates[fam] = tmpl
	}
	pass := 0
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := renderCase(templates[c.Family], c)
			if c.Error != nil {
				if err == nil {
					t.Fatalf("rendered %q, want %s %q", got, c.Error.Type, c.Error.Message)
				}
				var msg, typ string
				var te *TemplateError
				var re *RenderError
				switch {
				case errors.As(err, &te):
					typ, msg = "TemplateError", te.Message
				case errors.As(err, &re):
					typ, msg = re.Type, re.Message
				default:
					t.Fatalf("error %v (%T), want %s %q", err, err, c.Error.Type, c.Error.Message)
				}
				if typ != c.Error.Type || msg != c.Error.Message {
					t.Fatalf("error %s %q, want %s %q", typ, msg, c.Error.Type, c.Error.Message)
				}
				pass++
				return
			}
			if err != nil {
				t.Fatalf("error %v, want %q", err, *c.Rendered)
			}
			if got != *c.Rendered {
				t.Fatalf("rendered\n%q\nwant\n%q", got, *c.Rendered)
			}
			pass++
		})
	}
	t.Logf("%d/%d goldens render byte for byte", pass, len(g.Cases))
	if pass != len(g.Cases) {
		t.Errorf("%d/%d goldens pass", pass, len(g.Cases))
	}
}

// TestLoadFamilies loads each family's folder: the same template as the
// goldens' and the special tokens transformers passes.
func TestLoadFamilies(t *testing.T) {
	g := loadGoldens(t)
	for fam, f := range g.Meta.Families {
		tmpl, toks, err := Load(filepath.Join(goldenDir, filepath.Dir(f.Config)), "")
		if err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		if tmpl.src != normalizeSource(f.ChatTemplate) {
			t.Errorf("%s: loaded template differs from the goldens'", fam)
		}
		got, _ := json.Marshal(toks.Vars())
		want, _ := json.Marshal(f.SpecialTokens)
		var gv, wv any
		json.Unmarshal(got, &gv)
		json.Unmarshal(want, &wv)
		if !reflect.DeepEqual(gv, wv) {
			t.Errorf("%s: special tokens %s, want %s", fam, got, want)
		}
	}
}

// TestGoldensWithLoadedTokens renders the goldens with the tokens Load
// found instead of the cases' kwargs: the same text.
func TestGoldensWithLoadedTokens(t *testing.T) {
	g := loadGoldens(t)
	type loaded struct {
		tmpl *Template
		toks SpecialTokens
	}
	families := map[string]loaded{}
	for fam, f := range g.Meta.Families {
		tmpl, toks, err := Load(filepath.Join(goldenDir, filepath.Dir(f.Config)), "")
		if err != nil {
			t.Fatal(err)
		}
		families[fam] = loaded{tmpl, toks}
	}
	for _, c := range g.Cases {
		if c.Rendered == nil {
			continue
		}
		tmpl, toks := families[c.Family].tmpl, families[c.Family].toks
		var err error
		vars := toks.Vars()
		for k, v := range c.Kwargs {
			if !strings.HasSuffix(k, "_token") && k != "additional_special_tokens" {
				vars[k] = v
			}
		}
		cont := string(c.Kwargs["continue_final_message"]) == "true"
		delete(vars, "continue_final_message")
		var got string
		if cont {
			got, err = tmpl.RenderContinue(c.Messages, c.Tools, vars)
		} else {
			got, err = tmpl.Render(c.Messages, c.Tools, vars)
		}
		if err != nil || got != *c.Rendered {
			t.Errorf("%s: got %q, %v", c.Name, got, err)
		}
	}
}
