package tinyserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Setting is one engine setting of Config, declared once: every spelling
// and rule of it derives from this entry, so that a setting cannot be
// added to the command line and forgotten in the sweep's JSON, or
// validated in one and not the other. The command-line flag is --Name
// (internal/cli builds the flags, and their TINYSERVE_ variables, from
// Settings); the key of the sweep's target.engine object is JSONName.
type Setting struct {
	// Name is the flag's name, as vllm serve spells it where the concept
	// is the same (max-num-seqs).
	Name string
	// Usage is the flag's help text.
	Usage string
	// Default is the flag's value when it is not given, of the field's
	// type; nil means the type's zero value. Config's zero value means
	// the same defaults, so Default only says what --help shows.
	Default any
	// Field returns the setting's field of c: a *string, *int, *int64,
	// *float64, *bool or **uint64 (an optional number: nil means unset).
	Field func(c *Config) any
	// Rule is what a given value must satisfy.
	Rule Rule
	// Backends are the backends that honour the setting; nil means every
	// one. Open refuses the setting given for another backend rather than
	// ignore it: a run that ignored --tokenizer on the mock would report
	// byte counts as the named tokenizer's, and one that ignored --threads
	// on cuda would be recorded as if it had used them.
	Backends []string
	// Neutral is a value that asks for nothing, as the zero value does
	// (auto, none), and so is not refused on a backend outside Backends.
	Neutral string
	// OwnFlag marks a setting whose flag is not among the engine flags
	// every binary shares: a binary that takes it adds its flag itself
	// (cmd/serve's --seed; cmd/generate's --seed is a request's own).
	OwnFlag bool
}

// Rule is a check on a setting's value.
type Rule int

// Rules a setting's value may have to satisfy.
const (
	// AnyValue accepts whatever the type holds.
	AnyValue Rule = iota
	// NonNegative refuses a number below zero: a negative size is a
	// mistake, not the default that 0 means.
	NonNegative
	// Fraction asks for a number in (0, 1].
	Fraction
)

// JSONName is the setting's key in an engine settings object (the sweep's
// target.engine): the flag name with underscores (max_num_seqs).
func (s Setting) JSONName() string { return strings.ReplaceAll(s.Name, "-", "_") }

// Check returns an error when v, a value of the setting's type, breaks its
// Rule; spelling is how the error names the setting (--max-num-seqs on a
// command line, max_num_seqs in JSON).
func (s Setting) Check(spelling string, v any) error {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		return nil
	}
	switch {
	case s.Rule == NonNegative && f < 0:
		return fmt.Errorf("%s must not be negative, got %v", spelling, v)
	case s.Rule == Fraction && (f <= 0 || f > 1):
		return fmt.Errorf("%s must be in (0, 1], got %v", spelling, v)
	}
	return nil
}

// Value is the setting's value in c (for **uint64 fields, the *uint64).
func (s Setting) Value(c *Config) any {
	switch p := s.Field(c).(type) {
	case *string:
		return *p
	case *int:
		return *p
	case *int64:
		return *p
	case *float64:
		return *p
	case *bool:
		return *p
	case **uint64:
		return *p
	}
	panic(fmt.Sprintf("tinyserve: setting %s has a field of unknown type", s.Name))
}

// Given reports whether c sets the setting to something other than its
// zero value or its Neutral one.
func (s Setting) Given(c *Config) bool {
	v := s.Value(c)
	return !isZero(v) && (s.Neutral == "" || v != any(s.Neutral))
}

// isZero reports whether v is its type's zero value: the default, for
// every setting of Config.
func isZero(v any) bool {
	switch x := v.(type) {
	case *uint64:
		return x == nil
	case string:
		return x == ""
	case int:
		return x == 0
	case int64:
		return x == 0
	case float64:
		return x == 0
	case bool:
		return !x
	}
	return false
}

// Settings returns the engine settings of Config, in the order --help
// lists their flags; the first bad one of several is the one an error
// names. It returns a fresh copy, so that no caller can change the table.
func Settings() []Setting {
	out := slices.Clone(settings)
	for i := range out {
		out[i].Backends = slices.Clone(out[i].Backends)
	}
	return out
}

// cpuAndCUDA are the backends that load a model: the mock serves its own.
var cpuAndCUDA = []string{BackendCPU, BackendCUDA}

// settings is the table Settings returns; it is never changed.
var settings = []Setting{
	{Name: "model", Default: DefaultModel, Field: func(c *Config) any { return &c.Model },
		Usage: "built-in model (tiny-gpt2, gpt2-124m-random, qwen2.5-0.5b-random; random weights), a Hugging Face checkpoint folder (GPT-2, Llama, Qwen2, Qwen3) or its id in the local Hugging Face cache (openai-community/gpt2), a GGUF file, or an ollama model in the local ollama store (qwen2.5:0.5b-instruct-q8_0); never downloaded"},
	{Name: "revision", Backends: cpuAndCUDA, Field: func(c *Config) any { return &c.Revision },
		Usage: "branch, tag or commit hash of a --model given as a Hugging Face id (default: the cache's main)"},
	{Name: "load-format", Backends: cpuAndCUDA, Neutral: "auto", Default: "auto", Field: func(c *Config) any { return &c.LoadFormat },
		Usage: "how weights are read, as vLLM's: auto (safetensors, else pytorch_model.bin), safetensors, pt, or dummy (random weights in config.json's shape)"},
	{Name: "backend", Default: BackendCPU, Field: func(c *Config) any { return &c.Backend },
		Usage: "cpu, cuda or mock"},
	{Name: "dtype", Backends: cpuAndCUDA, Neutral: "auto", Default: "auto", Field: func(c *Config) any { return &c.DType },
		Usage: "weight type: auto (cpu: float32, cuda: float16), float16 or half (cuda), bfloat16, float32 or float"},
	{Name: "quantization", Backends: cpuAndCUDA, Neutral: "none", Field: func(c *Config) any { return &c.Quantization },
		Usage: "quantize the weight matrices at load: none (default) or q8_0 (ggml's 8-bit blocks; cpu: 8-bit products, cuda: dequantized at upload)"},
	{Name: "tokenizer", Backends: cpuAndCUDA, Field: func(c *Config) any { return &c.Tokenizer },
		Usage: "tokenizer override: gpt2, a tokenizer.json, a model folder or a Hugging Face id in the local cache"},
	{Name: "tokenizer-revision", Backends: cpuAndCUDA, Field: func(c *Config) any { return &c.TokenizerRevision },
		Usage: "branch, tag or commit hash of the tokenizer's Hugging Face id (--tokenizer, else --model's)"},
	{Name: "tokenizer-dir", Field: func(c *Config) any { return &c.TokenizerDir },
		Usage: "extra folder searched for Hugging Face tokenizer ids"},
	{Name: "served-model-name", Field: func(c *Config) any { return &c.ServedModelName },
		Usage: "model name clients use (default: the model's id)"},
	{Name: "chat-template", Field: func(c *Config) any { return &c.ChatTemplate },
		Usage: "chat template for /v1/chat/completions, as vLLM's: a file, or the template itself (default: the model's)"},
	{Name: "max-num-seqs", Rule: NonNegative, Field: func(c *Config) any { return &c.MaxNumSeqs },
		Usage: "most sequences running at once (0: 256)"},
	{Name: "max-num-batched-tokens", Rule: NonNegative, Field: func(c *Config) any { return &c.MaxNumBatchedTokens },
		Usage: "token budget of one step (0: 2048)"},
	{Name: "block-size", Default: 16, Rule: NonNegative, Field: func(c *Config) any { return &c.BlockSize },
		Usage: "tokens per KV block"},
	{Name: "num-blocks", Rule: NonNegative, Field: func(c *Config) any { return &c.NumBlocks },
		Usage: "KV blocks in the pool (0: what the memory budget holds)"},
	{Name: "max-model-len", Rule: NonNegative, Field: func(c *Config) any { return &c.MaxModelLen },
		Usage: "context length cap (0: the model's)"},
	{Name: "max-pending", Rule: NonNegative, Field: func(c *Config) any { return &c.MaxPending },
		Usage: "requests that may wait to run before new ones are refused (0: 1024)"},
	{Name: "gpu-memory-utilization", Backends: []string{BackendCUDA}, Default: 0.9, Rule: Fraction, Field: func(c *Config) any { return &c.GPUMemoryUtilization },
		Usage: "fraction of free GPU memory for the KV cache (cuda)"},
	{Name: "kv-cache-bytes", Backends: []string{BackendCPU}, Rule: NonNegative, Field: func(c *Config) any { return &c.KVCacheBytes },
		Usage: "KV cache budget in bytes (cpu; 0: the backend's default)"},
	{Name: "threads", Backends: []string{BackendCPU}, Rule: NonNegative, Field: func(c *Config) any { return &c.Threads },
		Usage: "CPU threads for the forward pass (0: GOMAXPROCS)"},
	{Name: "generation-config", Backends: cpuAndCUDA, Neutral: "auto", Default: "auto", Field: func(c *Config) any { return &c.GenerationConfig },
		Usage: "default sampling settings for what a request leaves out: auto (the checkpoint's generation_config.json, as vLLM), vllm (the API's own), or a folder holding a generation_config.json (whose max_new_tokens also limits every request's max_tokens)"},
	{Name: "enable-prefix-caching", Field: func(c *Config) any { return &c.EnablePrefixCaching },
		Usage: "reuse the KV of prompt prefixes earlier requests computed (off by default: repeated benchmark prompts would measure the cache)"},
	{Name: "enforce-eager", Field: func(c *Config) any { return &c.EnforceEager },
		Usage: "run every step eagerly: no CUDA graphs (cuda; the cpu and mock backends are always eager)"},
	{Name: "seed", OwnFlag: true, Rule: NonNegative, Field: func(c *Config) any { return &c.Seed },
		Usage: "seed of the seeds of requests that give none, as vLLM's --seed: the same seed and requests sent one at a time sample the same text (default: from the clock)"},
}

// SettingNamed returns the setting whose flag is --name.
func SettingNamed(name string) (Setting, bool) {
	for _, s := range settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// DecodeConfigJSON parses an engine settings object (the sweep's
// target.engine: each setting's JSONName), rejecting unknown keys so that
// a typo in a sweep file is an error rather than a default, and values
// that break a setting's Rule. A key left out, or a zero value, means the
// setting's default.
func DecodeConfigJSON(data []byte) (Config, error) {
	var c Config
	if err := c.UnmarshalJSON(data); err != nil {
		return Config{}, fmt.Errorf("engine settings: %w", err)
	}
	return c, nil
}

// UnmarshalJSON implements json.Unmarshaler with the JSON names of
// Settings, as DecodeConfigJSON (which adds its context to errors). The
// settings it reads replace c's; other fields are kept.
func (c *Config) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil {
		return err
	} else if t != json.Delim('{') {
		return fmt.Errorf("want a JSON object, got %v", t)
	}
	byKey := make(map[string]Setting, len(settings))
	for _, s := range settings {
		byKey[s.JSONName()] = s
	}
	next := *c
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key := t.(string) // an object's keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		s, ok := byKey[key]
		if !ok {
			return fmt.Errorf("json: unknown field %q", key)
		}
		if err := json.Unmarshal(raw, s.Field(&next)); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	// In Settings order, so that the first bad key of several is always
	// the one named. Zero is each setting's default, never a mistake.
	for _, s := range settings {
		if v := s.Value(&next); !isZero(v) {
			if err := s.Check(s.JSONName(), v); err != nil {
				return err
			}
		}
	}
	*c = next
	return nil
}

// MarshalJSON implements json.Marshaler: the settings that are not their
// default, by their JSON names, in Settings order; what DecodeConfigJSON
// reads back.
func (c Config) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, s := range settings {
		v := s.Value(&c)
		if isZero(v) {
			continue
		}
		val, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.JSONName(), err)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(s.JSONName())
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
