package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// qwen2Model returns m in llama.cpp's "qwen2" architecture (its
// src/models/qwen2.cpp): RMSNorm, rotate-half ("NEOX") rotary embeddings
// with rope.freq_base, grouped-query attention with q/k/v biases and an
// unbiased output projection, a SwiGLU MLP, and the LM head tied to the
// embedding or given as output.weight. nn.Linear weights are stored
// [out][in] by Hugging Face, which is ggml's matmul layout already
// (ne = {in, out}); nothing is transposed. The tokenizer written is the
// built-in Qwen one (tokenizer.Qwen).
func qwen2Model(m *model.Model, opts convertOptions) ([]metaKV, []tensorOut, error) {
	c := m.Config
	// What llama.cpp's qwen2 graph computes, and nothing else: refuse the
	// rest by name rather than write a file that runs a different model.
	switch {
	case c.Norm != model.RMSNorm || !c.Rotary || c.LearnedPositions:
		return nil, nil, fmt.Errorf("llama.cpp's qwen2 uses RMSNorm and rotary positions only")
	case c.RopeScaling != (model.Llama3Scaling{}):
		return nil, nil, fmt.Errorf("rope_scaling: llama.cpp's qwen2 is written here without rope scaling")
	case !c.QKVBias || c.OBias || c.MLPBias || c.QKNorm:
		return nil, nil, fmt.Errorf("llama.cpp's qwen2 has q/k/v biases only (config: qkv %v, o %v, mlp %v, q/k norm %v)", c.QKVBias, c.OBias, c.MLPBias, c.QKNorm)
	case c.MLP != model.MLPGated || c.Activation != model.SiLU:
		return nil, nil, fmt.Errorf("MLP %s with %s: llama.cpp's qwen2 uses the SiLU-gated MLP only", c.MLP, c.Activation)
	case c.QDim() != c.Hidden:
		return nil, nil, fmt.Errorf("heads × head_dim = %d, hidden %d: llama.cpp's qwen2 needs them equal", c.QDim(), c.Hidden)
	case math.Abs(c.AttnScale*math.Sqrt(float64(c.HeadDim))-1) > 1e-9:
		return nil, nil, fmt.Errorf("attention scale %v: llama.cpp's qwen2 scales by 1/sqrt(head_dim) only", c.AttnScale)
	}
	voc, err := buildQwenVocab(c.VocabSize)
	if err != nil {
		return nil, nil, err
	}
	meta := []metaKV{
		{"general.architecture", "qwen2"},
		{"general.name", m.Name},
		{"general.alignment", uint32(ggufAlignment)},
		{"general.file_type", fileType(opts.Type)},
		{"qwen2.context_length", uint32(c.MaxPositions)},
		{"qwen2.embedding_length", uint32(c.Hidden)},
		{"qwen2.feed_forward_length", uint32(c.Intermediate)},
		{"qwen2.block_count", uint32(c.Layers)},
		{"qwen2.attention.head_count", uint32(c.Heads)},
		{"qwen2.attention.head_count_kv", uint32(c.KVHeads)},
		{"qwen2.rope.freq_base", float32(c.RopeTheta)},
		{"qwen2.attention.layer_norm_rms_epsilon", float32(c.NormEps)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "qwen2"},
		{"tokenizer.ggml.tokens", voc.Tokens},
		{"tokenizer.ggml.token_type", voc.Types},
		{"tokenizer.ggml.merges", voc.Merges},
		{"tokenizer.ggml.bos_token_id", uint32(qwenEndOfText)},
		{"tokenizer.ggml.eos_token_id", uint32(qwenIMEnd)},
		{"tokenizer.ggml.padding_token_id", uint32(qwenEndOfText)},
		{"tokenizer.ggml.add_bos_token", false},
	}

	V, C, KV, I := uint64(c.VocabSize), uint64(c.Hidden), uint64(c.KVDim()), uint64(c.Intermediate)
	w := &m.Weights
	mat, vec := opts.Type, tensor.F32
	ts := []tensorOut{{"token_embd.weight", []uint64{C, V}, mat, same(w.Embed)}}
	for i := range w.Layers {
		l := &w.Layers[i]
		if len(l.QKV) != 3 || len(l.Up) != 2 {
			return nil, nil, fmt.Errorf("layer %d: %d q/k/v and %d MLP input projections, want 3 and 2", i, len(l.QKV), len(l.Up))
		}
		p := "blk." + strconv.Itoa(i) + "."
		ts = append(ts,
			tensorOut{p + "attn_norm.weight", []uint64{C}, vec, same(l.AttnNorm.W)},
			tensorOut{p + "attn_q.weight", []uint64{C, C}, mat, same(l.QKV[0].W)},
			tensorOut{p + "attn_q.bias", []uint64{C}, vec, same(l.QKV[0].B)},
			tensorOut{p + "attn_k.weight", []uint64{C, KV}, mat, same(l.QKV[1].W)},
			tensorOut{p + "attn_k.bias", []uint64{KV}, vec, same(l.QKV[1].B)},
			tensorOut{p + "attn_v.weight", []uint64{C, KV}, mat, same(l.QKV[2].W)},
			tensorOut{p + "attn_v.bias", []uint64{KV}, vec, same(l.QKV[2].B)},
			tensorOut{p + "attn_output.weight", []uint64{C, C}, mat, same(l.O.W)},
			tensorOut{p + "ffn_norm.weight", []uint64{C}, vec, same(l.MLPNorm.W)},
			tensorOut{p + "ffn_gate.weight", []uint64{C, I}, mat, same(l.Up[0].W)},
			tensorOut{p + "ffn_up.weight", []uint64{C, I}, mat, same(l.Up[1].W)},
			tensorOut{p + "ffn_down.weight", []uint64{I, C}, mat, same(l.Down.W)},
		)
		for _, lin := range append(append([]model.Linear{}, l.QKV...), l.O, l.Up[0], l.Up[1], l.Down) {
			if lin.InMajor {
				return nil, nil, fmt.Errorf("layer %d: a projection is stored in×out, want nn.Linear's out×in", i)
			}
		}
	}
	ts = append(ts, tensorOut{"output_norm.weight", []uint64{C}, vec, same(w.FinalNorm.W)})
	// A tied head is left out: llama.cpp's qwen2 then reads token_embd
	// as the output matrix (TENSOR_DUPLICATED), as in the files its own
	// converter writes for Qwen2.5-0.5B.
	if !w.TiedHead() {
		ts = append(ts, tensorOut{"output.weight", []uint64{C, V}, mat, same(w.LMHead)})
	}
	return meta, ts, nil
}
