package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/tinyserve/tinyserve/llm"
)

// ParseRows reads a prompt file: one JSON object per non-empty line, with
// every Row key present and of the right type. Errors give the line number.
func ParseRows(data []byte) ([]Row, error) {
	var rows []Row
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		v, err := decodeJSON(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("line %d: not a JSON object", n+1)
		}
		var r Row
		for _, f := range []struct {
			key string
			dst *string
		}{{"bucket", &r.Bucket}, {"id", &r.ID}, {"prompt", &r.Prompt}, {"workload", &r.Workload}} {
			s, ok := obj[f.key].(string)
			if !ok {
				return nil, fmt.Errorf("line %d: field %q missing or not a string", n+1, f.key)
			}
			*f.dst = s
		}
		for _, f := range []struct {
			key string
			dst *int
		}{{"prompt_tokens", &r.PromptTokens}, {"target_output_tokens", &r.TargetOutputTokens}, {"target_prompt_tokens", &r.TargetPromptTokens}} {
			num, ok := obj[f.key].(json.Number)
			if !ok || isPyFloat(num) {
				return nil, fmt.Errorf("line %d: field %q missing or not an integer", n+1, f.key)
			}
			i, err := strconv.Atoi(string(num))
			if err != nil {
				return nil, fmt.Errorf("line %d: field %q: %s out of range", n+1, f.key, num)
			}
			*f.dst = i
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// ErrMismatch marks a verification failure (as opposed to a file that could
// not be read), so callers can tell a changed workload from a missing one.
var ErrMismatch = errors.New("workload does not verify")

// Verify re-checks the files of cfg in dir and returns the SHA-256 of the
// prompt file. It checks what generate_prompts.py --verify checks (the rows
// as in ValidateRows, the sidecar's generation_config equal to the
// experiment file, the recorded SHA-256) and, when tok is not nil, that each
// prompt re-tokenizes to its prompt_tokens. The first mismatch is returned,
// wrapped around ErrMismatch.
func Verify(dir string, cfg *Config, tok llm.Tokenizer) (string, error) {
	p := PathsIn(dir, cfg)
	data, err := os.ReadFile(p.Data)
	if err != nil {
		return "", fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("workload %s: %s: %w", cfg.Name, fmt.Sprintf(format, args...), ErrMismatch)
	}
	rows, err := ParseRows(data)
	if err != nil {
		return "", mismatch("%s: %v", p.Data, err)
	}
	if err := ValidateRows(rows, cfg); err != nil {
		return "", mismatch("%s: %v", p.Data, err)
	}
	metaBytes, err := os.ReadFile(p.Metadata)
	if err != nil {
		return "", fmt.Errorf("workload %s: %w", cfg.Name, err)
	}
	mv, err := decodeJSON(metaBytes)
	if err != nil {
		return "", mismatch("%s: %v", p.Metadata, err)
	}
	meta, ok := mv.(map[string]any)
	if !ok {
		return "", mismatch("%s: not a JSON object", p.Metadata)
	}
	if !pyEqual(meta["generation_config"], any(cfg.GenerationConfig())) {
		return "", mismatch("%s: generation_config does not match the experiment file", p.Metadata)
	}
	digest := SHA256(data)
	if got, _ := meta["workload_sha256"].(string); got != digest {
		return "", mismatch("%s: workload_sha256 is %q but %s has SHA-256 %s", p.Metadata, got, p.Data, digest)
	}
	if tok != nil {
		for _, r := range rows {
			if n := len(tok.Encode(r.Prompt, true)); n != r.PromptTokens {
				return "", mismatch("row %s: prompt re-tokenizes to %d tokens with %s, file says %d", r.ID, n, cfg.Tokenizer, r.PromptTokens)
			}
		}
	}
	return digest, nil
}
