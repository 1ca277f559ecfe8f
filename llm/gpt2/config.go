package gpt2

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrBadCheckpoint is matched (errors.Is) by every error that Load returns
// because a checkpoint folder's contents are wrong: bad config.json, missing
// or malformed tensors, unreadable safetensors files. Errors that are not
// about the checkpoint (a missing folder, permission denied) wrap the os error
// instead.
var ErrBadCheckpoint = errors.New("gpt2: bad checkpoint")

// Activation names the MLP nonlinearity.
type Activation string

// Activations GPT-2 checkpoints use. HF's "gelu_new", "gelu_pytorch_tanh" and
// "gelu_fast" are the same tanh approximation; "gelu" is the exact erf form.
const (
	GeluTanh Activation = "gelu_new"
	GeluErf  Activation = "gelu"
)

// Config is the model shape and the numerical settings of a GPT-2 model,
// as Hugging Face's GPT2Config spells them.
type Config struct {
	VocabSize  int // tokens in the vocabulary (50257 for GPT-2)
	NPositions int // context length in tokens: learned position embeddings
	NEmbd      int // width of the residual stream
	NLayer     int // transformer blocks
	NHead      int // attention heads; NEmbd must be a multiple of NHead
	NInner     int // MLP width; 0 in config.json means 4*NEmbd (filled in by Validate)
	// LayerNormEpsilon is the epsilon of every LayerNorm (1e-5 for GPT-2).
	LayerNormEpsilon float64
	// Activation is the MLP nonlinearity.
	Activation Activation
	// ScaleAttnWeights divides attention scores by sqrt(head_dim) (true for
	// every released GPT-2).
	ScaleAttnWeights bool
	// ScaleAttnByInverseLayerIdx additionally divides layer i's scores by
	// i+1 (a Mistral-era GPT-2 variant; false for OpenAI's weights).
	ScaleAttnByInverseLayerIdx bool
	// BOSTokenID and EOSTokenID are -1 when absent.
	BOSTokenID int
	EOSTokenID int
	// SeparateLMHead is config.json's tie_word_embeddings false: the output
	// layer is the checkpoint's own lm_head.weight. False (the default, and
	// every released GPT-2) ties it to wte, as transformers and vLLM do.
	SeparateLMHead bool
}

// HeadDim is the width of one attention head.
func (c *Config) HeadDim() int { return c.NEmbd / c.NHead }

// Validate checks the shape and fills defaults (NInner 0 -> 4*NEmbd).
func (c *Config) Validate() error {
	switch {
	case c.VocabSize < 1:
		return fmt.Errorf("vocab_size must be positive, got %d", c.VocabSize)
	case c.NPositions < 1:
		return fmt.Errorf("n_positions must be positive, got %d", c.NPositions)
	case c.NEmbd < 1:
		return fmt.Errorf("n_embd must be positive, got %d", c.NEmbd)
	case c.NLayer < 1:
		return fmt.Errorf("n_layer must be positive, got %d", c.NLayer)
	case c.NHead < 1:
		return fmt.Errorf("n_head must be positive, got %d", c.NHead)
	case c.NEmbd%c.NHead != 0:
		return fmt.Errorf("n_embd %d is not a multiple of n_head %d", c.NEmbd, c.NHead)
	case c.NInner < 0:
		return fmt.Errorf("n_inner must be positive or null, got %d", c.NInner)
	case !(c.LayerNormEpsilon > 0 && c.LayerNormEpsilon < 1):
		return fmt.Errorf("layer_norm_epsilon must be in (0, 1), got %v", c.LayerNormEpsilon)
	case c.Activation != GeluTanh && c.Activation != GeluErf:
		return fmt.Errorf("activation_function %q is not supported (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu)", c.Activation)
	case c.EOSTokenID >= c.VocabSize || c.BOSTokenID >= c.VocabSize || c.EOSTokenID < -1 || c.BOSTokenID < -1:
		return fmt.Errorf("bos/eos token id (%d/%d) out of vocabulary range [0, %d) (null for none)", c.BOSTokenID, c.EOSTokenID, c.VocabSize)
	}
	// Guard against sizes whose products overflow int or that no machine
	// could hold, so that a hostile config.json cannot make later arithmetic
	// wrap around.
	const maxDim = 1 << 24
	if c.VocabSize > maxDim || c.NPositions > maxDim || c.NEmbd > maxDim || c.NLayer > 4096 || c.NInner > maxDim {
		return fmt.Errorf("model dimensions are implausibly large (vocab %d, positions %d, n_embd %d, layers %d, n_inner %d)",
			c.VocabSize, c.NPositions, c.NEmbd, c.NLayer, c.NInner)
	}
	if c.NInner == 0 {
		c.NInner = 4 * c.NEmbd
	}
	return nil
}

// hfConfig is config.json as written by transformers' GPT2Config. Pointers
// tell "absent" from zero where the default is not zero.
type hfConfig struct {
	ModelType                  string   `json:"model_type"`
	VocabSize                  int      `json:"vocab_size"`
	NPositions                 int      `json:"n_positions"`
	NCtx                       int      `json:"n_ctx"`
	NEmbd                      int      `json:"n_embd"`
	NLayer                     int      `json:"n_layer"`
	NHead                      int      `json:"n_head"`
	NInner                     *int     `json:"n_inner"`
	ActivationFunction         string   `json:"activation_function"`
	LayerNormEpsilon           *float64 `json:"layer_norm_epsilon"`
	ScaleAttnWeights           *bool    `json:"scale_attn_weights"`
	ScaleAttnByInverseLayerIdx bool     `json:"scale_attn_by_inverse_layer_idx"`
	BOSTokenID                 *int     `json:"bos_token_id"`
	EOSTokenID                 *int     `json:"eos_token_id"`
	TieWordEmbeddings          *bool    `json:"tie_word_embeddings"`
}

// ParseConfig parses a Hugging Face GPT-2 config.json. Fields absent from the
// file take GPT2Config's defaults (gelu_new, epsilon 1e-5, scaled attention,
// n_inner 4*n_embd); the shape fields are required.
func ParseConfig(data []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return Config{}, fmt.Errorf("parse: %w", err)
	}
	if h.ModelType != "" && h.ModelType != "gpt2" {
		return Config{}, fmt.Errorf("model_type %q is not gpt2", h.ModelType)
	}
	c := Config{
		VocabSize:                  h.VocabSize,
		NPositions:                 h.NPositions,
		NEmbd:                      h.NEmbd,
		NLayer:                     h.NLayer,
		NHead:                      h.NHead,
		LayerNormEpsilon:           1e-5,
		Activation:                 GeluTanh,
		ScaleAttnWeights:           true,
		ScaleAttnByInverseLayerIdx: h.ScaleAttnByInverseLayerIdx,
		BOSTokenID:                 -1,
		EOSTokenID:                 -1,
	}
	if c.NPositions == 0 {
		c.NPositions = h.NCtx // very old configs only have n_ctx
	}
	if h.NInner != nil {
		c.NInner = *h.NInner
	}
	if h.LayerNormEpsilon != nil {
		c.LayerNormEpsilon = *h.LayerNormEpsilon
	}
	if h.ScaleAttnWeights != nil {
		c.ScaleAttnWeights = *h.ScaleAttnWeights
	}
	if h.BOSTokenID != nil {
		c.BOSTokenID = *h.BOSTokenID
	}
	if h.EOSTokenID != nil {
		c.EOSTokenID = *h.EOSTokenID
	}
	if h.TieWordEmbeddings != nil {
		c.SeparateLMHead = !*h.TieWordEmbeddings
	}
	switch h.ActivationFunction {
	case "", "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		c.Activation = GeluTanh
	default:
		c.Activation = Activation(h.ActivationFunction)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfig reads and parses dir/config.json.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := readCheckpointFile(path)
	if err != nil {
		if errors.Is(err, ErrBadCheckpoint) {
			return Config{}, err
		}
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() && errors.Is(err, fs.ErrNotExist) {
			// The folder exists but is not a checkpoint.
			return Config{}, fmt.Errorf("%w: %s: no config.json", ErrBadCheckpoint, dir)
		}
		return Config{}, fmt.Errorf("gpt2: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	return c, nil
}

// readCheckpointFile is os.ReadFile for a checkpoint's JSON files, except
// that a folder where the file belongs is a bad checkpoint, as a folder
// where the weights belong is: the read fails either way, but only this
// says which name is wrong and matches ErrBadCheckpoint.
func readCheckpointFile(path string) ([]byte, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%w: %s is a folder, not a file", ErrBadCheckpoint, path)
	}
	return os.ReadFile(path)
}

// marshalConfig writes c as a config.json that transformers' GPT2Config and
// ParseConfig both read.
func marshalConfig(c Config) ([]byte, error) {
	act := string(c.Activation)
	m := map[string]any{
		"model_type":                      "gpt2",
		"architectures":                   []string{"GPT2LMHeadModel"},
		"vocab_size":                      c.VocabSize,
		"n_positions":                     c.NPositions,
		"n_ctx":                           c.NPositions,
		"n_embd":                          c.NEmbd,
		"n_layer":                         c.NLayer,
		"n_head":                          c.NHead,
		"n_inner":                         c.NInner,
		"activation_function":             act,
		"layer_norm_epsilon":              c.LayerNormEpsilon,
		"scale_attn_weights":              c.ScaleAttnWeights,
		"scale_attn_by_inverse_layer_idx": c.ScaleAttnByInverseLayerIdx,
		"tie_word_embeddings":             !c.SeparateLMHead,
		"torch_dtype":                     "float32",
	}
	if c.BOSTokenID >= 0 {
		m["bos_token_id"] = c.BOSTokenID
	}
	if c.EOSTokenID >= 0 {
		m["eos_token_id"] = c.EOSTokenID
	}
	return json.MarshalIndent(m, "", "  ")
}
