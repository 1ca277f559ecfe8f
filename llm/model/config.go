package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Arch is an architecture family: how a checkpoint names its tensors and
// which of the Config's choices it makes. Every backend executes every Arch
// from the Config alone; nothing else depends on it.
type Arch string

// The architectures tinyserve serves, by Hugging Face's model_type.
const (
	ArchGPT2  Arch = "gpt2"
	ArchLlama Arch = "llama"
	ArchQwen2 Arch = "qwen2"
	ArchQwen3 Arch = "qwen3"
)

// architectures maps Hugging Face's class names (config.json's
// architectures) to the Arch that reads them.
var architectures = map[string]Arch{
	"GPT2LMHeadModel":  ArchGPT2,
	"LlamaForCausalLM": ArchLlama,
	"Qwen2ForCausalLM": ArchQwen2,
	"Qwen3ForCausalLM": ArchQwen3,
}

// Norm is the normalisation before attention, before the MLP and before the
// LM head.
type Norm string

// The norms.
const (
	// LayerNorm is (x − mean)/sqrt(var + eps)·w + b (GPT-2).
	LayerNorm Norm = "layernorm"
	// RMSNorm is x/sqrt(mean(x²) + eps)·w, computed in float32 whatever the
	// weights' type, as Hugging Face's LlamaRMSNorm does.
	RMSNorm Norm = "rmsnorm"
)

// MLP is the feed-forward block's form.
type MLP string

// The MLP forms.
const (
	// MLPPlain is down(act(fc(x))): GPT-2's c_fc and c_proj.
	MLPPlain MLP = "plain"
	// MLPGated is down(act(gate(x)) · up(x)): SwiGLU with act silu.
	MLPGated MLP = "gated"
)

// Activation is the MLP's nonlinearity.
type Activation string

// The activations.
const (
	// GeluTanh is the tanh approximation of GELU: Hugging Face's gelu_new,
	// gelu_pytorch_tanh and gelu_fast.
	GeluTanh Activation = "gelu_new"
	// GeluErf is the exact erf form, Hugging Face's gelu.
	GeluErf Activation = "gelu"
	// SiLU is x·sigmoid(x), Hugging Face's silu (and swish).
	SiLU Activation = "silu"
)

// Config is an architecture-neutral description of a decoder-only
// transformer: its shape and every numerical choice that differs between
// the architectures tinyserve serves. A backend runs any Config; an
// architecture is a way of filling one in from a config.json (gpt2.go,
// llama.go), not a forward pass of its own.
//
// Each layer is
//
//	h += O(attention(rope(qknorm(Q(norm(h)))), rope(qknorm(K(norm(h)))), V(norm(h))))
//	h += MLP(norm(h))
//
// with rope applied only when Rotary, qknorm only when QKNorm, and the
// embedding plus (when not Rotary) learned positions at the start; then
// norm and the LM head.
type Config struct {
	// Arch is the architecture family the config was read as.
	Arch Arch
	// Architecture is the Hugging Face class (GPT2LMHeadModel, ...).
	Architecture string
	// VocabSize is the embedding's rows: token ids the model accepts.
	VocabSize int
	// Hidden is the width of the residual stream.
	Hidden int
	// Layers is the number of transformer blocks.
	Layers int
	// Heads is the number of query heads.
	Heads int
	// KVHeads is the number of key and value heads (grouped-query
	// attention): query head h reads KV head h/(Heads/KVHeads). The paged
	// KV cache stores KVHeads heads.
	KVHeads int
	// HeadDim is the width of one head (not always Hidden/Heads: Qwen3).
	HeadDim int
	// Intermediate is the MLP's hidden width.
	Intermediate int
	// MaxPositions is the context length the model was made for.
	MaxPositions int

	// Norm and NormEps are the normalisation and its epsilon.
	Norm    Norm
	NormEps float64
	// LearnedPositions adds a trained position embedding to the token
	// embedding (GPT-2); otherwise Rotary.
	LearnedPositions bool
	// Rotary applies rotary position embeddings to queries and keys, in
	// Hugging Face's rotate-half layout (dimension i pairs with
	// i + HeadDim/2).
	Rotary bool
	// RopeTheta is the rotary base.
	RopeTheta float64
	// RopeScaling is Llama 3's frequency scaling; the zero value is none.
	RopeScaling Llama3Scaling
	// RopeFreqFactors, when set (HeadDim/2 of them), divide the rotary
	// inverse frequencies instead of RopeScaling: a GGUF file's
	// rope_freqs.weight, llama.cpp's form of a frequency scaling.
	RopeFreqFactors []float64
	// QKVBias: the query, key and value projections have biases.
	QKVBias bool
	// OBias: the attention output projection has a bias.
	OBias bool
	// MLPBias: the MLP's projections have biases.
	MLPBias bool
	// QKNorm applies an RMSNorm over each query and key head (weights of
	// HeadDim) before rotary embeddings (Qwen3).
	QKNorm bool
	// MLP is the feed-forward form and Activation its nonlinearity.
	MLP        MLP
	Activation Activation
	// AttnScale multiplies q·k before the softmax: 1/sqrt(HeadDim), or 1
	// for a GPT-2 with scale_attn_weights false.
	AttnScale float64
	// ScaleAttnByInverseLayerIdx further divides layer i's scores by i+1
	// (a GPT-2 variant).
	ScaleAttnByInverseLayerIdx bool
	// TiedEmbeddings: the LM head is the token embedding itself.
	TiedEmbeddings bool

	// BOSTokenID is config.json's bos_token_id, -1 when absent.
	BOSTokenID int
	// EOSTokenIDs are config.json's eos_token_id (a number or a list),
	// in the file's order.
	EOSTokenIDs []int
	// TorchDType is the checkpoint's stored type as config.json says
	// (torch_dtype, or dtype in transformers 5): float32, float16,
	// bfloat16, or "" when it does not say. --dtype auto follows it.
	TorchDType string
}

// Llama3Scaling is rope_scaling with rope_type llama3 (Llama 3.1 and
// later): long wavelengths are divided by Factor, short ones kept, those in
// between interpolated (transformers' _compute_llama3_parameters).
type Llama3Scaling struct {
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositions          int
}

// GroupSize is the query heads per KV head.
func (c *Config) GroupSize() int { return c.Heads / c.KVHeads }

// QDim, KVDim are the widths of all query heads and of all key (or value)
// heads together.
func (c *Config) QDim() int  { return c.Heads * c.HeadDim }
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// KVBytesPerToken is the KV cache one token takes in every layer (keys and
// values) with elemSize-byte storage.
func (c *Config) KVBytesPerToken(elemSize int) int64 {
	return 2 * int64(c.Layers) * int64(c.KVDim()) * int64(elemSize)
}

// maxDim bounds every dimension so that a hostile config.json cannot make
// later size arithmetic wrap around.
const maxDim = 1 << 24

// Validate checks the shape and the choices for consistency.
func (c *Config) Validate() error {
	pos := func(name string, v int) error {
		if v < 1 {
			return fmt.Errorf("%s must be positive, got %d", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.VocabSize}, {"hidden size", c.Hidden}, {"layers", c.Layers}, {"attention heads", c.Heads},
		{"key/value heads", c.KVHeads}, {"head_dim", c.HeadDim}, {"intermediate size", c.Intermediate}, {"max positions", c.MaxPositions}} {
		if err := pos(f.name, f.v); err != nil {
			return err
		}
	}
	if c.VocabSize > maxDim || c.MaxPositions > maxDim || c.Hidden > maxDim || c.Layers > 4096 || c.Intermediate > maxDim ||
		c.Heads > 1<<16 || c.HeadDim > 1<<16 || int64(c.Heads)*int64(c.HeadDim) > maxDim {
		return fmt.Errorf("model dimensions are implausibly large (vocab %d, positions %d, hidden %d, layers %d, heads %d×%d, intermediate %d)",
			c.VocabSize, c.MaxPositions, c.Hidden, c.Layers, c.Heads, c.HeadDim, c.Intermediate)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if !(c.NormEps > 0 && c.NormEps < 1) {
		return fmt.Errorf("norm epsilon must be in (0, 1), got %v", c.NormEps)
	}
	if c.Norm != LayerNorm && c.Norm != RMSNorm {
		return fmt.Errorf("unknown norm %q", c.Norm)
	}
	if c.LearnedPositions == c.Rotary {
		return fmt.Errorf("positions must be either learned or rotary")
	}
	if c.Rotary {
		if c.HeadDim%2 != 0 {
			return fmt.Errorf("head_dim %d is odd: rotary embeddings pair its halves", c.HeadDim)
		}
		if !(c.RopeTheta > 1) || c.RopeTheta > 1e12 {
			return fmt.Errorf("rope_theta must be in (1, 1e12], got %v", c.RopeTheta)
		}
		if f := c.RopeFreqFactors; f != nil {
			if len(f) != c.HeadDim/2 || c.RopeScaling != (Llama3Scaling{}) {
				return fmt.Errorf("rope frequency factors: %d of them (want head_dim/2 = %d), with rope_scaling %+v (want none)", len(f), c.HeadDim/2, c.RopeScaling)
			}
			for i, x := range f {
				if !(x > 0 && x < 1e6) {
					return fmt.Errorf("rope frequency factor %d is %v: want a positive divisor", i, x)
				}
			}
		}
		if s := c.RopeScaling; s != (Llama3Scaling{}) {
			if !(s.Factor >= 1 && s.Factor < 1e6) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.HighFreqFactor > 1e6 || s.OriginalMaxPositions < 1 || s.OriginalMaxPositions > maxDim {
				return fmt.Errorf("rope_scaling (llama3) needs factor ≥ 1, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings ≥ 1, got %+v", s)
			}
		}
	}
	switch c.MLP {
	case MLPPlain:
		if c.Activation != GeluTanh && c.Activation != GeluErf {
			return fmt.Errorf("activation %q is not supported for a plain MLP (gelu_new, gelu)", c.Activation)
		}
	case MLPGated:
		if c.Activation != SiLU {
			return fmt.Errorf("activation %q is not supported for a gated MLP (silu)", c.Activation)
		}
	default:
		return fmt.Errorf("unknown MLP form %q", c.MLP)
	}
	if !(c.AttnScale > 0) || c.AttnScale > 1 {
		return fmt.Errorf("attention scale must be in (0, 1], got %v", c.AttnScale)
	}
	if c.BOSTokenID < -1 || c.BOSTokenID >= c.VocabSize {
		return fmt.Errorf("bos_token_id %d out of vocabulary range [0, %d) (null for none)", c.BOSTokenID, c.VocabSize)
	}
	for _, id := range c.EOSTokenIDs {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("eos_token_id %d out of vocabulary range [0, %d)", id, c.VocabSize)
		}
	}
	return nil
}

// ParseConfig reads a Hugging Face config.json: its architectures list (or,
// lacking one, model_type) picks the architecture, whose reader fills in
// the Config with Hugging Face's defaults for what the file leaves out. A
// field that asks for something tinyserve does not implement (another
// rope_type, a sliding window, another activation, an unknown
// architecture, quantized weights) is an error naming the field and its
// value: a model is never run approximately.
func ParseConfig(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("parse: %w", err)
	}
	if raw == nil {
		return Config{}, fmt.Errorf("parse: config.json is not a JSON object")
	}
	f := fields{raw: raw}
	arch, class, err := f.arch()
	if err != nil {
		return Config{}, err
	}
	if f.has("quantization_config") {
		return Config{}, fmt.Errorf("quantization_config: quantized checkpoints are not supported (tinyserve reads float32, float16 and bfloat16 weights)")
	}
	var c Config
	switch arch {
	case ArchGPT2:
		c, err = parseGPT2(&f)
	default:
		c, err = parseLlama(&f, arch)
	}
	if err != nil {
		return Config{}, err
	}
	c.Arch, c.Architecture = arch, class
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// fields reads config.json's values by key, remembering the first type
// error so that each reader can take its fields one after another.
type fields struct {
	raw map[string]json.RawMessage
	err error
}

func (f *fields) has(key string) bool {
	v, ok := f.raw[key]
	return ok && string(v) != "null"
}

// get decodes key into dst when it is present and not null, reporting
// whether it was.
func (f *fields) get(key string, dst any) bool {
	if !f.has(key) {
		return false
	}
	if err := json.Unmarshal(f.raw[key], dst); err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %s is not a valid value: %w", key, f.raw[key], err)
	}
	return true
}

func (f *fields) int(key string, def int) int {
	v := def
	f.get(key, &v)
	return v
}

func (f *fields) float(key string, def float64) float64 {
	v := def
	f.get(key, &v)
	return v
}

func (f *fields) bool(key string, def bool) bool {
	v := def
	f.get(key, &v)
	return v
}

func (f *fields) string(key, def string) string {
	v := def
	f.get(key, &v)
	return v
}

// ids reads a token id field that is a number or a list of numbers.
func (f *fields) ids(key string) []int {
	if !f.has(key) {
		return nil
	}
	var one int
	if err := json.Unmarshal(f.raw[key], &one); err == nil {
		return []int{one}
	}
	var many []int
	if err := json.Unmarshal(f.raw[key], &many); err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %s is neither a token id nor a list of them", key, f.raw[key])
	}
	if len(many) == 0 {
		return nil // [] is none, as null is: one Config for both
	}
	return many
}

// arch picks the architecture from architectures, else model_type.
func (f *fields) arch() (Arch, string, error) {
	var classes []string
	f.get("architectures", &classes)
	modelType := f.string("model_type", "")
	if f.err != nil {
		return "", "", f.err
	}
	if len(classes) > 1 {
		return "", "", fmt.Errorf("architectures: %q lists several classes; want one of %s", classes, knownClasses())
	}
	if len(classes) == 1 {
		arch, ok := architectures[classes[0]]
		if !ok {
			return "", "", fmt.Errorf("architectures: %q is not supported; tinyserve serves %s", classes[0], knownClasses())
		}
		if modelType != "" && Arch(modelType) != arch {
			return "", "", fmt.Errorf("model_type %q does not match architectures %q", modelType, classes[0])
		}
		return arch, classes[0], nil
	}
	for class, arch := range architectures {
		if Arch(modelType) == arch {
			return arch, class, nil
		}
	}
	if modelType == "" {
		// Very old GPT-2 configs name neither; their n_embd says what
		// they are.
		if f.has("n_embd") {
			return ArchGPT2, "GPT2LMHeadModel", nil
		}
		return "", "", fmt.Errorf("config.json names no architecture (neither architectures nor model_type); tinyserve serves %s", knownClasses())
	}
	return "", "", fmt.Errorf("model_type %q is not supported; tinyserve serves %s", modelType, knownClasses())
}

func knownClasses() string {
	var names []string
	for class, arch := range architectures {
		names = append(names, class+" ("+string(arch)+")")
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// torchDType is the stored type config.json names: transformers 5 writes
// dtype, earlier versions torch_dtype.
func (f *fields) torchDType() string {
	d := f.string("dtype", f.string("torch_dtype", ""))
	return strings.TrimPrefix(d, "torch.")
}
