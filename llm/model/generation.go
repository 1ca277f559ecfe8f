package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/tinyserve/tinyserve/llm"
)

// GenerationConfigFile is the file of a checkpoint folder that holds the
// model's recommended generation settings (transformers' GenerationConfig).
const GenerationConfigFile = "generation_config.json"

// ReadGenerationConfig reads the sampling defaults of the
// generation_config.json in dir, as vLLM's --generation-config auto reads
// them: temperature, top_p, top_k, min_p and repetition_penalty, each only
// where it differs from transformers' own default (temperature 1, top_p 1,
// top_k 50, repetition_penalty 1; min_p has none), because vLLM takes the
// file's difference from those defaults (GenerationConfig.to_diff_dict). A
// folder without the file takes the same keys from its config.json, as vLLM
// then builds the generation config from the model's config
// (GenerationConfig.from_model_config; checkpoints saved before
// generation_config.json existed kept them there); a folder with neither has
// no defaults. max_new_tokens (transformers has no default for it) becomes
// MaxTokens, what a request's "max_tokens": null means; a request that
// leaves max_tokens out still gets the API's 16, as in vLLM. Errors match
// ErrBadCheckpoint and name the file and the field.
func ReadGenerationConfig(dir string) (GenerationConfig, error) {
	d, eos, err := readGenerationConfig(dir)
	return GenerationConfig{Defaults: d, EOSTokenIDs: eos}, err
}

// GenerationConfig is what tinyserve reads of a generation_config.json.
type GenerationConfig struct {
	// Defaults are the sampling defaults for what a request leaves out.
	Defaults llm.SamplingDefaults
	// EOSTokenIDs are its eos_token_id (a number or a list): every one
	// ends a sequence, as transformers' generate and vLLM stop at each.
	EOSTokenIDs []int
}

func readGenerationConfig(dir string) (llm.SamplingDefaults, []int, error) {
	path := filepath.Join(dir, GenerationConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		path = filepath.Join(dir, "config.json")
		data, err = os.ReadFile(path)
	}
	if errors.Is(err, os.ErrNotExist) {
		return llm.SamplingDefaults{}, nil, nil
	}
	if err != nil {
		return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	var raw struct {
		Temperature       *float64 `json:"temperature"`
		TopP              *float64 `json:"top_p"`
		TopK              *int     `json:"top_k"`
		MinP              *float64 `json:"min_p"`
		RepetitionPenalty *float64 `json:"repetition_penalty"`
		MaxNewTokens      *int     `json:"max_new_tokens"`
		EOSTokenID        any      `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			// Said in the file's terms, not Go's ("cannot unmarshal string
			// into Go struct field .temperature of type float64").
			want := "a number"
			if te.Type != nil && te.Type.Kind() == reflect.Int {
				want = "an integer"
			}
			return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: %s must be %s, not a JSON %s", ErrBadCheckpoint, path, te.Field, want, te.Value)
		}
		return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	differs := func(v *float64, hfDefault float64) *float64 {
		if v == nil || *v == hfDefault {
			return nil
		}
		return v
	}
	d := llm.SamplingDefaults{
		Temperature:       differs(raw.Temperature, 1),
		TopP:              differs(raw.TopP, 1),
		MinP:              raw.MinP,
		RepetitionPenalty: differs(raw.RepetitionPenalty, 1),
		MaxTokens:         raw.MaxNewTokens,
	}
	if raw.TopK != nil && *raw.TopK != 50 {
		d.TopK = raw.TopK
	}
	// The engine reads top_p 0 and repetition_penalty 0 as "off", the
	// opposite of what the file says; vLLM refuses both (as the server
	// refuses them in a request), so the file is refused here.
	if d.TopP != nil && *d.TopP == 0 {
		return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: top_p must be in (0, 1], got 0", ErrBadCheckpoint, path)
	}
	if d.RepetitionPenalty != nil && *d.RepetitionPenalty == 0 {
		return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: repetition_penalty must be greater than zero, got 0", ErrBadCheckpoint, path)
	}
	if d.MaxTokens != nil && *d.MaxTokens < 1 {
		// vLLM would pass it on as a request's max_tokens, which its
		// sampling parameters refuse below 1.
		return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: max_new_tokens must be at least 1, got %d", ErrBadCheckpoint, path, *d.MaxTokens)
	}
	// Checked once here rather than in every request that would use them.
	p := llm.SamplingParams{MaxTokens: 1, Temperature: 1, TopP: 1}
	d.Apply(&p)
	if err := p.Validate(); err != nil {
		return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	var eos []int
	if filepath.Base(path) == GenerationConfigFile {
		// config.json's ids are the config's own; only the generation
		// config adds any.
		if eos, err = eosIDs(raw.EOSTokenID); err != nil {
			return llm.SamplingDefaults{}, nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
		}
	}
	return d, eos, nil
}

// eosIDs reads an eos_token_id value: null, a number or a list of numbers.
func eosIDs(v any) ([]int, error) {
	var list []any
	switch v := v.(type) {
	case nil:
		return nil, nil
	case float64:
		list = []any{v}
	case []any:
		list = v
	default:
		return nil, fmt.Errorf("eos_token_id must be a token id or a list of them, not %v", v)
	}
	var ids []int
	for _, x := range list {
		f, ok := x.(float64)
		if !ok || f != float64(int(f)) || f < 0 {
			return nil, fmt.Errorf("eos_token_id must be a token id or a list of them, not %v", v)
		}
		ids = append(ids, int(f))
	}
	return ids, nil
}
