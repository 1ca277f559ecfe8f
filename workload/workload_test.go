package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

const validConfig = `{
  "name": "unit",
  "model": "gpt2",
  "tokenizer": "gpt2",
  "seed": 7,
  "request_count": 6,
  "prompt_token_tolerance": 2,
  "temperature": 0.0,
  "extra": {"kept": [1, 2.5]},
  "buckets": [
    {"name": "a", "count": 4, "prompt_tokens": 48, "output_tokens": 8},
    {"name": "b", "count": 2, "prompt_tokens": 64, "output_tokens": 16}
  ]
}`

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(map[string]any)
		field string
	}{
		{"missing name", func(m map[string]any) { delete(m, "name") }, "name"},
		{"empty model", func(m map[string]any) { m["model"] = "" }, "model"},
		{"tokenizer not a string", func(m map[string]any) { m["tokenizer"] = 3 }, "tokenizer"},
		{"name with slash", func(m map[string]any) { m["name"] = "../x" }, "name"},
		{"missing seed", func(m map[string]any) { delete(m, "seed") }, "seed"},
		{"float seed", func(m map[string]any) { m["seed"] = json.Number("1.5") }, "seed"},
		{"huge seed", func(m map[string]any) { m["seed"] = json.Number("1" + strings.Repeat("0", 30)) }, "seed"},
		{"zero request_count", func(m map[string]any) { m["request_count"] = 0 }, "request_count"},
		{"request_count mismatch", func(m map[string]any) { m["request_count"] = 7 }, "request_count"},
		{"negative tolerance", func(m map[string]any) { m["prompt_token_tolerance"] = -1 }, "prompt_token_tolerance"},
		{"string temperature", func(m map[string]any) { m["temperature"] = "hot" }, "temperature"},
		{"negative temperature", func(m map[string]any) { m["temperature"] = -0.5 }, "temperature"},
		{"no buckets", func(m map[string]any) { delete(m, "buckets") }, "buckets"},
		{"empty buckets", func(m map[string]any) { m["buckets"] = []any{} }, "buckets"},
		{"bucket not object", func(m map[string]any) { m["buckets"] = []any{"x"} }, "buckets[0]"},
		{"bucket count float", func(m map[string]any) { bucket(m, 1)["count"] = json.Number("2.0") }, "buckets[1].count"},
		{"bucket prompt_tokens zero", func(m map[string]any) { bucket(m, 0)["prompt_tokens"] = 0 }, "buckets[0].prompt_tokens"},
		{"bucket output_tokens missing", func(m map[string]any) { delete(bucket(m, 1), "output_tokens") }, "buckets[1].output_tokens"},
		{"bucket name missing", func(m map[string]any) { delete(bucket(m, 0), "name") }, "buckets[0].name"},
		{"duplicate bucket", func(m map[string]any) { bucket(m, 1)["name"] = "a" }, "buckets[1].name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(validConfig))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			tc.edit(m)
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParseConfig(data)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("error names field %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
	for _, bad := range []string{"", "[1]", "{", `{"name": "x"} trailing`} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%q) succeeded", bad)
		}
	}
}

func bucket(m map[string]any, i int) map[string]any {
	return m["buckets"].([]any)[i].(map[string]any)
}

func TestLoadConfigNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, []byte(`{"name": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `field "model"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestIsWorkload(t *testing.T) {
	if !IsWorkload([]byte(validConfig)) {
		t.Error("valid config is not a workload")
	}
	for _, s := range []string{`{"concurrency": [1, 2]}`, `[]`, `nope`} {
		if IsWorkload([]byte(s)) {
			t.Errorf("IsWorkload(%s) = true", s)
		}
	}
}

func TestGenerateGPT2(t *testing.T) {
	cfg, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	tok := gpt2(t)
	rows, err := Generate(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows", len(rows))
	}
	again, err := Generate(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(MarshalRows(rows), MarshalRows(again)) {
		t.Fatal("generation is not deterministic")
	}
	// The shuffle must actually reorder the expanded buckets (4 a then 2 b).
	order := ""
	for i, r := range rows {
		order += r.Bucket
		if want := "unit_00000" + string(rune('0'+i)); r.ID != want {
			t.Errorf("row %d id %q, want %q", i, r.ID, want)
		}
		if !strings.HasPrefix(r.Prompt, "unit request 00000"+string(rune('0'+i))+". Analyze how") {
			t.Errorf("row %d prompt starts %q", i, r.Prompt[:40])
		}
		if r.PromptTokens != r.TargetPromptTokens {
			t.Errorf("row %d: %d tokens, target %d", i, r.PromptTokens, r.TargetPromptTokens)
		}
	}
	if order == "aaaabb" {
		t.Error("rows are in config order; the shuffle did nothing")
	}
	// Another seed gives another order.
	cfg.Seed = 8
	other, err := Generate(cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(MarshalRows(rows), MarshalRows(other)) {
		t.Error("seed does not change the workload")
	}
}

func TestGenerateRejectsMultiTokenFiller(t *testing.T) {
	cfg, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Generate(cfg, splitTokenizer{})
	if err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Fatalf("err = %v", err)
	}
}

// splitTokenizer encodes each byte as a token, so " benchmark" is 10 tokens.
type splitTokenizer struct{ byteTok }

type byteTok struct{}

func (byteTok) Encode(s string, _ bool) []int {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids
}

func (byteTok) NewDecoder(bool) llm.Decoder { return nil }
func (byteTok) VocabSize() int              { return 256 }
func (byteTok) EOSTokenID() int             { return -1 }
func (byteTok) IsSpecial(int) bool          { return false }

func (byteTok) Decode(ids []int, _ bool) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func TestVerifyDetectsChanges(t *testing.T) {
	cfg, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	tok := gpt2(t)
	tests := []struct {
		name    string
		change  func(t *testing.T, p Paths)
		mention string
	}{
		{"untouched", func(*testing.T, Paths) {}, ""},
		{"prompt edited", func(t *testing.T, p Paths) { replaceIn(t, p.Data, "Analyze", "Analyse") }, "workload_sha256"},
		{"row removed", func(t *testing.T, p Paths) {
			b := read(t, p.Data)
			write(t, p.Data, b[bytes.IndexByte(b, '\n')+1:])
		}, "6"},
		{"duplicate id", func(t *testing.T, p Paths) { replaceIn(t, p.Data, "unit_000001", "unit_000000") }, "not unique"},
		{"token count edited", func(t *testing.T, p Paths) {
			replaceAll(t, p.Data, `"prompt_tokens":48`, `"prompt_tokens":49`)
			resum(t, p)
		}, "re-tokenizes"},
		{"out of tolerance", func(t *testing.T, p Paths) { replaceAll(t, p.Data, `"prompt_tokens":48`, `"prompt_tokens":60`) }, "tolerance"},
		{"config changed", func(t *testing.T, p Paths) { replaceIn(t, p.Metadata, `"seed": 7`, `"seed": 8`) }, "generation_config"},
		{"sidecar schema changed", func(t *testing.T, p Paths) {
			replaceIn(t, p.Metadata, `"schema_version": "1.0"`, `"schema_version": "2.0"`)
		}, `schema_version is "2.0"`},
		{"sidecar key added", func(t *testing.T, p Paths) {
			replaceIn(t, p.Metadata, `"schema_version"`, `"note": "x", "schema_version"`)
		}, "metadata.json: line"},
		{"sidecar re-indented", func(t *testing.T, p Paths) { replaceAll(t, p.Metadata, "\n  ", "\n    ") }, "metadata.json: line 2 is not written as the generator writes it"},
		{"bad json row", func(t *testing.T, p Paths) { replaceIn(t, p.Data, `{"bucket"`, `{"bucket`) }, "line 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, digest, err := Write(dir, cfg, tok)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, p)
			got, err := Verify(dir, cfg, tok)
			if tc.mention == "" {
				if err != nil || got != digest {
					t.Fatalf("Verify = %s, %v; want %s", got, err, digest)
				}
				return
			}
			if err == nil {
				t.Fatal("Verify passed a changed workload")
			}
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want ErrMismatch mentioning %q", err, tc.mention)
			}
		})
	}
	if _, err := Verify(t.TempDir(), cfg, tok); err == nil || errors.Is(err, ErrMismatch) {
		t.Fatalf("missing files: err = %v, want a read error", err)
	}
}

// TestVerifyRecomputedDigest: an edit followed by a recomputed
// workload_sha256 passes the Python tool's checks; Verify still finds it and
// names the first row that differs. Without a tokenizer it checks what the
// config alone fixes (row order, prompt shape) and the rows' layout; with one it regenerates the
// workload and compares bytes, which also catches what keeps the shape.
func TestVerifyRecomputedDigest(t *testing.T) {
	cfg, err := ParseConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	tok := gpt2(t)
	const filler = " benchmark"
	tests := []struct {
		name       string
		change     func(t *testing.T, p Paths)
		withTok    string // what the error must mention
		withoutTok string // "" when the edit keeps everything the config fixes
	}{
		{"prompt text edited", func(t *testing.T, p Paths) { replaceIn(t, p.Data, "Analyze", "Analyse") },
			"row 1 (unit_000000): the prompt is not its source text", "row 1 (unit_000000)"},
		{"rows reordered", func(t *testing.T, p Paths) { swapLines(t, p.Data, 1, 2) },
			`row 2: id "unit_000002", want "unit_000001"`, "row 2: id"},
		{"prompts swapped between rows of one bucket", func(t *testing.T, p Paths) {
			replaceIn(t, p.Data, "request 000003", "request XXXXXX")
			replaceIn(t, p.Data, "request 000004", "request 000003")
			replaceIn(t, p.Data, "request XXXXXX", "request 000004")
		}, "row 4 (unit_000003)", "row 4 (unit_000003)"},
		{"filler dropped within tolerance", func(t *testing.T, p Paths) {
			replaceIn(t, p.Data, "reasoning. "+strings.Repeat(filler, 5)+`"`, "reasoning. "+strings.Repeat(filler, 4)+`"`)
		}, "row 2 (unit_000001): the prompt differs from the regenerated one", ""},
		{"filler misspelled", func(t *testing.T, p Paths) {
			replaceIn(t, p.Data, "reasoning. "+filler+filler, "reasoning. "+filler+" benchmarx")
		}, `file "x benchmark benchmark benchmark benchmar...", expected "k benchmark`, `expected "k benchmark`},
		{"layout changed", func(t *testing.T, p Paths) { replaceIn(t, p.Data, `"workload":"unit"}`, `"workload": "unit"}`) },
			"line 1 is not written as the generator writes it", "line 1 is not written as the generator writes it"},
		{"key added", func(t *testing.T, p Paths) {
			replaceIn(t, p.Data, `"workload":"unit"}`, `"workload":"unit","note":"x"}`)
		},
			"line 1 is not written as the generator writes it", `line 1 is not written as the generator writes it (from byte`},
		{"CRLF line endings", func(t *testing.T, p Paths) { replaceAll(t, p.Data, "}\n", "}\r\n") },
			"line 1 is not written", "line 1 is not written"},
		{"escape spelled otherwise", func(t *testing.T, p Paths) { replaceIn(t, p.Data, `"workload":"unit"}`, `"workload":"\u0075nit"}`) },
			"line 1 is not written", "line 1 is not written"},
		{"blank line added", func(t *testing.T, p Paths) { replaceIn(t, p.Data, "}\n", "}\n\n") },
			"line 2 is not written", "line 2 is not written"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, _, err := Write(dir, cfg, tok)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, p)
			resum(t, p)
			for _, c := range []struct {
				tok     llm.Tokenizer
				mention string
			}{{tok, tc.withTok}, {nil, tc.withoutTok}} {
				_, err := Verify(dir, cfg, c.tok)
				if c.mention == "" {
					if err != nil {
						t.Errorf("without a tokenizer: %v; want a pass (the edit keeps what the config fixes)", err)
					}
					continue
				}
				if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.mention) {
					t.Errorf("tokenizer %v: err = %v, want ErrMismatch mentioning %q", c.tok != nil, err, c.mention)
				}
			}
		})
	}
}

// swapLines swaps two lines (0-based) of a file.
func swapLines(t *testing.T, path string, i, j int) {
	t.Helper()
	lines := bytes.SplitAfter(read(t, path), []byte("\n"))
	lines[i], lines[j] = lines[j], lines[i]
	write(t, path, bytes.Join(lines, nil))
}

// resum rewrites the sidecar's digest after an edit, as someone hiding
// the edit would, so that only the checks beyond the digest can catch it.
func resum(t *testing.T, p Paths) {
	t.Helper()
	var meta map[string]any
	if err := json.Unmarshal(read(t, p.Metadata), &meta); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, p.Metadata, meta["workload_sha256"].(string), SHA256(read(t, p.Data)))
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b := read(t, path)
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	write(t, path, bytes.Replace(b, []byte(old), []byte(new), 1))
}

func replaceAll(t *testing.T, path, old, new string) {
	t.Helper()
	b := read(t, path)
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	write(t, path, bytes.ReplaceAll(b, []byte(old), []byte(new)))
}

func TestWriteAIPerf(t *testing.T) {
	rows := []Row{
		{Prompt: "hello \"world\"", TargetOutputTokens: 8},
		{Prompt: "日本", TargetOutputTokens: 16},
	}
	var b bytes.Buffer
	if err := WriteAIPerf(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, line := range lines {
		var got struct {
			Text         string `json:"text"`
			OutputLength int    `json:"output_length"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if got.Text != rows[i].Prompt || got.OutputLength != rows[i].TargetOutputTokens {
			t.Errorf("line %d = %+v", i, got)
		}
	}
}

func TestParseRowsErrors(t *testing.T) {
	tests := []struct{ in, mention string }{
		{`{"bucket":"a"}`, `"id"`},
		{`{"bucket":"a","id":"x","prompt":"p","workload":"w","prompt_tokens":1.0,"target_output_tokens":1,"target_prompt_tokens":1}`, "prompt_tokens"},
		{"\n\n[1]", "line 3"},
	}
	for _, tc := range tests {
		if _, err := ParseRows([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ParseRows(%q) err = %v, want mention of %q", tc.in, err, tc.mention)
		}
	}
}

func TestMetadataFromFields(t *testing.T) {
	// A Config built in code (no file) still gets a Python-style sidecar.
	cfg := &Config{Name: "x", Model: "m", Tokenizer: "gpt2", Seed: 1, RequestCount: 1,
		Buckets: []Bucket{{Name: "b", Count: 1, PromptTokens: 4, OutputTokens: 2}}}
	got, err := MarshalMetadata(cfg, "abc")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "generation_config": {
    "buckets": [
      {
        "count": 1,
        "name": "b",
        "output_tokens": 2,
        "prompt_tokens": 4
      }
    ],
    "model": "m",
    "name": "x",
    "prompt_token_tolerance": 0,
    "request_count": 1,
    "seed": 1,
    "temperature": 0.0,
    "tokenizer": "gpt2"
  },
  "schema_version": "1.0",
  "workload_sha256": "abc"
}
`
	if string(got) != want {
		t.Fatalf("got\n%s", got)
	}
}
