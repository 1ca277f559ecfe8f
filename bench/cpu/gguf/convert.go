package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/tinyserve/tinyserve/llm/tensor"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// ggufModel returns the metadata and tensors of m in llama.cpp's "gpt2"
// architecture. Shapes are in ggml order (NE[0] fastest): embeddings stay
// [rows][C] as in Hugging Face (ne = {C, rows}); the four Conv1D matrices,
// stored in×out by Hugging Face, are transposed to ggml's matmul layout
// [out][in] (ne = {in, out}).
func ggufModel(m *model.Model) ([]metaKV, []tensorOut, error) {
	c := m.Config
	switch {
	case c.Arch != model.ArchGPT2:
		return nil, nil, fmt.Errorf("architecture %s: this converter writes GPT-2 only", c.Arch)
	case c.Activation != model.GeluTanh:
		return nil, nil, fmt.Errorf("activation %q: llama.cpp's gpt2 uses the tanh GELU only", c.Activation)
	case c.AttnScale == 1 || c.ScaleAttnByInverseLayerIdx:
		return nil, nil, fmt.Errorf("llama.cpp's gpt2 scales attention by 1/sqrt(head_dim) only")
	case c.VocabSize != tokenizer.GPT2VocabSize:
		return nil, nil, fmt.Errorf("vocabulary of %d tokens: only GPT-2's %d-token vocabulary is supported", c.VocabSize, tokenizer.GPT2VocabSize)
	}
	voc, err := buildGPT2Vocab()
	if err != nil {
		return nil, nil, err
	}
	meta := []metaKV{
		{"general.architecture", "gpt2"},
		{"general.name", m.Name},
		{"general.alignment", uint32(ggufAlignment)},
		{"general.file_type", uint32(0)}, // all F32
		{"gpt2.context_length", uint32(c.MaxPositions)},
		{"gpt2.embedding_length", uint32(c.Hidden)},
		{"gpt2.feed_forward_length", uint32(c.Intermediate)},
		{"gpt2.block_count", uint32(c.Layers)},
		{"gpt2.attention.head_count", uint32(c.Heads)},
		{"gpt2.attention.layer_norm_epsilon", float32(c.NormEps)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "gpt-2"},
		{"tokenizer.ggml.tokens", voc.Tokens},
		{"tokenizer.ggml.token_type", voc.Types},
		{"tokenizer.ggml.merges", voc.Merges},
		{"tokenizer.ggml.bos_token_id", uint32(tokenizer.GPT2EOS)},
		{"tokenizer.ggml.eos_token_id", uint32(tokenizer.GPT2EOS)},
		{"tokenizer.ggml.add_bos_token", false},
	}

	V, P, C, I := uint64(c.VocabSize), uint64(c.MaxPositions), uint64(c.Hidden), uint64(c.Intermediate)
	w := &m.Weights
	same := func(t tensor.Tensor) func() []float32 { return func() []float32 { return t.Float32s() } }
	// conv1d transposes a Hugging Face Conv1D weight [in, out].
	conv1d := func(t tensor.Tensor, in, out uint64) func() []float32 {
		return func() []float32 { return transpose(t.Float32s(), int(in), int(out)) }
	}
	ts := []tensorOut{
		{"token_embd.weight", []uint64{C, V}, same(w.Embed)},
		{"position_embd.weight", []uint64{C, P}, same(w.Positions)},
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := "blk." + strconv.Itoa(i) + "."
		ts = append(ts,
			tensorOut{p + "attn_norm.weight", []uint64{C}, same(l.AttnNorm.W)},
			tensorOut{p + "attn_norm.bias", []uint64{C}, same(l.AttnNorm.B)},
			tensorOut{p + "attn_qkv.weight", []uint64{C, 3 * C}, conv1d(l.QKV[0].W, C, 3*C)},
			tensorOut{p + "attn_qkv.bias", []uint64{3 * C}, same(l.QKV[0].B)},
			tensorOut{p + "attn_output.weight", []uint64{C, C}, conv1d(l.O.W, C, C)},
			tensorOut{p + "attn_output.bias", []uint64{C}, same(l.O.B)},
			tensorOut{p + "ffn_norm.weight", []uint64{C}, same(l.MLPNorm.W)},
			tensorOut{p + "ffn_norm.bias", []uint64{C}, same(l.MLPNorm.B)},
			tensorOut{p + "ffn_up.weight", []uint64{C, I}, conv1d(l.Up[0].W, C, I)},
			tensorOut{p + "ffn_up.bias", []uint64{I}, same(l.Up[0].B)},
			tensorOut{p + "ffn_down.weight", []uint64{I, C}, conv1d(l.Down.W, I, C)},
			tensorOut{p + "ffn_down.bias", []uint64{C}, same(l.Down.B)},
		)
	}
	// output.weight is written even when tied to the embeddings (as
	// llama.cpp's own converter does for GPT-2), so that every llama.cpp
	// version loads it.
	ts = append(ts,
		tensorOut{"output_norm.weight", []uint64{C}, same(w.FinalNorm.W)},
		tensorOut{"output_norm.bias", []uint64{C}, same(w.FinalNorm.B)},
		tensorOut{"output.weight", []uint64{C, V}, same(w.LMHead)},
	)
	return meta, ts, nil
}

// convert writes m to w as a GGUF file for llama.cpp.
func convert(m *model.Model, w io.Writer) error {
	meta, ts, err := ggufModel(m)
	if err != nil {
		return fmt.Errorf("gguf: model %q: %w", m.Name, err)
	}
	return writeGGUF(w, meta, ts)
}
