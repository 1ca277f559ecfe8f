package model

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tinyserve/tinyserve/llm/gguf"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// GGUF files (llama.cpp's and ollama's format) hold the config as
// metadata (<arch>.block_count, ...) and the weights under llama.cpp's
// tensor names (token_embd, blk.N.attn_q, ...). This file reads them into
// the same Config and Weights a Hugging Face folder gives; gguf_write.go
// writes them. The two differ from Hugging Face's layout in two places:
//
//   - GPT-2's Conv1D matrices are stored out×in (ggml's matmul layout), so
//     they are read as nn.Linear projections (InMajor false);
//   - for "llama", llama.cpp's converter permutes the rows of the query
//     and key projections (and their biases) from Hugging Face's
//     rotate-half rotary layout to interleaved pairs (its
//     LlamaModel.permute); they are permuted back here. Qwen2 and Qwen3
//     use rotate-half ("NEOX") in llama.cpp and are stored as they are.

// ggufArchs are the general.architecture values tinyserve serves.
var ggufArchs = map[string]Arch{"gpt2": ArchGPT2, "llama": ArchLlama, "qwen2": ArchQwen2, "qwen3": ArchQwen3}

// ggufClasses are the Hugging Face classes a GGUF architecture stands for.
var ggufClasses = map[Arch]string{ArchGPT2: "GPT2LMHeadModel", ArchLlama: "LlamaForCausalLM", ArchQwen2: "Qwen2ForCausalLM", ArchQwen3: "Qwen3ForCausalLM"}

// IsGGUF reports whether path names a GGUF file: by its extension, or
// for a file without it (an ollama blob, sha256-<hex>) by its magic.
func IsGGUF(path string) bool {
	if hasGGUFExt(path) {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == gguf.Magic
}

func hasGGUFExt(path string) bool { return strings.EqualFold(filepath.Ext(path), ".gguf") }

// LoadGGUF reads a GGUF file of a gpt2, llama, qwen2 or qwen3 model: the
// config from its metadata, the weights memory-mapped (F32, F16, BF16 and
// Q8_0 as stored; Q4_0 as Q8_0, see llm/gguf). An unsupported
// architecture, metadata value or tensor type, a missing, unexpected or
// mis-shaped tensor are errors matching ErrBadCheckpoint that name it.
// The model's name is the file's base name without .gguf.
func LoadGGUF(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := modelFromGGUF(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	m.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	m.Source = Source{Name: m.Name, Dir: filepath.Dir(path), GGUF: path, Tokenizer: path}
	m.Files = []string{filepath.Base(path)}
	m.release = append(m.release, f.Close)
	return m, nil
}

func modelFromGGUF(f *gguf.File) (*Model, error) {
	if err := checkGGUFTypes(f); err != nil {
		return nil, err
	}
	c, err := ggufConfig(f)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: c}
	if err := m.readGGUFWeights(f); err != nil {
		return nil, err
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// ggufFileTypes names general.file_type's values (llama.h's enum
// llama_ftype), for errors.
var ggufFileTypes = map[int64]string{0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
	11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}

// checkGGUFTypes refuses a file with tensors of types tinyserve does not
// implement, naming each type with its count and first tensor: a mixed
// quantization such as ollama's default Q4_K_M uses several.
func checkGGUFTypes(f *gguf.File) error {
	counts, first := map[gguf.Type]int{}, map[gguf.Type]string{}
	var order []gguf.Type
	for _, t := range f.Tensors {
		switch t.Type {
		case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0:
			continue
		}
		if counts[t.Type] == 0 {
			order = append(order, t.Type)
			first[t.Type] = t.Name
		}
		counts[t.Type]++
	}
	if len(order) == 0 {
		return nil
	}
	var parts []string
	for _, t := range order {
		parts = append(parts, fmt.Sprintf("%s (%d tensors, the first %q)", t, counts[t], first[t]))
	}
	ft := ""
	if n, err := f.Int("general.file_type"); err == nil {
		if name, ok := ggufFileTypes[n]; ok {
			ft = " (general.file_type " + name + ")"
		}
	}
	return fmt.Errorf("tensor type %s is not implemented%s: the file has %s; tinyserve reads F32, F16, BF16, Q8_0 and Q4_0",
		order[0], ft, strings.Join(parts, ", "))
}

// ggufConfig reads the Config from f's metadata and tensor shapes.
func ggufConfig(f *gguf.File) (Config, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return Config{}, err
	}
	arch, ok := ggufArchs[name]
	if !ok {
		return Config{}, fmt.Errorf("general.architecture %q is not supported; tinyserve serves gpt2, llama, qwen2 and qwen3", name)
	}
	p := name + "."
	var c Config
	c.Arch, c.Architecture = arch, ggufClasses[arch]
	ints := []struct {
		key string
		dst *int
		def int // -1: required
	}{
		{p + "block_count", &c.Layers, -1}, {p + "embedding_length", &c.Hidden, -1}, {p + "feed_forward_length", &c.Intermediate, -1},
		{p + "attention.head_count", &c.Heads, -1}, {p + "context_length", &c.MaxPositions, -1}, {p + "attention.head_count_kv", &c.KVHeads, 0},
		{p + "attention.key_length", &c.HeadDim, 0},
	}
	for _, k := range ints {
		if !f.Has(k.key) && k.def >= 0 {
			*k.dst = k.def
			continue
		}
		v, err := f.Int(k.key)
		if err != nil {
			return Config{}, err
		}
		if v < 0 || v > maxDim {
			return Config{}, fmt.Errorf("metadata %s = %d is out of range", k.key, v)
		}
		*k.dst = int(v)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if f.Has(p + "attention.value_length") {
		if v, err := f.Int(p + "attention.value_length"); err != nil || v != int64(c.HeadDim) {
			return Config{}, fmt.Errorf("metadata %sattention.value_length %d differs from the key length %d (err %v): not supported", p, v, c.HeadDim, err)
		}
	}
	for _, key := range []string{"expert_count", "attention.sliding_window", "rope.scaling.type", "attention.scale", "rope.dimension_count"} {
		if !f.Has(p + key) {
			continue
		}
		v, _ := f.Get(p + key)
		switch {
		case key == "expert_count":
			if n, _ := f.Int(p + key); n == 0 {
				continue
			}
		case key == "rope.scaling.type":
			if s, _ := f.String(p + key); s == "none" || s == "" {
				continue
			}
		case key == "attention.scale":
			if s, err := f.Float(p + key); err == nil && c.HeadDim > 0 && math.Abs(s*math.Sqrt(float64(c.HeadDim))-1) < 1e-6 {
				continue
			}
		case key == "rope.dimension_count":
			if n, _ := f.Int(p + key); n == int64(c.HeadDim) {
				continue
			}
		case key == "attention.sliding_window" && arch == ArchQwen2:
			continue // llama.cpp's qwen2 ignores it too (use_sliding_window false)
		}
		return Config{}, fmt.Errorf("metadata %s%s = %v is not supported", p, key, v)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return Config{}, fmt.Errorf("missing tensor \"token_embd.weight\"")
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != uint64(c.Hidden) || emb.Dims[1] > maxDim {
		return Config{}, fmt.Errorf("tensor \"token_embd.weight\" has dimensions %v, want [%d, vocabulary]", emb.Dims, c.Hidden)
	}
	c.VocabSize = int(emb.Dims[1])
	c.TiedEmbeddings = ggufTied(f, emb)
	c.BOSTokenID = -1
	if f.Has("tokenizer.ggml.bos_token_id") {
		v, err := f.Int("tokenizer.ggml.bos_token_id")
		if err != nil {
			return Config{}, err
		}
		c.BOSTokenID = int(min(v, math.MaxInt32))
	}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if f.Has(key) {
			v, err := f.Int(key)
			if err != nil {
				return Config{}, err
			}
			if !slices.Contains(c.EOSTokenIDs, int(min(v, math.MaxInt32))) {
				c.EOSTokenIDs = append(c.EOSTokenIDs, int(min(v, math.MaxInt32)))
			}
		}
	}
	if t, ok := f.Tensor("blk.0.ffn_down.weight"); ok {
		c.TorchDType = map[gguf.Type]string{gguf.TypeF32: "float32", gguf.TypeF16: "float16", gguf.TypeBF16: "bfloat16"}[t.Type]
	}
	eps := "attention.layer_norm_rms_epsilon"
	if arch == ArchGPT2 {
		c.Norm, c.LearnedPositions, c.MLP, c.Activation = LayerNorm, true, MLPPlain, GeluTanh
		c.QKVBias, c.OBias, c.MLPBias = true, true, true
		eps = "attention.layer_norm_epsilon"
	} else {
		c.Norm, c.Rotary, c.MLP, c.Activation = RMSNorm, true, MLPGated, SiLU
		c.RopeTheta = 10000
		if f.Has(p + "rope.freq_base") {
			if c.RopeTheta, err = ggufFloat(f, p+"rope.freq_base"); err != nil {
				return Config{}, err
			}
		}
		_, c.QKVBias = f.Tensor("blk.0.attn_q.bias")
		_, c.OBias = f.Tensor("blk.0.attn_output.bias")
		_, c.MLPBias = f.Tensor("blk.0.ffn_up.bias")
		_, c.QKNorm = f.Tensor("blk.0.attn_q_norm.weight")
		if c.QKNorm != (arch == ArchQwen3) {
			return Config{}, fmt.Errorf("%s with q/k norms %v: qwen3 has them, llama and qwen2 do not", name, c.QKNorm)
		}
	}
	if c.NormEps, err = ggufFloat(f, p+eps); err != nil {
		return Config{}, err
	}
	if c.HeadDim > 0 {
		c.AttnScale = 1 / math.Sqrt(float64(c.HeadDim))
	}
	if err := ggufRopeFreqs(f, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ggufFloat reads a float metadata value. A float32 (as llama.cpp writes
// them) is taken as the shortest decimal that rounds to it, the value its
// config.json had (1e-06, not 9.99999997e-07), so that a GGUF model
// computes with the same epsilon and rotary base as its checkpoint.
func ggufFloat(f *gguf.File, key string) (float64, error) {
	v, _ := f.Get(key)
	if x, ok := v.(float32); ok {
		return strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	}
	return f.Float(key)
}

// ggufTied reports whether the LM head is the embedding: no
// output.weight, or one holding the same bytes as token_embd.weight (GPT-2
// files carry such a copy, as llama.cpp's converter writes them), which is
// then not mapped twice.
func ggufTied(f *gguf.File, emb *gguf.TensorInfo) bool {
	out, ok := f.Tensor("output.weight")
	if !ok {
		return true
	}
	if out.Type != emb.Type || !slices.Equal(out.Dims, emb.Dims) {
		return false
	}
	a, errA := f.Data(out)
	b, errB := f.Data(emb)
	return errA == nil && errB == nil && string(a) == string(b)
}

// ggufRopeFreqs reads rope_freqs.weight, llama.cpp's form of Llama 3's
// rope scaling: a divisor for each rotary frequency. When the divisors are
// those of Llama 3.1's and 3.2's scaling (low and high frequency factors 1
// and 4, 8192 original positions, the largest divisor as the factor) the
// config gets that scaling exactly, as config.json would give it;
// otherwise the divisors themselves (RopeFreqFactors).
func ggufRopeFreqs(f *gguf.File, c *Config) error {
	info, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		return nil
	}
	if !c.Rotary || len(info.Dims) != 1 || info.Dims[0] != uint64(c.HeadDim/2) {
		return fmt.Errorf("tensor \"rope_freqs.weight\" has dimensions %v, want [%d]", info.Dims, c.HeadDim/2)
	}
	t, err := f.LoadInfo(info)
	if err != nil {
		return err
	}
	factors := make([]float64, t.Len())
	for i := range factors {
		factors[i] = float64(t.At(i))
	}
	try := *c
	try.RopeScaling = Llama3Scaling{Factor: slices.Max(factors), LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
	plain := *c
	scaled, base := try.InvFreq(), plain.InvFreq()
	match := true
	for i := range factors {
		if float32(base[i]/scaled[i]) != float32(factors[i]) {
			match = false
		}
	}
	if match {
		c.RopeScaling = try.RopeScaling
	} else {
		c.RopeFreqFactors = factors
	}
	return nil
}

// ggufParam is one tensor of a GGUF model: its name, its shape outermost
// first, where it goes, and for llama's q and k how many heads to
// un-permute.
type ggufParam struct {
	name    string
	shape   []int64
	dst     *tensor.Tensor
	permute int
}

// ggufParams lists the tensors of a GGUF model of config c, pointing into
// w (of NewWeights' form, with projections set to out×in).
func ggufParams(c *Config, w *Weights) []ggufParam {
	V, C, D := int64(c.VocabSize), int64(c.Hidden), int64(c.HeadDim)
	ps := []ggufParam{{name: "token_embd.weight", shape: []int64{V, C}, dst: &w.Embed}}
	if c.LearnedPositions {
		ps = append(ps, ggufParam{name: "position_embd.weight", shape: []int64{int64(c.MaxPositions), C}, dst: &w.Positions})
	}
	add := func(name string, dst *tensor.Tensor, shape ...int64) {
		ps = append(ps, ggufParam{name: name, shape: shape, dst: dst})
	}
	lin := func(name string, l *Linear, bias bool, permute int) {
		ps = append(ps, ggufParam{name: name + ".weight", shape: []int64{int64(l.Out), int64(l.In)}, dst: &l.W, permute: permute})
		if bias {
			ps = append(ps, ggufParam{name: name + ".bias", shape: []int64{int64(l.Out)}, dst: &l.B, permute: permute})
		}
	}
	norm := func(name string, n *NormWeights) {
		add(name+".weight", &n.W, C)
		if c.Norm == LayerNorm {
			add(name+".bias", &n.B, C)
		}
	}
	permQ, permK := 0, 0
	if c.Arch == ArchLlama {
		permQ, permK = c.Heads, c.KVHeads
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := "blk." + strconv.Itoa(i) + "."
		norm(p+"attn_norm", &l.AttnNorm)
		if c.Arch == ArchGPT2 {
			lin(p+"attn_qkv", &l.QKV[0], true, 0)
		} else {
			lin(p+"attn_q", &l.QKV[0], c.QKVBias, permQ)
			lin(p+"attn_k", &l.QKV[1], c.QKVBias, permK)
			lin(p+"attn_v", &l.QKV[2], c.QKVBias, 0)
		}
		lin(p+"attn_output", &l.O, c.OBias, 0)
		if c.QKNorm {
			add(p+"attn_q_norm.weight", &l.QNorm, D)
			add(p+"attn_k_norm.weight", &l.KNorm, D)
		}
		norm(p+"ffn_norm", &l.MLPNorm)
		if c.MLP == MLPGated {
			lin(p+"ffn_gate", &l.Up[0], c.MLPBias, 0)
			lin(p+"ffn_up", &l.Up[1], c.MLPBias, 0)
		} else {
			lin(p+"ffn_up", &l.Up[0], c.MLPBias, 0)
		}
		lin(p+"ffn_down", &l.Down, c.MLPBias, 0)
	}
	norm("output_norm", &w.FinalNorm)
	if !c.TiedEmbeddings {
		add("output.weight", &w.LMHead, V, C)
	}
	return ps
}

// ggufWeights is NewWeights(c) with every projection stored out×in, as
// GGUF files store them (GPT-2's included).
func ggufWeights(c *Config) Weights {
	w := NewWeights(c)
	for i := range w.Layers {
		l := &w.Layers[i]
		l.O.InMajor, l.Down.InMajor = false, false
		for j := range l.QKV {
			l.QKV[j].InMajor = false
		}
		for j := range l.Up {
			l.Up[j].InMajor = false
		}
	}
	return w
}

// readGGUFWeights reads every tensor of m's config from f, refusing a
// missing, mis-shaped or non-finite tensor and any tensor that is not one
// of the config's (but rope_freqs, read into the config).
func (m *Model) readGGUFWeights(f *gguf.File) error {
	c := &m.Config
	m.Weights = ggufWeights(c)
	ps := ggufParams(c, &m.Weights)
	known := map[string]bool{"rope_freqs.weight": true, "output.weight": c.Arch == ArchGPT2}
	for _, p := range ps {
		known[p.name] = true
	}
	for _, t := range f.Tensors {
		if !known[t.Name] {
			return fmt.Errorf("unexpected tensor %q: not a parameter of a %s with this metadata (%d layers)", t.Name, c.Arch, c.Layers)
		}
	}
	for _, p := range ps {
		info, ok := f.Tensor(p.name)
		if !ok {
			return fmt.Errorf("missing tensor %q", p.name)
		}
		if got := info.Shape(); !slices.Equal(got, p.shape) {
			return fmt.Errorf("tensor %q has shape %v, want %v", p.name, got, p.shape)
		}
		t, err := f.LoadInfo(info)
		if err != nil {
			return err
		}
		if i, v, bad := t.FirstNonFinite(); bad {
			return fmt.Errorf("tensor %q has a non-finite value %v at index %d", p.name, v, i)
		}
		if p.permute > 0 {
			if t, err = permuteRows(t, p.permute, true); err != nil {
				return fmt.Errorf("tensor %q: %w", p.name, err)
			}
		}
		*p.dst = t
	}
	if c.TiedEmbeddings {
		m.Weights.LMHead = m.Weights.Embed
	}
	return nil
}

// permuteRows reorders the rows (the first dimension) of t within each of
// heads groups between Hugging Face's rotate-half layout and llama.cpp's
// interleaved pairs: GGUF row h·D + 2b + a holds Hugging Face row
// h·D + a·D/2 + b (D rows a head, a in {0, 1}, b < D/2), as llama.cpp's
// LlamaModel.permute writes it. toHF undoes that permutation; otherwise
// it is applied. A row is whole blocks of any stored type, so the bytes
// are moved as they are, into a new tensor.
func permuteRows(t tensor.Tensor, heads int, toHF bool) (tensor.Tensor, error) {
	rows := int(t.Shape[0])
	raw := t.Raw()
	if heads < 1 || rows%heads != 0 || (rows/heads)%2 != 0 || len(raw)%rows != 0 {
		return tensor.Tensor{}, fmt.Errorf("%d rows do not split into %d heads of even size", rows, heads)
	}
	d, rb := rows/heads, len(raw)/rows
	out := make([]byte, len(raw))
	for h := range heads {
		for a := range 2 {
			for b := range d / 2 {
				g, hf := h*d+2*b+a, h*d+a*d/2+b
				src, dst := g, hf
				if !toHF {
					src, dst = hf, g
				}
				copy(out[dst*rb:(dst+1)*rb], raw[src*rb:(src+1)*rb])
			}
		}
	}
	if t.DType == tensor.Q8_0 {
		return tensor.FromQ8_0(out, t.Shape...)
	}
	return tensor.FromBytes(t.DType, out, t.Shape...)
}
