package workload

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/internal/fuzzseed"
)

// FuzzParseConfig: any input gives a Config or an error, never a panic; an
// accepted input is one valid JSON value (json.Valid: nothing after it); a
// valid Config's sidecar is writable, and the generation_config in it parses
// back to an equal config (the sidecar must stay verifiable). Seeds: the
// serving-inference experiments and testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(validConfig + " xyz")) // junk after the value, once accepted
	f.Add([]byte(validConfig + "]"))
	if fuzzseed.AddFiles(f, filepath.Join(siExperiments, "*.json")) == 0 {
		f.Fatal("no seed files: the fixtures are missing")
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input that is not one JSON value: %q", data)
		}
		meta, err := MarshalMetadata(cfg, "0")
		if err != nil {
			t.Fatalf("valid config, unwritable sidecar: %v", err)
		}
		v, err := decodeJSON(meta)
		if err != nil {
			t.Fatalf("sidecar is not JSON: %v\n%s", err, meta)
		}
		gc := v.(map[string]any)["generation_config"]
		if !pyEqual(gc, any(cfg.GenerationConfig())) {
			t.Fatalf("sidecar generation_config differs from the config:\n%s", meta)
		}
	})
}

// FuzzParseRows: any prompt file gives rows or an error naming a line,
// never a panic; accepted, it has one row per non-blank line, each line one
// JSON value (json.Valid: no junk after it) holding the row's fields.
func FuzzParseRows(f *testing.F) {
	row := `{"bucket":"a","id":"x","prompt":"p","prompt_tokens":1,"target_output_tokens":2,"target_prompt_tokens":1,"workload":"w"}`
	f.Add([]byte(row + "\n\n" + row + "\n"))
	f.Add([]byte(row + " xyz\n")) // junk after the value, once accepted
	f.Add([]byte(row + "]"))
	f.Add([]byte(`{"bucket":"a","id":"x","prompt":"p","prompt_tokens":1.0,"target_output_tokens":2,"target_prompt_tokens":1,"workload":"w"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseRows(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error names no line: %v", err)
			}
			return
		}
		var lines [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines = append(lines, l)
			}
		}
		if len(rows) != len(lines) {
			t.Fatalf("%d rows from %d lines", len(rows), len(lines))
		}
		for i, l := range lines {
			var r struct {
				ID     string `json:"id"`
				Prompt string `json:"prompt"`
			}
			if !json.Valid(l) || json.Unmarshal(l, &r) != nil {
				t.Fatalf("accepted line %q is not one JSON value", l)
			}
			if r.ID != rows[i].ID || r.Prompt != rows[i].Prompt {
				t.Fatalf("line %q gave row %+v", l, rows[i])
			}
		}
	})
}
