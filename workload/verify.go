package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

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
// experiment file, the recorded SHA-256), and more, because a sidecar's
// SHA-256 can simply be recomputed after an edit:
//
//   - the sidecar, byte for byte as the generator writes it (no extra key,
//     another schema_version or another layout);
//   - without a tokenizer, what the config alone fixes: each row's position
//     (id and bucket in the seed's order) and the shape of its prompt (a
//     prefix of its source text, or that text followed by fillers), and the
//     file's layout: its rows written again as the generator writes them
//     must give its bytes (no extra key, CRLF, spacing or escape);
//   - with one (tok not nil), the whole file: the workload is regenerated
//     and must be byte-identical, and the first row that differs is named.
//
// The first mismatch is returned, wrapped around ErrMismatch.
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
	if got, _ := meta["schema_version"].(string); got != SchemaVersion {
		return "", mismatch("%s: schema_version is %q, want %q", p.Metadata, got, SchemaVersion)
	}
	if canon, err := MarshalMetadata(cfg, digest); err != nil {
		return "", err
	} else if !bytes.Equal(metaBytes, canon) {
		// An extra key, or the same keys laid out otherwise: not a sidecar
		// the generator wrote for this workload.
		return "", mismatch("%s: %s", p.Metadata, layoutDifference(metaBytes, canon))
	}
	if err := checkShape(rows, cfg); err != nil {
		return "", mismatch("%s: %v", p.Data, err)
	}
	if canon := MarshalRows(rows); !bytes.Equal(data, canon) {
		// Same rows, other bytes: ParseRows reads past what the generator
		// never writes, and the SHA-256 of those bytes is what a run records.
		return "", mismatch("%s: %s", p.Data, layoutDifference(data, canon))
	}
	if tok != nil {
		want, err := Generate(cfg, tok)
		if err != nil {
			return "", err
		}
		if wantData := MarshalRows(want); !bytes.Equal(data, wantData) {
			return "", mismatch("%s: %s", p.Data, firstDifference(rows, want, data, wantData, cfg.Tokenizer))
		}
	}
	return digest, nil
}

// checkShape checks what the config fixes without a tokenizer: row i has
// id <name>_<i:06d> and the i-th bucket of the seed's order, and its prompt
// is what cutting or padding request i's source text can give. Decoding a
// prefix of a byte-level BPE encoding gives a prefix of the text, so a cut
// prompt is a prefix of the source, and a padded one is the source followed
// by whole fillers.
func checkShape(rows []Row, cfg *Config) error {
	seq := requestBuckets(cfg)
	for i, r := range rows {
		if want := rowID(cfg, i); r.ID != want {
			return fmt.Errorf("row %d: id %q, want %q (rows reordered, removed or renamed)", i+1, r.ID, want)
		}
		if want := seq[i].Name; r.Bucket != want {
			return fmt.Errorf("row %d (%s): bucket %q, but the seed %d puts bucket %q here (rows reordered?)", i+1, r.ID, r.Bucket, cfg.Seed, want)
		}
		src := sourceText(cfg, i)
		rest, padded := strings.CutPrefix(r.Prompt, src)
		if padded && strings.ReplaceAll(rest, Filler, "") == "" {
			continue
		}
		if !padded && strings.HasPrefix(src, r.Prompt) {
			continue
		}
		want := src
		if padded {
			// The source is all there: what departs is a filler, so show
			// fillers as what was expected rather than the source's end.
			want += strings.Repeat(Filler, len(rest)/len(Filler)+1)
		}
		return fmt.Errorf("row %d (%s): the prompt is not its source text %s", i+1, r.ID, textDiff(r.Prompt, want))
	}
	return nil
}

// firstDifference names the first row of the file (got, gotData) that
// differs from the regenerated workload (want, wantData), and how.
func firstDifference(got, want []Row, gotData, wantData []byte, tokName string) string {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		row := fmt.Sprintf("row %d (%s)", i+1, g.ID)
		switch {
		case g.Prompt != w.Prompt:
			return fmt.Sprintf("%s: the prompt differs from the regenerated one %s", row, textDiff(g.Prompt, w.Prompt))
		case g.PromptTokens != w.PromptTokens:
			return fmt.Sprintf("%s: prompt_tokens is %d, but the prompt re-tokenizes to %d with %s", row, g.PromptTokens, w.PromptTokens, tokName)
		case g != w:
			return fmt.Sprintf("%s: %+v, regenerated %+v", row, g, w)
		}
	}
	return layoutDifference(gotData, wantData)
}

// layoutDifference names the first line where a file (got) departs from
// the same rows as the generator writes them (want): key order, spacing,
// escapes, extra keys, CRLF or blank lines, each of which changes the
// SHA-256 all the same.
func layoutDifference(got, want []byte) string {
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range min(len(gl), len(wl)) {
		if !bytes.Equal(gl[i], wl[i]) {
			return fmt.Sprintf("line %d is not written as the generator writes it %s", i+1, textDiff(string(gl[i]), string(wl[i])))
		}
	}
	return fmt.Sprintf("the file has %d lines, as the generator writes its rows %d", len(gl), len(wl))
}

// textDiff describes where got first departs from want, with a short
// excerpt of each from there, so that a long prompt is not printed whole.
func textDiff(got, want string) string {
	const excerpt = 40
	k := 0
	for k < len(got) && k < len(want) && got[k] == want[k] {
		k++
	}
	cut := func(s string) string {
		s = s[k:]
		if len(s) > excerpt {
			s = strings.ToValidUTF8(s[:excerpt], "") + "..."
		}
		return strconv.Quote(s)
	}
	return fmt.Sprintf("(from byte %d: file %s, expected %s)", k, cut(got), cut(want))
}
