package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The Llama family, as Hugging Face's modeling_llama.py, modeling_qwen2.py
// and modeling_qwen3.py compute it: RMSNorm before attention and MLP,
// rotary embeddings (rotate-half), grouped-query attention, SwiGLU MLP,
// final RMSNorm, nn.Linear weights stored out×in (y = x·Wᵀ + b). They
// differ only in the Config's choices:
//
//   - Llama: biases on q, k, v and o when attention_bias, on the MLP when
//     mlp_bias; rope_scaling llama3 (Llama 3.1 and later).
//   - Qwen2: biases on q, k and v always, never on o or the MLP.
//   - Qwen3: per-head RMSNorm of queries and keys before RoPE (q_norm,
//     k_norm); head_dim given (128 when absent), not hidden/heads; biases
//     on q, k, v and o when attention_bias.

// llamaDefaults are each architecture's config class defaults for the
// fields that have no common default.
var llamaDefaults = map[Arch]struct {
	vocab, hidden, intermediate, positions int
	rmsEps                                 float64
	headDim                                int // 0: hidden / heads
}{
	ArchLlama: {32000, 4096, 11008, 2048, 1e-6, 0},
	ArchQwen2: {151936, 4096, 22016, 32768, 1e-6, 0},
	ArchQwen3: {151936, 4096, 22016, 32768, 1e-6, 128},
}

// parseLlama reads a LlamaConfig, Qwen2Config or Qwen3Config with that
// class's defaults.
func parseLlama(f *fields, arch Arch) (Config, error) {
	d := llamaDefaults[arch]
	c := Config{
		VocabSize:    f.int("vocab_size", d.vocab),
		Hidden:       f.int("hidden_size", d.hidden),
		Intermediate: f.int("intermediate_size", d.intermediate),
		Layers:       f.int("num_hidden_layers", 32),
		Heads:        f.int("num_attention_heads", 32),
		MaxPositions: f.int("max_position_embeddings", d.positions),
		Norm:         RMSNorm,
		NormEps:      f.float("rms_norm_eps", d.rmsEps),
		Rotary:       true,
		MLP:          MLPGated,
		BOSTokenID:   -1,
		TorchDType:   f.torchDType(),
	}
	c.KVHeads = f.int("num_key_value_heads", c.Heads)
	switch {
	case d.headDim > 0:
		c.HeadDim = f.int("head_dim", d.headDim)
	case c.Heads > 0:
		c.HeadDim = f.int("head_dim", c.Hidden/c.Heads)
	}
	if act := f.string("hidden_act", "silu"); act == "silu" || act == "swish" {
		c.Activation = SiLU
	} else {
		return Config{}, fmt.Errorf("hidden_act %q is not supported (silu)", act)
	}
	switch arch {
	case ArchLlama:
		c.QKVBias = f.bool("attention_bias", false)
		c.OBias = c.QKVBias
		c.MLPBias = f.bool("mlp_bias", false)
		c.BOSTokenID, c.EOSTokenIDs = 1, []int{2}
	case ArchQwen2:
		c.QKVBias = true
	case ArchQwen3:
		c.QKVBias = f.bool("attention_bias", false)
		c.OBias = c.QKVBias
		c.QKNorm = true
	}
	c.TiedEmbeddings = f.bool("tie_word_embeddings", false)
	// A key present with null means none, not the class default.
	if _, ok := f.raw["bos_token_id"]; ok {
		c.BOSTokenID = -1
		if ids := f.ids("bos_token_id"); len(ids) > 0 {
			c.BOSTokenID = ids[0]
		}
	}
	if _, ok := f.raw["eos_token_id"]; ok {
		c.EOSTokenIDs = f.ids("eos_token_id")
	}
	if err := parseRope(f, &c); err != nil {
		return Config{}, err
	}
	if err := refuseSlidingWindow(f); err != nil {
		return Config{}, err
	}
	if v := f.float("partial_rotary_factor", 1); v != 1 {
		return Config{}, fmt.Errorf("partial_rotary_factor %v is not supported (1)", v)
	}
	if f.err != nil {
		return Config{}, f.err
	}
	if c.HeadDim > 0 {
		c.AttnScale = 1 / math.Sqrt(float64(c.HeadDim))
	}
	return c, nil
}

// parseRope reads rope_theta and rope_scaling, or transformers 5's
// rope_parameters, which holds both.
func parseRope(f *fields, c *Config) error {
	c.RopeTheta = f.float("rope_theta", 10000)
	var scaling map[string]json.RawMessage
	key := "rope_scaling"
	if f.has("rope_parameters") {
		key = "rope_parameters"
	}
	if !f.get(key, &scaling) || scaling == nil {
		return nil
	}
	sub := fields{raw: scaling}
	c.RopeTheta = sub.float("rope_theta", c.RopeTheta)
	kind := sub.string("rope_type", sub.string("type", "default"))
	if sub.err != nil {
		return fmt.Errorf("%s: %w", key, sub.err)
	}
	switch kind {
	case "default":
		return nil
	case "llama3":
		c.RopeScaling = Llama3Scaling{
			Factor:               sub.float("factor", 0),
			LowFreqFactor:        sub.float("low_freq_factor", 0),
			HighFreqFactor:       sub.float("high_freq_factor", 0),
			OriginalMaxPositions: sub.int("original_max_position_embeddings", 0),
		}
		if sub.err != nil {
			return fmt.Errorf("%s: %w", key, sub.err)
		}
		return nil
	}
	return fmt.Errorf("%s: rope_type %q is not supported (default, llama3)", key, kind)
}

// refuseSlidingWindow refuses a config whose attention slides in some
// layer: use_sliding_window true (Qwen2 and Qwen3 then slide from layer
// max_window_layers on), or layer_types naming sliding_attention.
// sliding_window alone is ignored, as Hugging Face ignores it when
// use_sliding_window is false.
func refuseSlidingWindow(f *fields) error {
	var types []string
	if f.get("layer_types", &types) {
		for i, t := range types {
			if t != "full_attention" {
				return fmt.Errorf("layer_types[%d] is %q: only full_attention is supported", i, t)
			}
		}
	}
	if f.bool("use_sliding_window", false) {
		layers, from := f.int("num_hidden_layers", 32), f.int("max_window_layers", 28)
		if from < layers {
			return fmt.Errorf("use_sliding_window: true (sliding_window %s from layer %d of %d) is not supported", string(f.raw["sliding_window"]), from, layers)
		}
	}
	return nil
}

// llamaLayer is a Llama-family block's projections, without their
// tensors.
func llamaLayer(c *Config) Layer {
	return Layer{
		QKV:  []Linear{{In: c.Hidden, Out: c.QDim()}, {In: c.Hidden, Out: c.KVDim()}, {In: c.Hidden, Out: c.KVDim()}},
		O:    Linear{In: c.QDim(), Out: c.Hidden},
		Up:   []Linear{{In: c.Hidden, Out: c.Intermediate}, {In: c.Hidden, Out: c.Intermediate}},
		Down: Linear{In: c.Intermediate, Out: c.Hidden},
	}
}

// llamaParams lists a Llama-family model's parameters for c in the order
// of Hugging Face's state dict and points each at its place in w, whose
// layers have llamaLayer's form.
func llamaParams(c *Config, w *Weights) []param {
	V, C, I := int64(c.VocabSize), int64(c.Hidden), int64(c.Intermediate)
	Q, KV, D := int64(c.QDim()), int64(c.KVDim()), int64(c.HeadDim)
	ps := []param{{"model.embed_tokens.weight", []int64{V, C}, &w.Embed}}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := "model.layers." + strconv.Itoa(i) + "."
		ps = append(ps, param{p + "input_layernorm.weight", []int64{C}, &l.AttnNorm.W})
		for j, name := range []string{"q_proj", "k_proj", "v_proj"} {
			out := []int64{Q, KV, KV}[j]
			ps = append(ps, param{p + "self_attn." + name + ".weight", []int64{out, C}, &l.QKV[j].W})
			if c.QKVBias {
				ps = append(ps, param{p + "self_attn." + name + ".bias", []int64{out}, &l.QKV[j].B})
			}
		}
		ps = append(ps, param{p + "self_attn.o_proj.weight", []int64{C, Q}, &l.O.W})
		if c.OBias {
			ps = append(ps, param{p + "self_attn.o_proj.bias", []int64{C}, &l.O.B})
		}
		if c.QKNorm {
			ps = append(ps, param{p + "self_attn.q_norm.weight", []int64{D}, &l.QNorm},
				param{p + "self_attn.k_norm.weight", []int64{D}, &l.KNorm})
		}
		ps = append(ps, param{p + "post_attention_layernorm.weight", []int64{C}, &l.MLPNorm.W})
		for j, name := range []string{"gate_proj", "up_proj"} {
			ps = append(ps, param{p + "mlp." + name + ".weight", []int64{I, C}, &l.Up[j].W})
			if c.MLPBias {
				ps = append(ps, param{p + "mlp." + name + ".bias", []int64{I}, &l.Up[j].B})
			}
		}
		ps = append(ps, param{p + "mlp.down_proj.weight", []int64{C, I}, &l.Down.W})
		if c.MLPBias {
			ps = append(ps, param{p + "mlp.down_proj.bias", []int64{C}, &l.Down.B})
		}
	}
	return append(ps, param{"model.norm.weight", []int64{C}, &w.FinalNorm.W})
}

// llamaIgnored reports whether a checkpoint key is a buffer older Llama
// checkpoints carry that is not a parameter (the rotary inverse
// frequencies, recomputed from the config).
func llamaIgnored(key string) bool { return strings.HasSuffix(key, ".rotary_emb.inv_freq") }

// marshalLlama is c as its config class's config.json.
func marshalLlama(c *Config) map[string]any {
	class := map[Arch]string{ArchLlama: "LlamaForCausalLM", ArchQwen2: "Qwen2ForCausalLM", ArchQwen3: "Qwen3ForCausalLM"}[c.Arch]
	m := map[string]any{
		"model_type":              string(c.Arch),
		"architectures":           []string{class},
		"vocab_size":              c.VocabSize,
		"hidden_size":             c.Hidden,
		"intermediate_size":       c.Intermediate,
		"num_hidden_layers":       c.Layers,
		"num_attention_heads":     c.Heads,
		"num_key_value_heads":     c.KVHeads,
		"head_dim":                c.HeadDim,
		"hidden_act":              string(c.Activation),
		"max_position_embeddings": c.MaxPositions,
		"rms_norm_eps":            c.NormEps,
		"rope_theta":              c.RopeTheta,
		"tie_word_embeddings":     c.TiedEmbeddings,
	}
	switch c.Arch {
	case ArchLlama:
		m["attention_bias"], m["mlp_bias"] = c.QKVBias, c.MLPBias
	case ArchQwen2:
		m["use_sliding_window"] = false
	case ArchQwen3:
		m["attention_bias"] = c.QKVBias
		m["use_sliding_window"] = false
	}
	if s := c.RopeScaling; s != (Llama3Scaling{}) {
		m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": s.Factor, "low_freq_factor": s.LowFreqFactor,
			"high_freq_factor": s.HighFreqFactor, "original_max_position_embeddings": s.OriginalMaxPositions}
	}
	return m
}
