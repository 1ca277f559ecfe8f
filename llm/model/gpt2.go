package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// GPT-2, as Hugging Face's GPT2LMHeadModel: pre-LayerNorm blocks, learned
// positions, Conv1D weights stored in×out (y = x·W + b), c_attn's output
// split q|k|v with heads contiguous, gelu_new, final ln_f, the LM head tied
// to wte unless tie_word_embeddings is false.

// GPT2Config is a GPT-2 of the given shape with GPT2Config's defaults
// (gelu_new, LayerNorm epsilon 1e-5, attention scaled by 1/sqrt(head_dim),
// an MLP of 4×width, the LM head tied to the embedding) and no BOS or EOS
// token: what a config.json giving only the shape means. width must be a
// multiple of heads.
func GPT2Config(vocab, positions, width, layers, heads int) Config {
	c := Config{
		Arch: ArchGPT2, Architecture: "GPT2LMHeadModel",
		VocabSize: vocab, MaxPositions: positions, Hidden: width, Layers: layers, Heads: heads, KVHeads: heads,
		Intermediate: 4 * width, Norm: LayerNorm, NormEps: 1e-5, LearnedPositions: true,
		QKVBias: true, OBias: true, MLPBias: true, MLP: MLPPlain, Activation: GeluTanh,
		AttnScale: 1, TiedEmbeddings: true, BOSTokenID: -1,
	}
	if heads > 0 {
		c.HeadDim = width / heads
		c.AttnScale = 1 / sqrtInt(c.HeadDim)
	}
	return c
}

// parseGPT2 reads a GPT2Config. Fields absent from the file take its
// defaults (gelu_new, epsilon 1e-5, scaled attention, n_inner 4·n_embd);
// the shape fields are required.
func parseGPT2(f *fields) (Config, error) {
	c := Config{
		VocabSize:        f.int("vocab_size", 0),
		MaxPositions:     f.int("n_positions", 0),
		Hidden:           f.int("n_embd", 0),
		Layers:           f.int("n_layer", 0),
		Heads:            f.int("n_head", 0),
		Norm:             LayerNorm,
		NormEps:          f.float("layer_norm_epsilon", 1e-5),
		LearnedPositions: true,
		QKVBias:          true,
		OBias:            true,
		MLPBias:          true,
		MLP:              MLPPlain,
		BOSTokenID:       -1,
		TorchDType:       f.torchDType(),
	}
	if c.MaxPositions == 0 {
		c.MaxPositions = f.int("n_ctx", 0) // very old configs only have n_ctx
	}
	c.KVHeads = c.Heads
	if c.Heads > 0 && c.Hidden%c.Heads == 0 {
		c.HeadDim = c.Hidden / c.Heads
	} else if c.Heads > 0 && c.Hidden > 0 {
		return Config{}, fmt.Errorf("n_embd %d is not a multiple of n_head %d", c.Hidden, c.Heads)
	}
	c.Intermediate = f.int("n_inner", 4*c.Hidden)
	if f.has("n_inner") && c.Intermediate < 1 {
		return Config{}, fmt.Errorf("n_inner must be positive or null, got %d", c.Intermediate)
	}
	switch act := f.string("activation_function", "gelu_new"); act {
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		c.Activation = GeluTanh
	case "gelu":
		c.Activation = GeluErf
	default:
		return Config{}, fmt.Errorf("activation_function %q is not supported (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu)", act)
	}
	c.AttnScale = 1
	if f.bool("scale_attn_weights", true) && c.HeadDim > 0 {
		c.AttnScale = 1 / math.Sqrt(float64(c.HeadDim))
	}
	c.ScaleAttnByInverseLayerIdx = f.bool("scale_attn_by_inverse_layer_idx", false)
	c.TiedEmbeddings = f.bool("tie_word_embeddings", true)
	if ids := f.ids("bos_token_id"); len(ids) == 1 {
		c.BOSTokenID = ids[0]
	} else if len(ids) > 1 {
		return Config{}, fmt.Errorf("bos_token_id: %v: want one id", ids)
	}
	c.EOSTokenIDs = f.ids("eos_token_id")
	if f.err != nil {
		return Config{}, f.err
	}
	return c, nil
}

// gpt2Layer is a GPT-2 block's projections, without their tensors.
func gpt2Layer(c *Config) Layer {
	return Layer{
		QKV:  []Linear{{In: c.Hidden, Out: 3 * c.Hidden, InMajor: true}},
		O:    Linear{In: c.Hidden, Out: c.Hidden, InMajor: true},
		Up:   []Linear{{In: c.Hidden, Out: c.Intermediate, InMajor: true}},
		Down: Linear{In: c.Intermediate, Out: c.Hidden, InMajor: true},
	}
}

// gpt2Params lists GPT-2's parameters for c in the order of Hugging Face's
// state dict, named without the "transformer." prefix, and points each at
// its place in w, whose layers have gpt2Layer's form.
func gpt2Params(c *Config, w *Weights) []param {
	V, P, C, I := int64(c.VocabSize), int64(c.MaxPositions), int64(c.Hidden), int64(c.Intermediate)
	ps := []param{{"wte.weight", []int64{V, C}, &w.Embed}, {"wpe.weight", []int64{P, C}, &w.Positions}}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := "h." + strconv.Itoa(i) + "."
		ps = append(ps,
			param{p + "ln_1.weight", []int64{C}, &l.AttnNorm.W},
			param{p + "ln_1.bias", []int64{C}, &l.AttnNorm.B},
			param{p + "attn.c_attn.weight", []int64{C, 3 * C}, &l.QKV[0].W},
			param{p + "attn.c_attn.bias", []int64{3 * C}, &l.QKV[0].B},
			param{p + "attn.c_proj.weight", []int64{C, C}, &l.O.W},
			param{p + "attn.c_proj.bias", []int64{C}, &l.O.B},
			param{p + "ln_2.weight", []int64{C}, &l.MLPNorm.W},
			param{p + "ln_2.bias", []int64{C}, &l.MLPNorm.B},
			param{p + "mlp.c_fc.weight", []int64{C, I}, &l.Up[0].W},
			param{p + "mlp.c_fc.bias", []int64{I}, &l.Up[0].B},
			param{p + "mlp.c_proj.weight", []int64{I, C}, &l.Down.W},
			param{p + "mlp.c_proj.bias", []int64{C}, &l.Down.B},
		)
	}
	return append(ps, param{"ln_f.weight", []int64{C}, &w.FinalNorm.W}, param{"ln_f.bias", []int64{C}, &w.FinalNorm.B})
}

// gpt2Keys are the checkpoint keys a GPT-2 parameter may be stored under:
// GPT2LMHeadModel's state dict prefixes the body with "transformer.",
// GPT2Model's does not.
func gpt2Keys(name string) []string {
	if name == "lm_head.weight" {
		return []string{name}
	}
	return []string{name, "transformer." + name}
}

// gpt2Ignored reports whether a checkpoint key is a buffer GPT-2
// checkpoints carry that is not a parameter: the causal-mask buffers
// attn.bias and attn.masked_bias of older transformers.
func gpt2Ignored(key string) bool {
	return strings.HasSuffix(key, ".attn.bias") || strings.HasSuffix(key, ".attn.masked_bias")
}

// marshalGPT2 is c as a GPT2Config's config.json.
func marshalGPT2(c *Config) map[string]any {
	m := map[string]any{
		"model_type":                      "gpt2",
		"architectures":                   []string{"GPT2LMHeadModel"},
		"vocab_size":                      c.VocabSize,
		"n_positions":                     c.MaxPositions,
		"n_ctx":                           c.MaxPositions,
		"n_embd":                          c.Hidden,
		"n_layer":                         c.Layers,
		"n_head":                          c.Heads,
		"n_inner":                         c.Intermediate,
		"activation_function":             string(c.Activation),
		"layer_norm_epsilon":              c.NormEps,
		"scale_attn_weights":              c.AttnScale != 1,
		"scale_attn_by_inverse_layer_idx": c.ScaleAttnByInverseLayerIdx,
		"tie_word_embeddings":             c.TiedEmbeddings,
	}
	return m
}
