package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// convertOptions are the choices a conversion leaves to its caller.
type convertOptions struct {
	// Type is how the file stores the matrices (the embedding, the
	// projections and an untied LM head): F32, F16 or BF16. Norm gains
	// and biases are always F32, as llama.cpp's own converter writes
	// one-dimensional tensors. Empty picks the architecture's default:
	// F32 for GPT-2 (whose checkpoints are float32), BF16 for Qwen2
	// (Qwen2.5's stored type).
	Type tensor.DType
}

// fileType is general.file_type (llama.h's enum llama_ftype) for matrices
// stored as t.
func fileType(t tensor.DType) uint32 {
	switch t {
	case tensor.F16:
		return 1 // LLAMA_FTYPE_MOSTLY_F16
	case tensor.BF16:
		return 32 // LLAMA_FTYPE_MOSTLY_BF16
	}
	return 0 // LLAMA_FTYPE_ALL_F32
}

// ggufModel returns the metadata and tensors of m in the llama.cpp
// architecture that runs it: "gpt2" for GPT-2, "qwen2" for Qwen2.
func ggufModel(m *model.Model, opts convertOptions) ([]metaKV, []tensorOut, error) {
	switch m.Config.Arch {
	case model.ArchGPT2:
		if opts.Type == "" {
			opts.Type = tensor.F32
		}
		return gpt2Model(m, opts)
	case model.ArchQwen2:
		if opts.Type == "" {
			opts.Type = tensor.BF16
		}
		return qwen2Model(m, opts)
	}
	return nil, nil, fmt.Errorf("architecture %s: this converter writes GPT-2 and Qwen2 only", m.Config.Arch)
}

// same returns t as it is, for tensorOut.Data.
func same(t tensor.Tensor) func() tensor.Tensor { return func() tensor.Tensor { return t } }

// gpt2Model returns m in llama.cpp's "gpt2" architecture. Shapes are in
// ggml order (NE[0] fastest): embeddings stay [rows][C] as in Hugging Face
// (ne = {C, rows}); the four Conv1D matrices, stored in×out by Hugging
// Face, are transposed to ggml's matmul layout [out][in] (ne = {in, out}).
func gpt2Model(m *model.Model, opts convertOptions) ([]metaKV, []tensorOut, error) {
	c := m.Config
	switch {
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
		{"general.file_type", fileType(opts.Type)},
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
	mat, vec := opts.Type, tensor.F32
	// conv1d transposes a Hugging Face Conv1D weight [in, out].
	conv1d := func(t tensor.Tensor, in, out uint64) func() tensor.Tensor {
		return func() tensor.Tensor {
			return tensor.FromFloat32(transpose(t.Float32s(), int(in), int(out)), int64(out), int64(in))
		}
	}
	ts := []tensorOut{
		{"token_embd.weight", []uint64{C, V}, mat, same(w.Embed)},
		{"position_embd.weight", []uint64{C, P}, vec, same(w.Positions)},
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := "blk." + strconv.Itoa(i) + "."
		ts = append(ts,
			tensorOut{p + "attn_norm.weight", []uint64{C}, vec, same(l.AttnNorm.W)},
			tensorOut{p + "attn_norm.bias", []uint64{C}, vec, same(l.AttnNorm.B)},
			tensorOut{p + "attn_qkv.weight", []uint64{C, 3 * C}, mat, conv1d(l.QKV[0].W, C, 3*C)},
			tensorOut{p + "attn_qkv.bias", []uint64{3 * C}, vec, same(l.QKV[0].B)},
			tensorOut{p + "attn_output.weight", []uint64{C, C}, mat, conv1d(l.O.W, C, C)},
			tensorOut{p + "attn_output.bias", []uint64{C}, vec, same(l.O.B)},
			tensorOut{p + "ffn_norm.weight", []uint64{C}, vec, same(l.MLPNorm.W)},
			tensorOut{p + "ffn_norm.bias", []uint64{C}, vec, same(l.MLPNorm.B)},
			tensorOut{p + "ffn_up.weight", []uint64{C, I}, mat, conv1d(l.Up[0].W, C, I)},
			tensorOut{p + "ffn_up.bias", []uint64{I}, vec, same(l.Up[0].B)},
			tensorOut{p + "ffn_down.weight", []uint64{I, C}, mat, conv1d(l.Down.W, I, C)},
			tensorOut{p + "ffn_down.bias", []uint64{C}, vec, same(l.Down.B)},
		)
	}
	// output.weight is written even when tied to the embeddings (as
	// llama.cpp's own converter does for GPT-2), so that every llama.cpp
	// version loads it.
	ts = append(ts,
		tensorOut{"output_norm.weight", []uint64{C}, vec, same(w.FinalNorm.W)},
		tensorOut{"output_norm.bias", []uint64{C}, vec, same(w.FinalNorm.B)},
		tensorOut{"output.weight", []uint64{C, V}, mat, same(w.LMHead)},
	)
	return meta, ts, nil
}

// convert writes m to w as a GGUF file for llama.cpp.
func convert(m *model.Model, w io.Writer, opts convertOptions) error {
	if _, ok := ggmlTypes[opts.Type]; !ok && opts.Type != "" {
		return fmt.Errorf("gguf: weight type %q: want F32, F16 or BF16", opts.Type)
	}
	meta, ts, err := ggufModel(m, opts)
	if err != nil {
		return fmt.Errorf("gguf: model %q: %w", m.Name, err)
	}
	return writeGGUF(w, meta, ts)
}
