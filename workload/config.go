package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/tinyserve/tinyserve/internal/jsonpos"
)

// Config is an experiment file (experiments/<name>.json) in the schema of
// serving-inference's generate_prompts.py. Unknown fields are allowed and
// kept: the metadata sidecar records the file as loaded, as Python does.
type Config struct {
	// Name names the workload; files are prompts/<Name>.jsonl and
	// prompts/<Name>.metadata.json, and every row id starts with it.
	Name string
	// Model is the model the workload is meant for (informational).
	Model string
	// Tokenizer names the tokenizer whose token counts the prompts target
	// (see tokenizer.Load).
	Tokenizer string
	// Seed seeds Python's random.Random for the request order.
	Seed int64
	// RequestCount is the number of rows; the bucket counts add up to it.
	RequestCount int
	// PromptTokenTolerance is how far a row's re-tokenized prompt length may
	// be from its target (default 0).
	PromptTokenTolerance int
	// Temperature is the sampling temperature clients should use
	// (informational; generation does not use it).
	Temperature float64
	// Buckets are the request shapes, expanded in this order before the
	// shuffle.
	Buckets []Bucket

	raw map[string]any // the file as decoded, for the sidecar and Verify
}

// Bucket is one request shape of a workload.
type Bucket struct {
	Name         string // recorded in each row's "bucket"
	Count        int    // how many requests have this shape
	PromptTokens int    // target prompt length in tokens
	OutputTokens int    // target output length in tokens
}

// FieldError is a problem with one field of an experiment file. Field is a
// path such as "buckets[1].prompt_tokens".
type FieldError struct {
	Field string
	Msg   string
}

// Error names the field first, so a message points straight at the line to fix.
func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// LoadConfig reads and validates an experiment file. Errors name the file
// and, for invalid content, the field (a *FieldError).
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("experiment %w", jsonpos.Wrap(path, data, err))
	}
	return cfg, nil
}

// IsWorkload reports whether an experiment folder's JSON file is a workload
// (it has a top-level "buckets" field). Other files there, such as sweep
// configs, are not workloads and are skipped.
func IsWorkload(data []byte) bool {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return false
	}
	_, ok := top["buckets"]
	return ok
}

// ParseConfig decodes and validates the contents of an experiment file.
func ParseConfig(data []byte) (*Config, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	raw, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	cfg := &Config{raw: raw}
	if cfg.Name, err = reqString(raw, "name"); err != nil {
		return nil, err
	}
	if !validName(cfg.Name) {
		return nil, fieldErr("name", "%q must be letters, digits, '-', '_' or '.' (it names files)", cfg.Name)
	}
	if cfg.Model, err = reqString(raw, "model"); err != nil {
		return nil, err
	}
	if cfg.Tokenizer, err = reqString(raw, "tokenizer"); err != nil {
		return nil, err
	}
	seed, err := reqInt(raw, "seed", "seed", math.MinInt64)
	if err != nil {
		return nil, err
	}
	cfg.Seed = seed
	n, err := reqInt(raw, "request_count", "request_count", 1)
	if err != nil {
		return nil, err
	}
	cfg.RequestCount = int(n)
	if _, ok := raw["prompt_token_tolerance"]; ok {
		tol, err := reqInt(raw, "prompt_token_tolerance", "prompt_token_tolerance", 0)
		if err != nil {
			return nil, err
		}
		cfg.PromptTokenTolerance = int(tol)
	}
	if t, ok := raw["temperature"]; ok {
		num, isNum := t.(json.Number)
		f, err := strconv.ParseFloat(string(num), 64)
		if !isNum || err != nil || f < 0 || math.IsInf(f, 0) {
			return nil, fieldErr("temperature", "must be a number >= 0")
		}
		cfg.Temperature = f
	}
	bv, ok := raw["buckets"]
	if !ok {
		return nil, fieldErr("buckets", "missing")
	}
	list, ok := bv.([]any)
	if !ok || len(list) == 0 {
		return nil, fieldErr("buckets", "must be a non-empty list")
	}
	seen := map[string]bool{}
	total := int64(0)
	for i, item := range list {
		path := fmt.Sprintf("buckets[%d]", i)
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fieldErr(path, "must be an object")
		}
		var b Bucket
		if b.Name, err = reqStringAt(obj, "name", path+".name"); err != nil {
			return nil, err
		}
		if seen[b.Name] {
			return nil, fieldErr(path+".name", "duplicate bucket name %q (rows are counted by bucket name)", b.Name)
		}
		seen[b.Name] = true
		for _, f := range []struct {
			key string
			dst *int
		}{{"count", &b.Count}, {"prompt_tokens", &b.PromptTokens}, {"output_tokens", &b.OutputTokens}} {
			v, err := reqInt(obj, f.key, path+"."+f.key, 1)
			if err != nil {
				return nil, err
			}
			*f.dst = int(v)
		}
		total += int64(b.Count)
		cfg.Buckets = append(cfg.Buckets, b)
	}
	if total != int64(cfg.RequestCount) {
		return nil, fieldErr("request_count", "is %d but the bucket counts add up to %d", cfg.RequestCount, total)
	}
	return cfg, nil
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func reqString(obj map[string]any, key string) (string, error) { return reqStringAt(obj, key, key) }

func reqStringAt(obj map[string]any, key, path string) (string, error) {
	v, ok := obj[key]
	if !ok {
		return "", fieldErr(path, "missing")
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", fieldErr(path, "must be a non-empty string")
	}
	return s, nil
}

// reqInt reads a JSON integer (no fraction or exponent: Python would not
// accept 32.0 as a count) that fits in int64 and is at least min.
func reqInt(obj map[string]any, key, path string, min int64) (int64, error) {
	v, ok := obj[key]
	if !ok {
		return 0, fieldErr(path, "missing")
	}
	num, ok := v.(json.Number)
	if !ok || isPyFloat(num) {
		return 0, fieldErr(path, "must be an integer")
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return 0, fieldErr(path, "%s is out of range", num)
	}
	if n < min {
		if min == 1 {
			return 0, fieldErr(path, "must be positive, got %d", n)
		}
		return 0, fieldErr(path, "must be >= %d, got %d", min, n)
	}
	if min >= 0 && n > math.MaxInt32 {
		return 0, fieldErr(path, "%d is too large", n)
	}
	return n, nil
}

// GenerationConfig returns the experiment as the sidecar records it: the
// file as loaded when the Config came from a file, else its fields.
func (c *Config) GenerationConfig() map[string]any {
	if c.raw != nil {
		return c.raw
	}
	buckets := make([]any, len(c.Buckets))
	for i, b := range c.Buckets {
		buckets[i] = map[string]any{
			"name": b.Name, "count": json.Number(strconv.Itoa(b.Count)),
			"prompt_tokens": json.Number(strconv.Itoa(b.PromptTokens)), "output_tokens": json.Number(strconv.Itoa(b.OutputTokens)),
		}
	}
	return map[string]any{
		"name": c.Name, "model": c.Model, "tokenizer": c.Tokenizer,
		"seed":                   json.Number(strconv.FormatInt(c.Seed, 10)),
		"request_count":          json.Number(strconv.Itoa(c.RequestCount)),
		"prompt_token_tolerance": json.Number(strconv.Itoa(c.PromptTokenTolerance)),
		"temperature":            json.Number(pyFloatRepr(c.Temperature)),
		"buckets":                buckets,
	}
}
