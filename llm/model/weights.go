package model

import (
	"fmt"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Weights are a model's parameters by role, each in the type its
// checkpoint stores it in. Tensors loaded from a checkpoint may alias a
// read-only memory mapping: never write to them.
type Weights struct {
	// Embed is the token embedding [VocabSize, Hidden].
	Embed tensor.Tensor
	// Positions is the learned position embedding [MaxPositions, Hidden]
	// (Config.LearnedPositions); zero otherwise.
	Positions tensor.Tensor
	// Layers are the transformer blocks, in order.
	Layers []Layer
	// FinalNorm is the norm before the LM head.
	FinalNorm NormWeights
	// LMHead is the output projection [VocabSize, Hidden]: the same
	// storage as Embed when the embeddings are tied (TiedHead).
	LMHead tensor.Tensor
}

// NormWeights are a norm's gain and, for a LayerNorm, its bias (zero for
// an RMSNorm).
type NormWeights struct {
	W, B tensor.Tensor
}

// Linear is a projection y = x·Wᵀ + b with W stored [Out, In] as nn.Linear
// stores it, or y = x·W + b with W stored [In, Out] when InMajor (GPT-2's
// Conv1D). B is zero when the projection has no bias.
type Linear struct {
	W, B    tensor.Tensor
	In, Out int
	InMajor bool
}

// Layer is one transformer block's parameters.
type Layer struct {
	// AttnNorm is the norm before attention.
	AttnNorm NormWeights
	// QKV are the projections whose outputs, side by side, are the
	// queries, keys and values (Heads, KVHeads and KVHeads heads of
	// HeadDim): one fused projection (GPT-2's c_attn) or three (q, k, v).
	QKV []Linear
	// QNorm and KNorm are the per-head RMSNorm gains [HeadDim] of queries
	// and keys (Config.QKNorm); zero otherwise.
	QNorm, KNorm tensor.Tensor
	// O is the attention output projection.
	O Linear
	// MLPNorm is the norm before the MLP.
	MLPNorm NormWeights
	// Up are the MLP's input projections: [fc] (MLPPlain) or [gate, up]
	// (MLPGated).
	Up []Linear
	// Down is the MLP's output projection.
	Down Linear
}

// TiedHead reports whether the LM head is the token embedding itself (the
// same memory), rather than a separate lm_head.weight.
func (w *Weights) TiedHead() bool { return w.LMHead.Same(w.Embed) }

// param is one checkpoint tensor of an architecture: its name (as Hugging
// Face's state dict spells it), its shape, and where it goes in Weights.
type param struct {
	name  string
	shape []int64
	dst   *tensor.Tensor
}

// NewWeights is the form of c's weights (its layers and their projections'
// shapes) with no tensors yet: what a loader or a generator fills in.
func NewWeights(c *Config) Weights {
	layer := llamaLayer
	if c.Arch == ArchGPT2 {
		layer = gpt2Layer
	}
	w := Weights{Layers: make([]Layer, c.Layers)}
	for i := range w.Layers {
		w.Layers[i] = layer(c)
	}
	return w
}

// sameForm reports whether w has the form NewWeights(c) gives, so that
// params can point into it.
func sameForm(c *Config, w *Weights) error {
	want := NewWeights(c)
	if len(w.Layers) != len(want.Layers) {
		return fmt.Errorf("%d layers of weights, config says %d", len(w.Layers), len(want.Layers))
	}
	for i := range w.Layers {
		l, f := &w.Layers[i], &want.Layers[i]
		if len(l.QKV) != len(f.QKV) || len(l.Up) != len(f.Up) {
			return fmt.Errorf("layer %d has %d query/key/value and %d MLP input projections, the architecture %d and %d", i, len(l.QKV), len(l.Up), len(f.QKV), len(f.Up))
		}
	}
	return nil
}

// params lists every parameter of c (the LM head only when untied) and
// where it goes in w, which has NewWeights(c)'s form.
func params(c *Config, w *Weights) []param {
	var ps []param
	if c.Arch == ArchGPT2 {
		ps = gpt2Params(c, w)
	} else {
		ps = llamaParams(c, w)
	}
	if !c.TiedEmbeddings {
		ps = append(ps, param{"lm_head.weight", []int64{int64(c.VocabSize), int64(c.Hidden)}, &w.LMHead})
	}
	return ps
}

// keys are the checkpoint keys parameter name may be stored under.
func keys(arch Arch, name string) []string {
	if arch == ArchGPT2 {
		return gpt2Keys(name)
	}
	return []string{name}
}

// ignored reports whether a checkpoint key that is not a parameter is a
// known buffer to skip rather than a sign of a mismatched config.
func ignored(arch Arch, key string) bool {
	if arch == ArchGPT2 {
		return gpt2Ignored(key)
	}
	return llamaIgnored(key)
}
