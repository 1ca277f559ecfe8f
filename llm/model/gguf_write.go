package model

import (
	"fmt"
	"io"
	"math"

	"github.com/tinyserve/tinyserve/llm/gguf"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// GGUFQ4_0 asks WriteGGUF for ggml's 4-bit Q4_0 matrices
// (gguf.QuantizeQ4_0), which LoadGGUF reads back as Q8_0: not a type a
// tensor.Tensor holds, only a GGUFOptions.Type.
const GGUFQ4_0 tensor.DType = "Q4_0"

// GGUFOptions are WriteGGUF's choices.
type GGUFOptions struct {
	// Type is how the file stores the matrices (the embedding, the
	// projections, an untied LM head): F32, F16, BF16, Q8_0 or GGUFQ4_0.
	// Norm gains, biases and GPT-2's position embedding are always F32,
	// as llama.cpp's converter writes them; a matrix whose rows are not
	// whole 32-value blocks falls back to F16, as there. Empty means F32.
	Type tensor.DType
	// Metadata is added after the model's own: the tokenizer's
	// (tokenizer.ggml.*, see tokenizer.GGUFVocab.KVs), a chat template
	// (tokenizer.chat_template).
	Metadata []gguf.KV
}

// fileType is general.file_type (llama.h's enum llama_ftype) for matrices
// stored as t.
func fileType(t tensor.DType) uint32 {
	switch t {
	case tensor.F16:
		return 1 // LLAMA_FTYPE_MOSTLY_F16
	case tensor.Q8_0:
		return 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	case GGUFQ4_0:
		return 2 // LLAMA_FTYPE_MOSTLY_Q4_0
	case tensor.BF16:
		return 32 // LLAMA_FTYPE_MOSTLY_BF16
	}
	return 0 // LLAMA_FTYPE_ALL_F32
}

// WriteGGUF writes m as the GGUF file llama.cpp's converter would write for
// it (architecture gpt2, llama, qwen2 or qwen3, llama.cpp's tensor names,
// llama's q and k rows permuted, Llama 3's rope scaling as
// rope_freqs.weight), which LoadGGUF reads back to the same model. What
// llama.cpp's graph for the architecture would compute differently (an
// attention scale other than 1/sqrt(head_dim), GELU other than tanh's) is
// refused by name.
func WriteGGUF(m *Model, w io.Writer, o GGUFOptions) error {
	meta, ts, err := GGUFTensors(m, o)
	if err != nil {
		return err
	}
	return gguf.Write(w, meta, ts)
}

// GGUFTensors is the metadata and tensors WriteGGUF writes.
func GGUFTensors(m *Model, o GGUFOptions) ([]gguf.KV, []gguf.TensorOut, error) {
	c := &m.Config
	if o.Type == "" {
		o.Type = tensor.F32
	}
	switch o.Type {
	case tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, GGUFQ4_0:
	default:
		return nil, nil, fmt.Errorf("gguf: weight type %q: want F32, F16, BF16, Q8_0 or Q4_0", o.Type)
	}
	arch := ""
	for name, a := range ggufArchs {
		if a == c.Arch {
			arch = name
		}
	}
	switch {
	case arch == "":
		return nil, nil, fmt.Errorf("gguf: model %q: architecture %s has no GGUF form here", m.Name, c.Arch)
	case math.Abs(c.AttnScale*math.Sqrt(float64(c.HeadDim))-1) > 1e-9 || c.ScaleAttnByInverseLayerIdx:
		return nil, nil, fmt.Errorf("gguf: model %q: attention scale %v: llama.cpp scales by 1/sqrt(head_dim) only", m.Name, c.AttnScale)
	case c.Arch == ArchGPT2 && c.Activation != GeluTanh:
		return nil, nil, fmt.Errorf("gguf: model %q: activation %q: llama.cpp's gpt2 uses the tanh GELU only", m.Name, c.Activation)
	case c.Arch == ArchGPT2 && c.QDim() != c.Hidden:
		return nil, nil, fmt.Errorf("gguf: model %q: heads × head_dim %d differs from hidden %d", m.Name, c.QDim(), c.Hidden)
	}
	p := arch + "."
	meta := []gguf.KV{
		{Key: "general.architecture", Value: arch},
		{Key: "general.name", Value: m.Name},
		{Key: "general.alignment", Value: uint32(gguf.DefaultAlignment)},
		{Key: "general.file_type", Value: fileType(o.Type)},
		{Key: p + "context_length", Value: uint32(c.MaxPositions)},
		{Key: p + "embedding_length", Value: uint32(c.Hidden)},
		{Key: p + "feed_forward_length", Value: uint32(c.Intermediate)},
		{Key: p + "block_count", Value: uint32(c.Layers)},
		{Key: p + "attention.head_count", Value: uint32(c.Heads)},
	}
	if c.Arch == ArchGPT2 {
		meta = append(meta, gguf.KV{Key: p + "attention.layer_norm_epsilon", Value: float32(c.NormEps)})
	} else {
		meta = append(meta,
			gguf.KV{Key: p + "attention.head_count_kv", Value: uint32(c.KVHeads)},
			gguf.KV{Key: p + "rope.freq_base", Value: float32(c.RopeTheta)},
			gguf.KV{Key: p + "attention.layer_norm_rms_epsilon", Value: float32(c.NormEps)},
			gguf.KV{Key: p + "rope.dimension_count", Value: uint32(c.HeadDim)},
		)
		if c.HeadDim*c.Heads != c.Hidden {
			meta = append(meta, gguf.KV{Key: p + "attention.key_length", Value: uint32(c.HeadDim)},
				gguf.KV{Key: p + "attention.value_length", Value: uint32(c.HeadDim)})
		}
	}
	meta = append(meta, o.Metadata...)

	// The tensors, in llama.cpp's names and shapes, from the weights as
	// they are laid out in memory.
	w := ggufWeights(c)
	ps := ggufParams(c, &w)
	src := map[*tensor.Tensor]*Linear{} // GGUF slot -> the model's projection
	srcT := map[*tensor.Tensor]tensor.Tensor{}
	mw := &m.Weights
	srcT[&w.Embed], srcT[&w.Positions], srcT[&w.LMHead] = mw.Embed, mw.Positions, mw.LMHead
	srcT[&w.FinalNorm.W], srcT[&w.FinalNorm.B] = mw.FinalNorm.W, mw.FinalNorm.B
	for i := range w.Layers {
		l, ml := &w.Layers[i], &mw.Layers[i]
		if len(ml.QKV) != len(l.QKV) || len(ml.Up) != len(l.Up) {
			return nil, nil, fmt.Errorf("gguf: model %q: layer %d has %d q/k/v and %d MLP input projections, want %d and %d", m.Name, i, len(ml.QKV), len(ml.Up), len(l.QKV), len(l.Up))
		}
		srcT[&l.AttnNorm.W], srcT[&l.AttnNorm.B], srcT[&l.MLPNorm.W], srcT[&l.MLPNorm.B] = ml.AttnNorm.W, ml.AttnNorm.B, ml.MLPNorm.W, ml.MLPNorm.B
		srcT[&l.QNorm], srcT[&l.KNorm] = ml.QNorm, ml.KNorm
		pairs := [][2]*Linear{{&l.O, &ml.O}, {&l.Down, &ml.Down}}
		for j := range l.QKV {
			pairs = append(pairs, [2]*Linear{&l.QKV[j], &ml.QKV[j]})
		}
		for j := range l.Up {
			pairs = append(pairs, [2]*Linear{&l.Up[j], &ml.Up[j]})
		}
		for _, pr := range pairs {
			src[&pr[0].W] = pr[1]
			srcT[&pr[0].B] = pr[1].B
		}
	}
	var ts []gguf.TensorOut
	for _, gp := range ps {
		dims := make([]uint64, len(gp.shape))
		for i, d := range gp.shape {
			dims[len(dims)-1-i] = uint64(d)
		}
		typ := tensor.F32
		if len(dims) == 2 && gp.dst != &w.Positions {
			typ = o.Type
			if (typ == tensor.Q8_0 || typ == GGUFQ4_0) && dims[0]%tensor.Q8_0BlockLen != 0 {
				typ = tensor.F16
			}
		}
		data, err := ggufSource(gp, src, srcT)
		if err != nil {
			return nil, nil, fmt.Errorf("gguf: model %q: tensor %q: %w", m.Name, gp.name, err)
		}
		out := gguf.TensorOut{Name: gp.name, Dims: dims, Type: typ, Data: data}
		if typ == GGUFQ4_0 {
			out.GGMLType = gguf.TypeQ4_0
			out.Encoded = func() []byte {
				enc, _ := gguf.QuantizeQ4_0(data().Float32s()) // whole blocks: checked above
				return enc
			}
		}
		ts = append(ts, out)
	}
	if c.TiedEmbeddings && c.Arch == ArchGPT2 {
		// Written even when tied, as llama.cpp's converter does for GPT-2,
		// so that every llama.cpp version loads it; LoadGGUF ties it back.
		ts = append(ts, gguf.TensorOut{Name: "output.weight", Dims: ts[0].Dims, Type: ts[0].Type, Data: ts[0].Data})
	}
	if c.Rotary && c.RopeScaling != (Llama3Scaling{}) || c.RopeFreqFactors != nil {
		scaled := c.InvFreq()
		plain := *c
		plain.RopeScaling, plain.RopeFreqFactors = Llama3Scaling{}, nil
		base := plain.InvFreq()
		f := make([]float32, len(base))
		for i := range f {
			f[i] = float32(base[i] / scaled[i])
		}
		ts = append(ts, gguf.TensorOut{Name: "rope_freqs.weight", Dims: []uint64{uint64(len(f))}, Type: tensor.F32,
			Data: func() tensor.Tensor { return tensor.FromFloat32(f, int64(len(f))) }})
	}
	return meta, ts, nil
}

// ggufSource returns the function that gives a GGUF tensor's values from
// the model: a projection transposed from in×out when the model stores it
// so (GPT-2's Conv1D), llama's q and k rows permuted.
func ggufSource(gp ggufParam, src map[*tensor.Tensor]*Linear, srcT map[*tensor.Tensor]tensor.Tensor) (func() tensor.Tensor, error) {
	if l, ok := src[gp.dst]; ok {
		if l.W.IsZero() {
			return nil, fmt.Errorf("the model has no weight")
		}
		return func() tensor.Tensor {
			t := l.W
			if l.InMajor {
				t = tensor.FromFloat32(transpose(t.Float32s(), l.In, l.Out), int64(l.Out), int64(l.In))
			}
			if gp.permute > 0 {
				t, _ = permuteRows(t, gp.permute, false) // shapes checked by Check
			}
			return t
		}, nil
	}
	t, ok := srcT[gp.dst]
	if !ok || t.IsZero() {
		return nil, fmt.Errorf("the model has no such weight")
	}
	if gp.permute > 0 { // a q or k bias
		return func() tensor.Tensor { p, _ := permuteRows(t, gp.permute, false); return p }, nil
	}
	return func() tensor.Tensor { return t }, nil
}

// transpose returns the row-major [cols, rows] transpose of the row-major
// [rows, cols] matrix a.
func transpose(a []float32, rows, cols int) []float32 {
	t := make([]float32, len(a))
	const blk = 64
	for i0 := 0; i0 < rows; i0 += blk {
		for j0 := 0; j0 < cols; j0 += blk {
			for i := i0; i < min(rows, i0+blk); i++ {
				row := a[i*cols : (i+1)*cols]
				for j := j0; j < min(cols, j0+blk); j++ {
					t[j*rows+i] = row[j]
				}
			}
		}
	}
	return t
}
