package model

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
			if got.Defaults.String() != tt.want.String() {
				t.Errorf("got %q, want %q", got.Defaults, tt.want)
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
	if want := "temperature=0.7 repetition_penalty=1.3"; got.Defaults.String() != want {
		t.Errorf("without generation_config.json: %q, want %q", got.Defaults, want)
	}
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"top_p": 0.9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadGenerationConfig(dir); err != nil || got.Defaults.String() != "top_p=0.9" {
		t.Errorf("with generation_config.json: %q, %v; want only its top_p=0.9", got.Defaults, err)
	}
}

// TestGenerationConfigEOS: generation_config.json's eos_token_id (a number
// or a list) adds stop ids after config.json's own; config.json's
// eos_token_id is never read as the generation config's, and an id the
// vocabulary lacks fails the load naming the file.
func TestGenerationConfigEOS(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []int
		err  string
	}{
		{`{"eos_token_id": 50256}`, []int{50256}, ""},
		{`{"eos_token_id": [151645, 151643]}`, []int{151645, 151643}, ""},
		{`{"eos_token_id": null}`, nil, ""},
		{`{"temperature": 0.5}`, nil, ""},
		{`{"eos_token_id": "x"}`, nil, "eos_token_id must be a token id or a list of them"},
		{`{"eos_token_id": [1, -2]}`, nil, "eos_token_id must be a token id or a list of them"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadGenerationConfig(dir)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want a bad checkpoint mentioning %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got.EOSTokenIDs, tc.want) {
			t.Errorf("%s: EOS %v, %v; want %v", tc.file, got.EOSTokenIDs, err, tc.want)
		}
	}

	// Without generation_config.json, config.json's eos_token_id is the
	// config's own, not an extra stop id.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"n_embd": 8, "eos_token_id": 5, "temperature": 0.5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadGenerationConfig(dir); err != nil || got.EOSTokenIDs != nil || got.Defaults.String() != "temperature=0.5" {
		t.Errorf("from config.json: %+v, %v; want temperature=0.5 and no EOS ids", got, err)
	}

	// Load adds them after config.json's, without repeats; one past the
	// vocabulary is refused.
	dir = torchDir(t, "zip-f32.bin", "pytorch_model.bin") // vocab 96, eos 95
	gen := filepath.Join(dir, GenerationConfigFile)
	if err := os.WriteFile(gen, []byte(`{"eos_token_id": [7, 95, 3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ids := m.EOSTokenIDs(); !slices.Equal(ids, []int{95, 7, 3}) {
		t.Errorf("EOSTokenIDs %v, want [95 7 3]", ids)
	}
	if info := m.Info(); info.EOSTokenID != 95 || !slices.Equal(info.StopTokenIDs, []int{7, 3}) {
		t.Errorf("Info: EOS %d, stop ids %v; want 95 and [7 3]", info.EOSTokenID, info.StopTokenIDs)
	}
	m.Close()
	if err := os.WriteFile(gen, []byte(`{"eos_token_id": 96}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), gen) || !strings.Contains(err.Error(), "eos_token_id 96 out of vocabulary range [0, 96)") {
		t.Errorf("eos_token_id past the vocabulary: %v", err)
	}
}
