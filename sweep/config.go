package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tinyserve/tinyserve/sweep/loadgen"

	"github.com/tinyserve/tinyserve/internal/jsonpos"
)

// Defaults applied when a sweep config leaves a field out; they are
// serving-inference's (resolve_config in scripts/run_experiment.py).
const (
	DefaultTimeoutS  = 300.0
	DefaultOutputDir = "results/experiments"
)

// targetEmbedded is the Target.Kind for a tinyserve engine that cmd/sweep
// starts in-process on a loopback port.
const targetEmbedded = "embedded"

// ServerInfo records how the measured server was started, so a reader can
// reproduce it. The sweep does not start servers from it.
type ServerInfo struct {
	// Discovery says how the server was found (serving-inference uses
	// "explicit"); free text.
	Discovery string `json:"discovery,omitempty"`
	// LaunchFlags are the server's command-line flags, recorded verbatim
	// (with secrets redacted in the manifest).
	LaunchFlags []string `json:"launch_flags"`
}

// Target is tinyserve's extension of the config: where the server comes
// from. Absent means "url names a server that is already running".
type Target struct {
	// Kind is "embedded": cmd/sweep starts tinyserve in-process.
	Kind string `json:"kind"`
	// Engine holds the tinyserve engine settings (backend, checkpoint, dtype,
	// max_num_seqs, max_num_batched_tokens, block_size, num_blocks, ...),
	// decoded by cmd/sweep; the sweep package only records them.
	Engine json.RawMessage `json:"engine,omitempty"`
	// API is the API the sweep speaks to the embedded server: "completions"
	// (the default, /v1/completions) or "chat" (/v1/chat/completions: each
	// prompt becomes one user message in the model's chat template, so the
	// model needs one). A remote server's API follows its url instead.
	API loadgen.API `json:"api,omitempty"`
}

// Config is a sweep config: serving-inference's experiment schema plus
// ignore_eos, extra_body, api_key_env, slo and target. Load it with
// [LoadConfig] or [parseConfig], which validate it and apply defaults.
type Config struct {
	// Name names the sweep's folder under the output directory; it must be
	// a single path element.
	Name string `json:"name"`
	// Prompts is the prompt file, resolved against the working directory.
	Prompts string `json:"prompts"`
	// URL is the endpoint: a path ending in /chat/completions speaks the
	// chat API, any other the completions API ([loadgen.APIForURL]). With an
	// embedded target it may be empty; cmd/sweep fills it in.
	URL string `json:"url"`
	// Model is sent with every request. With an embedded target it may be
	// empty; the served model's id is used.
	Model string `json:"model"`
	// ModelMetadata records revision, dtype, quantization and
	// max_model_len for the report; all four keys must be present (null is
	// allowed).
	ModelMetadata map[string]any `json:"model_metadata"`
	// Server records how the server was launched.
	Server ServerInfo `json:"server"`
	// NumRequests is the number of prompt rows each run sends (the first N).
	NumRequests int `json:"num_requests"`
	// Concurrency lists the levels to measure; unique positive integers.
	Concurrency []int `json:"concurrency"`
	// Warmups is the number of warmup rounds (excluded from every
	// aggregate); zero means none.
	Warmups int `json:"warmups"`
	// Repeats is the number of measured rounds; at least 1.
	Repeats int `json:"repeats"`
	// Seed seeds the order of levels in every round.
	Seed int64 `json:"seed"`
	// Stream requests SSE streaming (default true).
	Stream bool `json:"stream"`
	// Temperature is sent with every request (default 0).
	Temperature float64 `json:"temperature"`
	// Timeout bounds each request, in seconds (default 300).
	Timeout float64 `json:"timeout"`
	// StoreResponse keeps generated text in the records (default false).
	StoreResponse bool `json:"store_response"`
	// OutputDir is the folder sweeps are written under (default
	// results/experiments), resolved against the working directory.
	OutputDir string `json:"output_dir"`
	// IgnoreEOS sends vLLM's ignore_eos with every request.
	IgnoreEOS bool `json:"ignore_eos"`
	// ExtraBody is merged into every request body.
	ExtraBody json.RawMessage `json:"extra_body,omitempty"`
	// APIKeyEnv names an environment variable holding a bearer token; the
	// token itself is never written anywhere.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// SLO, when set, adds goodput to every run summary.
	SLO *loadgen.SLO `json:"slo,omitempty"`
	// Target, when set, says the server is started by cmd/sweep.
	Target *Target `json:"target,omitempty"`

	// original is the config file's JSON value, compared with an existing
	// config.json to decide whether a sweep folder is this sweep's.
	original any
}

// decodeJSONExact decodes the JSON value b into v keeping every number as
// written (a json.Number), not as a float64: config.json and the manifest
// record the config as written, and a float64 would turn a seed above 2^53
// (one taken from a clock in nanoseconds) into another seed.
func decodeJSONExact(b []byte, v any) error {
	if !json.Valid(b) {
		return json.Unmarshal(b, v) // encoding/json's message for what is wrong
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// Embedded reports whether the config asks for an in-process target.
func (c *Config) Embedded() bool { return c.Target != nil && c.Target.Kind == targetEmbedded }

// Original returns the config as it was written (before defaults and path
// resolution), the value stored in config.json.
func (c *Config) Original() any { return c.original }

// maxRuns bounds how many runs one sweep may plan: levels × (warmups +
// repeats). Far beyond any real sweep, it turns a typo (repeats: 1e9)
// into an error instead of an hours-long loop that plans runs in memory.
const maxRuns = 100_000

// ErrConfig marks an invalid sweep config; the message names the field.
var ErrConfig = errors.New("invalid sweep config")

func cfgErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

// LoadConfig reads, validates and resolves the sweep config at path.
// Relative paths in it (prompts, output_dir) resolve against the working
// directory, as serving-inference does, not against the config's folder.
//
// Each of engine, KEY=VALUE (VALUE JSON, or else a bare string such as
// cuda), sets a member of an embedded target's target.engine object before
// validation (cmd/sweep's --engine). The overrides become part of the config
// that config.json records, so a sweep folder measured with one backend is
// never resumed with another.
func LoadConfig(path string, engine ...string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(engine) == 0 {
		c, err := parseConfig(b)
		if err != nil {
			return nil, jsonpos.Wrap(path, b, err) // a syntax error's line and column too
		}
		return c, nil
	}
	// Numbers stay as written: through a float64 a seed above 2^53 would
	// change, and 0.0 would pass for the integer the config refuses it as.
	var raw map[string]any
	if err := decodeJSONExact(b, &raw); err != nil {
		return nil, jsonpos.Wrap(path, b, err)
	}
	target, _ := raw["target"].(map[string]any)
	if target == nil || target["kind"] != targetEmbedded {
		return nil, fmt.Errorf("--engine: %s has no embedded target", path)
	}
	eng, _ := target["engine"].(map[string]any)
	if eng == nil {
		eng = map[string]any{}
	}
	for _, o := range engine {
		k, v, ok := strings.Cut(o, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--engine %q: want KEY=VALUE", o)
		}
		var val any
		if err := decodeJSONExact([]byte(v), &val); err != nil {
			val = v // a bare word such as cuda is a string
		}
		eng[k] = val
	}
	target["engine"] = eng
	nb, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(nb)
	if err != nil {
		return nil, fmt.Errorf("%s with --engine overrides: %w", path, err)
	}
	return c, nil
}

var knownFields = []string{
	"name", "prompts", "url", "model", "model_metadata", "server", "num_requests",
	"concurrency", "warmups", "repeats", "seed", "stream", "temperature", "timeout",
	"store_response", "output_dir", "ignore_eos", "extra_body", "api_key_env", "slo", "target",
}

// parseConfig validates a sweep config and applies defaults. Paths are left
// as written; [Config.resolve] makes them absolute.
func parseConfig(b []byte) (*Config, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %w", ErrConfig, err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(knownFields, k) {
			return nil, cfgErr(k, "unknown field")
		}
	}
	c := &Config{Stream: true, Timeout: DefaultTimeoutS, OutputDir: DefaultOutputDir}
	if err := decodeJSONExact(b, &c.original); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	// Decode field by field so that a type error names its field.
	dec := func(name string, dst any, required bool) error {
		raw, ok := fields[name]
		if !ok {
			if required {
				return cfgErr(name, "required")
			}
			return nil
		}
		if string(bytes.TrimSpace(raw)) == "null" && name != "slo" && name != "target" {
			// Decoding null would leave the default, yet serving-inference
			// refuses a null seed or warmups, fails its runs on a null
			// temperature or timeout and reads a null stream as false: the
			// same config must not mean something else here.
			if required {
				return cfgErr(name, "required, got null")
			}
			return cfgErr(name, "must not be null (leave the field out for its default)")
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		if name == "target" || name == "slo" {
			// tinyserve's own objects: a typo there is a mistake, while
			// server and model_metadata may carry whatever a peer records.
			d.DisallowUnknownFields()
		}
		if err := d.Decode(dst); err != nil {
			var ute *json.UnmarshalTypeError
			if errors.As(err, &ute) {
				return cfgErr(name, "want %s, got JSON %s", ute.Type, ute.Value)
			}
			return cfgErr(name, "%v", err)
		}
		return nil
	}
	if err := dec("target", &c.Target, false); err != nil {
		return nil, err
	}
	if c.Target != nil && c.Target.Kind != targetEmbedded {
		return nil, cfgErr("target.kind", "want %q, got %q", targetEmbedded, c.Target.Kind)
	}
	embedded := c.Embedded()
	for _, f := range []struct {
		name     string
		dst      any
		required bool
	}{
		{"name", &c.Name, true},
		{"prompts", &c.Prompts, true},
		{"url", &c.URL, !embedded},
		{"model", &c.Model, !embedded},
		{"model_metadata", &c.ModelMetadata, true},
		{"server", &c.Server, !embedded},
		{"num_requests", &c.NumRequests, true},
		{"concurrency", &c.Concurrency, true},
		{"warmups", &c.Warmups, true},
		{"repeats", &c.Repeats, true},
		{"seed", &c.Seed, true},
		{"stream", &c.Stream, false},
		{"temperature", &c.Temperature, false},
		{"timeout", &c.Timeout, false},
		{"store_response", &c.StoreResponse, false},
		{"output_dir", &c.OutputDir, false},
		{"ignore_eos", &c.IgnoreEOS, false},
		{"api_key_env", &c.APIKeyEnv, false},
		{"slo", &c.SLO, false},
	} {
		if err := dec(f.name, f.dst, f.required); err != nil {
			return nil, err
		}
	}
	if raw, ok := fields["extra_body"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		c.ExtraBody = raw
	}
	if err := c.validate(fields); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) validate(fields map[string]json.RawMessage) error {
	switch {
	case c.Name == "" || c.Name == "." || c.Name == ".." || strings.ContainsAny(c.Name, `/\`) || filepath.Base(c.Name) != c.Name:
		return cfgErr("name", "must be a non-empty path-safe value, got %q", c.Name)
	case c.Prompts == "":
		return cfgErr("prompts", "must not be empty")
	case c.NumRequests <= 0:
		return cfgErr("num_requests", "must be a positive integer, got %d", c.NumRequests)
	case len(c.Concurrency) == 0:
		return cfgErr("concurrency", "must contain positive integers")
	case c.Warmups < 0:
		return cfgErr("warmups", "must be a non-negative integer, got %d", c.Warmups)
	case c.Repeats <= 0:
		return cfgErr("repeats", "must be a positive integer, got %d", c.Repeats)
	case c.Temperature < 0:
		return cfgErr("temperature", "must be non-negative, got %v", c.Temperature)
	case c.OutputDir == "":
		return cfgErr("output_dir", "must not be empty")
	}
	if _, err := loadgen.TimeoutDuration(c.Timeout); err != nil {
		return cfgErr("timeout", "%v", err)
	}
	if raw, ok := fields["seed"]; ok && bytes.ContainsAny(raw, ".eE") {
		return cfgErr("seed", "must be an integer, got %s", raw)
	}
	if c.Warmups > maxRuns || c.Repeats > maxRuns || int64(c.Warmups+c.Repeats)*int64(len(c.Concurrency)) > maxRuns {
		return cfgErr("repeats", "%d levels × (%d warmups + %d repeats) is more than %d runs", len(c.Concurrency), c.Warmups, c.Repeats, maxRuns)
	}
	seen := map[int]bool{}
	for i, v := range c.Concurrency {
		if v <= 0 {
			return cfgErr(fmt.Sprintf("concurrency[%d]", i), "must be a positive integer, got %d", v)
		}
		if seen[v] {
			return cfgErr(fmt.Sprintf("concurrency[%d]", i), "duplicate level %d", v)
		}
		seen[v] = true
	}
	for _, k := range []string{"revision", "dtype", "quantization", "max_model_len"} {
		if _, ok := c.ModelMetadata[k]; !ok {
			return cfgErr("model_metadata."+k, "required (null is allowed)")
		}
	}
	if _, ok := fields["server"]; ok {
		var s map[string]json.RawMessage
		_ = json.Unmarshal(fields["server"], &s)
		if _, ok := s["launch_flags"]; !ok {
			return cfgErr("server.launch_flags", "must explicitly record the server command flags")
		}
	}
	if !c.Embedded() {
		lo := loadgen.LoadOptions{URL: c.URL, Model: c.Model, Concurrency: 1}
		if err := lo.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	} else if len(c.Target.Engine) == 0 {
		return cfgErr("target.engine", "required for an embedded target")
	} else if a := c.Target.API; a != "" && a != loadgen.APICompletions && a != loadgen.APIChat {
		return cfgErr("target.api", "want %q or %q, got %q", loadgen.APICompletions, loadgen.APIChat, a)
	}
	if _, err := loadgen.ExtraBodyFragment(c.ExtraBody, c.API()); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.SLO != nil && (c.SLO.TTFTS < 0 || c.SLO.TPOTS < 0 || c.SLO.LatencyS < 0) {
		return cfgErr("slo", "thresholds must be non-negative seconds")
	}
	if c.SLO != nil && !c.Stream && (c.SLO.TTFTS > 0 || c.SLO.TPOTS > 0) {
		return fmt.Errorf("%w: %v", ErrConfig, loadgen.ErrSLONeedsStream)
	}
	return nil
}

// resolve returns a copy with prompts and output_dir made absolute against
// dir (the working directory).
func (c *Config) resolve(dir string) *Config {
	r := *c
	if !filepath.IsAbs(r.Prompts) {
		r.Prompts = filepath.Join(dir, r.Prompts)
	}
	if !filepath.IsAbs(r.OutputDir) {
		r.OutputDir = filepath.Join(dir, r.OutputDir)
	}
	return &r
}

// API is the API the sweep speaks: its url's ([loadgen.APIForURL]) once the url is
// known, else, for an embedded target whose server is not yet started,
// target.api (completions when absent).
func (c *Config) API() loadgen.API {
	if c.URL == "" && c.Embedded() && c.Target.API != "" {
		return c.Target.API
	}
	return loadgen.APIForURL(c.URL)
}

// resolvedView is the resolved config as recorded in summary.json and the
// manifest: every default spelled out, and the API the url speaks ("api",
// derived from the url rather than a config key, so that the schema stays
// serving-inference's).
func (c *Config) resolvedView() map[string]any {
	b, _ := json.Marshal(c)
	var m map[string]any
	_ = decodeJSONExact(b, &m)
	if m != nil {
		m["api"] = string(c.API())
	}
	return m
}
