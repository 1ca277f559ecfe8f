package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/gguf"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// tinyDirs are the tiny checkpoints of every architecture.
var tinyDirs = []string{"../../testdata/gpt2-tiny", "../../testdata/llama-tiny", "../../testdata/qwen2-tiny", "../../testdata/qwen3-tiny"}

// writeGGUFFile writes meta and ts as a GGUF file under t.TempDir().
func writeGGUFFile(t *testing.T, name string, meta []gguf.KV, ts []gguf.TensorOut) string {
	t.Helper()
	var b bytes.Buffer
	if err := gguf.Write(&b, meta, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameShape compares the configs' fields a GGUF file carries.
func sameShape(t *testing.T, got, want Config) {
	t.Helper()
	got.TorchDType, want.TorchDType = "", ""
	got.BOSTokenID, want.BOSTokenID = -1, -1
	got.EOSTokenIDs, want.EOSTokenIDs = nil, nil
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if !bytes.Equal(a, b) {
		t.Errorf("config read back\n%s\nwant\n%s", a, b)
	}
}

// smallGGUFModel is a random model of the tiny checkpoint's config (its
// architecture, width, rope scaling, biases) with a vocabulary of 512 and
// 256 positions, stored as dtype: the real tiny checkpoints' 150k-row
// embeddings take seconds a conversion under the race detector.
func smallGGUFModel(t *testing.T, dir string, dtype tensor.DType) *Model {
	t.Helper()
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.VocabSize, c.MaxPositions, c.BOSTokenID, c.EOSTokenIDs = 512, 256, 1, []int{2}
	m, err := NewRandom(filepath.Base(dir), c, RandomOptions{Seed: 7, Std: 0.2, DType: dtype})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGGUFRoundTrip writes a model of each tiny checkpoint's config as a
// GGUF file (every weight type) and reads it back: the same config, and
// the same values in every parameter (llama's permuted q and k rows
// restored, GPT-2's Conv1D matrices now out×in), within the rounding of
// the file's type. (The real tiny checkpoints go through GGUF files in the
// root package's golden tests.)
func TestGGUFRoundTrip(t *testing.T) {
	for _, dir := range tinyDirs {
		m := smallGGUFModel(t, dir, tensor.BF16)
		for _, typ := range []tensor.DType{tensor.F32, tensor.BF16, tensor.Q8_0} {
			t.Run(filepath.Base(dir)+"/"+string(typ), func(t *testing.T) {
				meta, ts, err := GGUFTensors(m, GGUFOptions{Type: typ})
				if err != nil {
					t.Fatal(err)
				}
				g, err := LoadGGUF(writeGGUFFile(t, "m.gguf", meta, ts))
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				sameShape(t, g.Config, m.Config)
				if g.Weights.TiedHead() != m.Weights.TiedHead() {
					t.Errorf("tied head %v, want %v", g.Weights.TiedHead(), m.Weights.TiedHead())
				}
				want, got := m.Weights, g.Weights
				pairs := [][2]tensor.Tensor{{want.Embed, got.Embed}, {want.FinalNorm.W, got.FinalNorm.W}}
				for i := range want.Layers {
					a, b := &want.Layers[i], &got.Layers[i]
					for j := range a.QKV {
						pairs = append(pairs, [2]tensor.Tensor{outIn(a.QKV[j]), b.QKV[j].W}, [2]tensor.Tensor{a.QKV[j].B, b.QKV[j].B})
					}
					for j := range a.Up {
						pairs = append(pairs, [2]tensor.Tensor{outIn(a.Up[j]), b.Up[j].W})
					}
					pairs = append(pairs, [2]tensor.Tensor{outIn(a.O), b.O.W}, [2]tensor.Tensor{outIn(a.Down), b.Down.W},
						[2]tensor.Tensor{a.QNorm, b.QNorm}, [2]tensor.Tensor{a.AttnNorm.W, b.AttnNorm.W})
				}
				for k, p := range pairs {
					if p[0].IsZero() != p[1].IsZero() {
						t.Fatalf("tensor %d: present %v, read back %v", k, !p[0].IsZero(), !p[1].IsZero())
					}
					if p[0].IsZero() {
						continue
					}
					conv := p[0]
					if len(p[1].Shape) == 2 {
						conv = p[0].Convert(p[1].DType)
					}
					if !slices.Equal(conv.Float32s(), p[1].Float32s()) {
						t.Fatalf("tensor %d (%v, %s): values differ", k, p[1].Shape, p[1].DType)
					}
				}
			})
		}
	}
}

// outIn is l's weight stored out×in.
func outIn(l Linear) tensor.Tensor {
	if !l.InMajor {
		return l.W
	}
	return tensor.FromFloat32(transpose(l.W.Float32s(), l.In, l.Out), int64(l.Out), int64(l.In))
}

func TestPermuteRowsInverse(t *testing.T) {
	v := make([]float32, 8*3)
	for i := range v {
		v[i] = float32(i)
	}
	x := tensor.FromFloat32(v, 8, 3)
	p, err := permuteRows(x, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	// Head 0 rows 0..3 (pairs (0,2), (1,3)) interleave as 0, 2, 1, 3.
	if got := p.Float32s()[:12]; !slices.Equal(got, []float32{0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11}) {
		t.Errorf("permuted %v", got)
	}
	back, _ := permuteRows(p, 2, true)
	if !slices.Equal(back.Float32s(), v) {
		t.Error("permuteRows(toHF) does not undo permuteRows")
	}
}

// TestGGUFRopeFreqs reads a rope_freqs tensor that is not Llama 3's
// standard scaling as the divisors themselves.
func TestGGUFRopeFreqs(t *testing.T) {
	m := smallGGUFModel(t, "../../testdata/llama-tiny", tensor.F32)
	m.Config.RopeScaling.LowFreqFactor = 2
	want := m.Config.InvFreq()
	meta, ts, err := GGUFTensors(m, GGUFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := LoadGGUF(writeGGUFFile(t, "m.gguf", meta, ts))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Config.RopeFreqFactors == nil || g.Config.RopeScaling != (Llama3Scaling{}) {
		t.Fatalf("scaling %+v, factors %v", g.Config.RopeScaling, g.Config.RopeFreqFactors)
	}
	for i, f := range g.Config.InvFreq() {
		if d := f/want[i] - 1; d > 1e-7 || d < -1e-7 {
			t.Errorf("inv_freq %d: %v, want %v", i, f, want[i])
		}
	}
}

// ggufVariant writes a qwen3-tiny-shaped GGUF after edit changes its metadata and
// tensors, and returns LoadGGUF's error.
func ggufVariant(t *testing.T, edit func(meta []gguf.KV, ts []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut)) error {
	t.Helper()
	m := smallGGUFModel(t, "../../testdata/qwen3-tiny", tensor.F32)
	meta, ts, err := GGUFTensors(m, GGUFOptions{Type: tensor.Q8_0})
	if err != nil {
		t.Fatal(err)
	}
	meta, ts = edit(meta, ts)
	g, err := LoadGGUF(writeGGUFFile(t, "m.gguf", meta, ts))
	if err == nil {
		g.Close()
	}
	return err
}

func TestGGUFRefusals(t *testing.T) {
	setMeta := func(key string, v any) func([]gguf.KV, []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut) {
		return func(meta []gguf.KV, ts []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut) {
			for i := range meta {
				if meta[i].Key == key {
					if v == nil {
						return slices.Delete(meta, i, i+1), ts
					}
					meta[i].Value = v
					return meta, ts
				}
			}
			return append(meta, gguf.KV{Key: key, Value: v}), ts
		}
	}
	editTensor := func(name string, f func(*gguf.TensorOut) bool) func([]gguf.KV, []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut) {
		return func(meta []gguf.KV, ts []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut) {
			for i := range ts {
				if ts[i].Name == name && !f(&ts[i]) {
					return meta, slices.Delete(ts, i, i+1)
				}
			}
			return meta, ts
		}
	}
	for _, c := range []struct {
		name string
		edit func([]gguf.KV, []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut)
		want string
	}{
		{"architecture", setMeta("general.architecture", "phi3"), `general.architecture "phi3" is not supported`},
		{"missing key", setMeta("qwen3.block_count", nil), `metadata key "qwen3.block_count" is missing`},
		{"key type", setMeta("qwen3.block_count", "two"), `metadata "qwen3.block_count" is string, want an integer`},
		{"sliding window", setMeta("qwen3.attention.sliding_window", uint32(64)), "qwen3.attention.sliding_window = 64 is not supported"},
		{"rope scaling", setMeta("qwen3.rope.scaling.type", "yarn"), "qwen3.rope.scaling.type = yarn is not supported"},
		{"experts", setMeta("qwen3.expert_count", uint32(8)), "qwen3.expert_count = 8 is not supported"},
		{"missing tensor", editTensor("blk.1.ffn_up.weight", func(*gguf.TensorOut) bool { return false }), `missing tensor "blk.1.ffn_up.weight"`},
		{"shape", editTensor("blk.0.attn_k_norm.weight", func(o *gguf.TensorOut) bool {
			o.Dims = []uint64{8}
			o.Data = func() tensor.Tensor { return tensor.FromFloat32(make([]float32, 8), 8) }
			return true
		}), `tensor "blk.0.attn_k_norm.weight" has shape [8], want [16]`},
		{"unexpected tensor", func(meta []gguf.KV, ts []gguf.TensorOut) ([]gguf.KV, []gguf.TensorOut) {
			return meta, append(ts, gguf.TensorOut{Name: "blk.2.attn_norm.weight", Dims: []uint64{32}, Type: tensor.F32, Data: ts[1].Data})
		}, `unexpected tensor "blk.2.attn_norm.weight"`},
		{"non-finite", editTensor("output_norm.weight", func(o *gguf.TensorOut) bool {
			o.Data = func() tensor.Tensor {
				v := make([]float32, 32)
				v[3] = float32(1) / float32(len(v)-32)
				return tensor.FromFloat32(v, 32)
			}
			return true
		}), `tensor "output_norm.weight" has a non-finite value`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ggufVariant(t, c.edit)
			if err == nil || !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrBadCheckpoint containing %q", err, c.want)
			}
		})
	}
}

// q4kFile is a GGUF file whose matrices are ggml Q4_K, as ollama's default
// Q4_K_M tags have them, with a Q6_K embedding: a random qwen2 of width
// 256 (Q4_K's block) written as F32, then its tensor infos retyped (the
// quantized data is smaller, so it still lies in the file).
func q4kFile(t *testing.T, dir string) string {
	c := qwen05B()
	c.VocabSize, c.MaxPositions, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.Intermediate = 512, 64, 256, 1, 4, 1, 64, 512
	c.BOSTokenID, c.EOSTokenIDs = 1, []int{2}
	m, err := NewRandom("q4k", c, RandomOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	meta, ts, err := GGUFTensors(m, GGUFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range meta {
		if meta[i].Key == "general.file_type" {
			meta[i].Value = uint32(15) // LLAMA_FTYPE_MOSTLY_Q4_K_M
		}
	}
	var b bytes.Buffer
	if err := gguf.Write(&b, meta, ts); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// ggml_type is the u32 after each info's name and dimensions.
	off := 0
	for _, ti := range f.Tensors {
		i := bytes.Index(data[off:], append(binaryLen(ti.Name), ti.Name...))
		p := off + i + 8 + len(ti.Name) + 4 + 8*len(ti.Dims)
		if len(ti.Dims) == 2 {
			data[p] = byte(gguf.TypeQ4_K)
			if ti.Name == "token_embd.weight" {
				data[p] = byte(gguf.TypeQ6_K)
			}
		}
		off = p
	}
	path := filepath.Join(dir, "q4k.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func binaryLen(s string) []byte {
	b := make([]byte, 8)
	for i, n := 0, uint64(len(s)); i < 8; i, n = i+1, n>>8 {
		b[i] = byte(n)
	}
	return b
}

func TestGGUFUnsupportedTypes(t *testing.T) {
	_, err := LoadGGUF(q4kFile(t, t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "tensor type Q6_K is not implemented (general.file_type Q4_K_M)") || !strings.Contains(err.Error(), `Q4_K (7 tensors, the first "blk.0.attn_q.weight")`) {
		t.Errorf("error %v, want the types named", err)
	}
}

// q4_0Tensors replaces every matrix of ts (but GPT-2's position
// embedding) by its Q4_0 encoding, as llama-quantize's Q4_0 files have
// them.
func q4_0Tensors(t *testing.T, ts []gguf.TensorOut) []gguf.TensorOut {
	t.Helper()
	for i := range ts {
		if len(ts[i].Dims) != 2 || ts[i].Name == "position_embd.weight" {
			continue
		}
		enc, err := gguf.QuantizeQ4_0(ts[i].Data().Float32s())
		if err != nil {
			t.Fatal(err)
		}
		ts[i].Encoded, ts[i].GGMLType = func() []byte { return enc }, gguf.TypeQ4_0
	}
	return ts
}

// TestGGUFQ4_0 reads a model whose matrices are Q4_0: each becomes the
// Q8_0 tensor holding the same values (1.06 bytes a weight in memory).
func TestGGUFQ4_0(t *testing.T) {
	m := smallGGUFModel(t, "../../testdata/llama-tiny", tensor.F32)
	meta, ts, err := GGUFTensors(m, GGUFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := writeGGUFFile(t, "q4.gguf", meta, q4_0Tensors(t, ts))
	// WriteGGUF's own Q4_0 option writes the same file.
	meta2, ts2, err := GGUFTensors(m, GGUFOptions{Type: GGUFQ4_0})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(writeGGUFFile(t, "q4b.gguf", meta2, ts2))
	if !bytes.Equal(a[len(a)-len(a)/2:], b[len(b)-len(b)/2:]) {
		t.Error("GGUFOptions{Type: GGUFQ4_0} writes other data than the Q4_0 encoding of each matrix")
	}
	g, err := LoadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w := g.Weights.Layers[1].Up[1].W // blk.1.ffn_up
	if w.DType != tensor.Q8_0 || g.Weights.Embed.DType != tensor.Q8_0 {
		t.Fatalf("weights read as %s, embedding %s; want Q8_0", w.DType, g.Weights.Embed.DType)
	}
	enc, _ := gguf.QuantizeQ4_0(m.Weights.Layers[1].Up[1].W.Float32s())
	want, _ := tensor.FromQ8_0(gguf.Q4_0ToQ8_0(enc), w.Shape...)
	if !slices.Equal(w.Float32s(), want.Float32s()) {
		t.Error("blk.1.ffn_up's values differ from its Q4_0 encoding's")
	}
	// The permuted q projection comes back in Hugging Face's row order.
	q := g.Weights.Layers[0].QKV[0].W.Float32s()
	hf := m.Weights.Layers[0].QKV[0].W.Float32s()
	for i := 0; i < len(q); i += 7 {
		if d := q[i] - hf[i]; d > 0.2 || d < -0.2 {
			t.Fatalf("q projection value %d: %v, want about %v", i, q[i], hf[i])
		}
	}
}
