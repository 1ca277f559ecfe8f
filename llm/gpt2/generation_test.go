package gpt2

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

func TestReadGenerationConfig(t *testing.T) {
	f, i := func(v float64) *float64 { return &v }, func(v int) *int { return &v }
	tests := []struct {
		name, file string // file "" writes none
		want       llm.SamplingDefaults
		err        string
	}{
		{"no file", "", llm.SamplingDefaults{}, ""},
		// GPT-2's own: no sampling settings.
		{"gpt2", `{"_from_model_config": true, "bos_token_id": 50256, "eos_token_id": 50256, "transformers_version": "4.26.0.dev0"}`, llm.SamplingDefaults{}, ""},
		// Values equal to transformers' defaults are not differences, so
		// vLLM (GenerationConfig.to_diff_dict) ignores them.
		{"transformers' defaults", `{"do_sample": true, "temperature": 1.0, "top_p": 1.0, "top_k": 50, "repetition_penalty": 1.0}`, llm.SamplingDefaults{}, ""},
		{"settings", `{"do_sample": true, "temperature": 0.7, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "max_new_tokens": 128}`,
			llm.SamplingDefaults{Temperature: f(0.7), TopP: f(0.95), TopK: i(40), MinP: f(0.05), RepetitionPenalty: f(1.1), MaxTokens: i(128)}, ""},
		// max_length (prompt plus output, default 20) is not vLLM's
		// max_tokens and is not read.
		{"max_length alone", `{"max_length": 50}`, llm.SamplingDefaults{}, ""},
		{"max_new_tokens 0", `{"max_new_tokens": 0}`, llm.SamplingDefaults{}, "max_new_tokens must be at least 1, got 0"},
		{"top_k 0 turns the default 50 off", `{"top_k": 0}`, llm.SamplingDefaults{TopK: i(0)}, ""},
		{"not JSON", `{"temperature":`, llm.SamplingDefaults{}, "generation_config.json"},
		{"wrong type", `{"temperature": "hot"}`, llm.SamplingDefaults{}, "temperature must be a number, not a JSON string"},
		{"wrong type for an integer", `{"top_k": 4.5}`, llm.SamplingDefaults{}, "top_k must be an integer, not a JSON number 4.5"},
		{"out of range", `{"top_p": 1.5}`, llm.SamplingDefaults{}, "top_p"},
		// The engine reads 0 as "off" for these two; vLLM refuses 0 (a
		// request sending it gets a 400), so the file is refused rather
		// than its 0 turned into the opposite of what it says.
		{"top_p 0", `{"top_p": 0}`, llm.SamplingDefaults{}, "top_p"},
		{"repetition_penalty 0", `{"repetition_penalty": 0.0}`, llm.SamplingDefaults{}, "repetition_penalty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.file != "" {
				if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadGenerationConfig(dir)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrBadCheckpoint) {
					t.Fatalf("err = %v, want a bad checkpoint mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want.String() {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLoadReadsGenerationConfig: a checkpoint's generation_config.json
// reaches the model's Info, where a server finds it.
func TestLoadReadsGenerationConfig(t *testing.T) {
	dir := torchDir(t, "zip-f32.bin", "pytorch_model.bin")
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"temperature": 0.6, "top_k": 20}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Info().Defaults.String(); got != "temperature=0.6 top_k=20" {
		t.Errorf("Info().Defaults = %q", got)
	}
}

// TestReadGenerationConfigFallsBackToConfigJSON: without a
// generation_config.json, vLLM builds the generation config from
// config.json (transformers' GenerationConfig.from_model_config), so a
// sampling key set there, as checkpoints saved before generation_config.json
// existed set them, is a default too; with the file, config.json's keys do
// not count.
func TestReadGenerationConfigFallsBackToConfigJSON(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"n_embd": 8, "temperature": 0.7, "top_k": 50, "repetition_penalty": 1.3, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadGenerationConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "temperature=0.7 repetition_penalty=1.3"; got.String() != want {
		t.Errorf("without generation_config.json: %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"top_p": 0.9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadGenerationConfig(dir); err != nil || got.String() != "top_p=0.9" {
		t.Errorf("with generation_config.json: %q, %v; want only its top_p=0.9", got, err)
	}
}
