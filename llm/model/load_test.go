package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/tinyserve/tinyserve/llm/checkpoint"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// smallConfig is a GPT-2 shape small enough to write and corrupt in every
// test: 2 layers of width 4 with 2 heads, 8 positions, 11 token ids.
func smallConfig() Config {
	c := gpt2Builtin(2, 4, 2)
	c.VocabSize, c.MaxPositions = 11, 8
	c.BOSTokenID, c.EOSTokenIDs = 10, []int{10}
	return c
}

func smallModel(t testing.TB) *Model {
	t.Helper()
	m, err := NewRandom("small", smallConfig(), RandomOptions{Seed: 7, Std: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rawEntry is one header entry of a crafted safetensors file.
type rawEntry struct {
	Name   string
	DType  string
	Shape  []int64
	Offset [2]int64
}

// modelEntries lists m's tensors (params: the LM head only when untied)
// as F32 entries laid out contiguously, with the matching data section.
func modelEntries(m *Model, prefix string) ([]rawEntry, []byte) {
	var es []rawEntry
	var data []byte
	w := m.Weights
	for _, p := range params(&m.Config, &w) {
		begin := int64(len(data))
		for _, v := range p.dst.Float32s() {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		es = append(es, rawEntry{prefix + p.name, "F32", p.shape, [2]int64{begin, int64(len(data))}})
	}
	return es, data
}

// writeRaw writes a safetensors file from entries and a data section exactly
// as given, so tests can write files that break the format's rules.
func writeRaw(t testing.TB, path string, es []rawEntry, data []byte) {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	for _, e := range es {
		hdr[e.Name] = map[string]any{"dtype": e.DType, "shape": e.Shape, "data_offsets": e.Offset}
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	buf = append(append(buf, js...), data...)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeConfig(t testing.TB, dir string, c Config) {
	t.Helper()
	js, err := MarshalConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editHeader returns a safetensors file's bytes with its JSON header
// rewritten by edit (the length prefix follows).
func editHeader(file []byte, edit func(js string) string) []byte {
	n := binary.LittleEndian.Uint64(file)
	js := edit(string(file[8 : 8+n]))
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(out, js...), file[8+n:]...)
}

func entry(es []rawEntry, name string) *rawEntry {
	for i := range es {
		if es[i].Name == name {
			return &es[i]
		}
	}
	panic("no entry " + name)
}

// TestLoadErrors writes broken checkpoints and checks that each error
// matches ErrBadCheckpoint and names the file and the tensor.
func TestLoadErrors(t *testing.T) {
	m := smallModel(t)
	tests := []struct {
		name string
		// edit changes the entries and data of a valid model.safetensors;
		// raw, when set, replaces the file's bytes entirely.
		edit func(es []rawEntry, data []byte) ([]rawEntry, []byte)
		raw  func(valid []byte) []byte
		want []string // substrings of the error besides the file name
	}{
		{name: "missing tensor",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				return slices.DeleteFunc(es, func(e rawEntry) bool { return e.Name == "h.1.mlp.c_fc.bias" }), d
			},
			want: []string{"missing tensor", `"h.1.mlp.c_fc.bias"`}},
		{name: "wrong shape",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				entry(es, "h.0.attn.c_proj.weight").Shape = []int64{2, 8} // same bytes, wrong shape
				return es, d
			},
			want: []string{`"h.0.attn.c_proj.weight"`, "shape [2 8]", "want [4 4]"}},
		{name: "unsupported dtype",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				entry(es, "wte.weight").DType = "I32" // 4 bytes, so the size checks pass
				return es, d
			},
			want: []string{`"wte.weight"`, "unsupported dtype I32"}},
		{name: "unknown dtype",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				entry(es, "ln_f.bias").DType = "Q4"
				return es, d
			},
			want: []string{`"ln_f.bias"`, "unsupported dtype Q4"}},
		{name: "truncated data",
			raw:  func(v []byte) []byte { return v[:len(v)-10] },
			want: []string{"truncated"}},
		{name: "truncated header",
			raw:  func(v []byte) []byte { return v[:40] },
			want: []string{"truncated file: header claims"}},
		{name: "truncated length prefix",
			raw:  func(v []byte) []byte { return v[:5] },
			want: []string{"truncated file"}},
		{name: "offsets reversed",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				e := entry(es, "h.0.ln_2.weight")
				e.Offset[0], e.Offset[1] = e.Offset[1], e.Offset[0]
				return es, d
			},
			want: []string{`"h.0.ln_2.weight"`, "out of range"}},
		{name: "offsets past the end",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				e := entry(es, "ln_f.weight")
				e.Offset = [2]int64{int64(len(d)) + 100, int64(len(d)) + 116}
				return es, d
			},
			want: []string{`"ln_f.weight"`, "out of range"}},
		{name: "offsets disagree with shape",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				entry(es, "wpe.weight").Offset[1] -= 4
				return es, d
			},
			want: []string{`"wpe.weight"`, "out of range", "needs 128 bytes"}},
		{name: "overlapping",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				entry(es, "h.0.ln_1.bias").Offset = entry(es, "h.0.ln_1.weight").Offset
				return es, d
			},
			want: []string{"overlap", `"h.0.ln_1.bias"`, `"h.0.ln_1.weight"`}},
		{name: "empty tensor inside another",
			// No bytes are shared, but an offset inside another tensor's
			// bytes is no place a writer puts a tensor (found by
			// FuzzParseSafetensors: the corpus entry empty_inside_other).
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				w := entry(es, "ln_f.weight").Offset
				e := entry(es, "ln_f.bias")
				e.Shape = []int64{0, 4}
				e.Offset = [2]int64{w[0] + 4, w[0] + 4}
				return es, d
			},
			want: []string{"overlap", `"ln_f.bias"`, `"ln_f.weight"`}},
		{name: "duplicate tensor name",
			// encoding/json keeps the last of two equal keys: the first
			// description of wpe.weight would be dropped silently.
			raw: func(v []byte) []byte {
				return editHeader(v, func(js string) string {
					return `{"wpe.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` + js[1:]
				})
			},
			want: []string{`"wpe.weight"`, "twice"}},
		{name: "header not UTF-8",
			// JSON must be UTF-8 and the reference implementation refuses
			// such a header; encoding/json would read 0xff as U+FFFD.
			raw: func(v []byte) []byte {
				return editHeader(v, func(js string) string {
					return strings.Replace(js, `"format":"pt"`, "\"format\":\"p\xff\"", 1)
				})
			},
			want: []string{"header is not valid UTF-8", "byte 28"}},
		{name: "metadata not text to text",
			// The reference implementation reads __metadata__ as a map of
			// strings and refuses a file whose metadata is anything else.
			raw: func(v []byte) []byte {
				return editHeader(v, func(js string) string {
					return strings.Replace(js, `{"format":"pt"}`, `["pt"]`, 1)
				})
			},
			want: []string{"__metadata__ must be an object of strings", `["pt"]`}},
		{name: "metadata value not a string",
			raw: func(v []byte) []byte {
				return editHeader(v, func(js string) string {
					return strings.Replace(js, `{"format":"pt"}`, `{"format":"pt","step":1000}`, 1)
				})
			},
			want: []string{"__metadata__ must be an object of strings"}},
		{name: "header over 100 MB",
			raw: func(v []byte) []byte {
				b := slices.Clone(v)
				binary.LittleEndian.PutUint64(b, 100<<20+1)
				return b
			},
			want: []string{"header of 104857601 bytes exceeds", "100 MB"}},
		{name: "header not JSON",
			raw: func(v []byte) []byte {
				b := binary.LittleEndian.AppendUint64(nil, 4)
				return append(b, "{{{{"...)
			},
			want: []string{"header is not a JSON object"}},
		{name: "NaN weight",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				binary.LittleEndian.PutUint32(d[entry(es, "wpe.weight").Offset[0]+8:], math.Float32bits(float32(math.NaN())))
				return es, d
			},
			want: []string{`"wpe.weight"`, "non-finite value (NaN) at flat index 2"}},
		{name: "infinite weight",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				binary.LittleEndian.PutUint32(d[entry(es, "h.1.mlp.c_fc.weight").Offset[0]:], math.Float32bits(float32(math.Inf(-1))))
				return es, d
			},
			want: []string{`"h.1.mlp.c_fc.weight"`, "non-finite value (-Inf) at flat index 0"}},
		{name: "unknown tensor",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				es = append(es, rawEntry{"score.weight", "F32", []int64{1}, [2]int64{int64(len(d)), int64(len(d)) + 4}})
				return es, append(d, 0, 0, 0, 0)
			},
			want: []string{`unexpected tensor "score.weight"`, "GPT2LMHeadModel with this config.json (2 layers)"}},
		{name: "layer past n_layer",
			// Named as the file stores it, prefix and all.
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				es = append(es, rawEntry{"transformer.h.2.ln_1.weight", "F32", []int64{4}, [2]int64{int64(len(d)), int64(len(d)) + 16}})
				return es, append(d, make([]byte, 16)...)
			},
			want: []string{`unexpected tensor "transformer.h.2.ln_1.weight"`, "do not match"}},
		{name: "a tensor with and without the prefix",
			// Both keys name ln_f.bias: only one would be used.
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				es = append(es, rawEntry{"transformer.ln_f.bias", "F32", []int64{4}, [2]int64{int64(len(d)), int64(len(d)) + 16}})
				return es, append(d, make([]byte, 16)...)
			},
			want: []string{`tensor "ln_f.bias" is stored twice`, `"ln_f.bias" and "transformer.ln_f.bias"`}},
		{name: "bad data_offsets",
			raw: func(v []byte) []byte {
				js := `{"wte.weight":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`
				b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
				return append(append(b, js...), 0, 0, 0, 0)
			},
			want: []string{`"wte.weight"`, "data_offsets must have 2 entries"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeConfig(t, dir, m.Config)
			path := filepath.Join(dir, "model.safetensors")
			es, data := modelEntries(m, "")
			if tc.edit != nil {
				es, data = tc.edit(es, data)
			}
			writeRaw(t, path, es, data)
			if tc.raw != nil {
				valid, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, tc.raw(valid), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load(dir)
			if err == nil {
				got.Close()
				t.Fatal("Load succeeded on a broken checkpoint")
			}
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Errorf("error %q does not match ErrBadCheckpoint", err)
			}
			for _, s := range append(tc.want, path) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestLoadErrorIsStable: a file with many faults (every tensor's offsets
// past the end of a truncated file) names the same tensor on every load.
func TestLoadErrorIsStable(t *testing.T) {
	m := smallModel(t)
	dir := t.TempDir()
	writeConfig(t, dir, m.Config)
	es, data := modelEntries(m, "")
	writeRaw(t, filepath.Join(dir, "model.safetensors"), es, data[:8])
	var first string
	for range 8 {
		_, err := Load(dir)
		if err == nil {
			t.Fatal("Load succeeded on a truncated file")
		}
		if first == "" {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("errors differ between loads:\n%s\n%s", first, err)
		}
	}
}

// TestLoadErrorNamesFirstTensorByName: with faults in several tensors of
// different kinds, the error names the first of them in name order, as
// docs/gpt2.md promises, not the first in the model's own order (wte before
// h.0). The untied lm_head.weight takes its place in that order too.
func TestLoadErrorNamesFirstTensorByName(t *testing.T) {
	m := smallModel(t)
	tests := []struct {
		name  string
		edit  func(c *Config, es []rawEntry) []rawEntry
		want  string
		other string
	}{
		{name: "missing after a wrong shape",
			edit: func(_ *Config, es []rawEntry) []rawEntry {
				entry(es, "h.1.ln_2.bias").Shape = []int64{2, 2}
				return slices.DeleteFunc(es, func(e rawEntry) bool { return e.Name == "wte.weight" })
			},
			want: `tensor "h.1.ln_2.bias" has shape [2 2]`, other: "wte.weight"},
		{name: "unsupported dtype after a wrong shape",
			edit: func(_ *Config, es []rawEntry) []rawEntry {
				entry(es, "wpe.weight").DType = "I32"
				entry(es, "h.0.ln_1.bias").Shape = []int64{2, 2}
				return es
			},
			want: `tensor "h.0.ln_1.bias" has shape [2 2]`, other: "wpe.weight"},
		{name: "untied head missing before ln_f",
			edit: func(c *Config, es []rawEntry) []rawEntry {
				c.TiedEmbeddings = false
				entry(es, "ln_f.weight").Shape = []int64{2, 2}
				return es
			},
			want: `missing tensor "lm_head.weight"`, other: "ln_f.weight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := m.Config
			es, data := modelEntries(m, "")
			es = tc.edit(&c, es)
			writeConfig(t, dir, c)
			writeRaw(t, filepath.Join(dir, "model.safetensors"), es, data)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded on a broken checkpoint")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.other) {
				t.Errorf("error %q: want it to name %q, not %q", err, tc.want, tc.other)
			}
		})
	}
}

// TestLoadFolderErrors covers problems with the folder rather than a file.
func TestLoadFolderErrors(t *testing.T) {
	m := smallModel(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"no config", func(t *testing.T, dir string) {}, []string{"bad checkpoint", "no config.json"}},
		{"no folder", func(t *testing.T, dir string) { os.Remove(dir) }, []string{"no such file"}},
		{"bad config", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"gpt2","vocab_size":10,"n_positions":8,"n_embd":6,"n_layer":1,"n_head":4}`), 0o644)
		}, []string{"config.json", "not a multiple of n_head"}},
		{"no weights", func(t *testing.T, dir string) { writeConfig(t, dir, m.Config) },
			[]string{"no weights", "model.safetensors.index.json", "pytorch_model.bin.index.json"}},
		{"pytorch_model.bin not a checkpoint", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("x"), 0o644)
		}, []string{"pytorch_model.bin", "not a PyTorch checkpoint"}},
		{"pytorch shard missing", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.WriteFile(filepath.Join(dir, "pytorch_model.bin.index.json"), []byte(`{"weight_map":{"wte.weight":"pytorch_model-00001-of-00002.bin"}}`), 0o644)
		}, []string{"pytorch_model-00001-of-00002.bin", "no such file"}},
		{"shard missing", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"wte.weight":"model-00001-of-00002.safetensors"}}`), 0o644)
		}, []string{"model-00001-of-00002.safetensors"}},
		{"shard outside folder", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"wte.weight":"../x.safetensors"}}`), 0o644)
		}, []string{"model.safetensors.index.json", "not a file name"}},
		{"shard is the folder", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"wte.weight":"/"}}`), 0o644)
		}, []string{"model.safetensors.index.json", `shard "/" is not a file name`}},
		{"shard is a folder", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.Mkdir(filepath.Join(dir, "a.safetensors"), 0o755)
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"wte.weight":"a.safetensors"}}`), 0o644)
		}, []string{"a.safetensors", "is a folder"}},
		{"model.safetensors is a folder", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.Mkdir(filepath.Join(dir, "model.safetensors"), 0o755)
		}, []string{"model.safetensors is a folder"}},
		{"tensor missing from index", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			es, data := modelEntries(m, "")
			writeRaw(t, filepath.Join(dir, "a.safetensors"), es, data)
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"wte.weight":"a.safetensors"}}`), 0o644)
		}, []string{"model.safetensors.index.json", `missing tensor "h.0.attn.c_attn.bias"`}},
		{"index is a folder", func(t *testing.T, dir string) {
			writeConfig(t, dir, m.Config)
			os.Mkdir(filepath.Join(dir, "model.safetensors.index.json"), 0o755)
		}, []string{"model.safetensors.index.json is a folder"}},
		{"config.json is a folder", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "config.json"), 0o755)
		}, []string{"config.json is a folder"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			got, err := Load(dir)
			if err == nil {
				got.Close()
				t.Fatal("Load succeeded")
			}
			if tc.name != "no folder" && !errors.Is(err, ErrBadCheckpoint) {
				t.Errorf("error %q does not match ErrBadCheckpoint", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestLoadVariants checks that the checkpoint layouts Hugging Face produces
// all load to the same weights: prefixed keys with legacy buffers, shards,
// float16 and bfloat16, and an untied lm_head. Load keeps each tensor in its
// stored type: a float16 or bfloat16 file gives F16 or BF16 tensors holding
// the originals rounded as the writer rounded them, not float32 copies.
func TestLoadVariants(t *testing.T) {
	m := smallModel(t)
	untied := smallModel(t)
	untied.Config.TiedEmbeddings = false
	head := make([]float32, untied.Weights.Embed.Len())
	for i := range head {
		head[i] = float32(i%7) * 0.125
	}
	untied.Weights.LMHead = tensor.FromFloat32(head, slices.Clone(untied.Weights.Embed.Shape)...)
	tests := []struct {
		name  string
		model *Model
		write func(t *testing.T, dir string, m *Model)
		dtype tensor.DType // the type every loaded tensor must have
		// want, when set, is the stored type the expected weights are
		// rounded to (the originals otherwise).
		want tensor.DType
	}{
		{"WriteCheckpoint", m, func(t *testing.T, dir string, m *Model) {
			if err := m.WriteCheckpoint(dir, ""); err != nil {
				t.Fatal(err)
			}
		}, tensor.F32, ""},
		{"transformer prefix and attn buffers", m, func(t *testing.T, dir string, m *Model) {
			writeConfig(t, dir, m.Config)
			es, data := modelEntries(m, "transformer.")
			for l := range m.Config.Layers {
				mask := make([]byte, 64) // bool [1,1,8,8]
				es = append(es, rawEntry{fmt.Sprintf("transformer.h.%d.attn.bias", l), "BOOL", []int64{1, 1, 8, 8}, [2]int64{int64(len(data)), int64(len(data) + 64)}})
				data = append(data, mask...)
				es = append(es, rawEntry{fmt.Sprintf("transformer.h.%d.attn.masked_bias", l), "F32", []int64{}, [2]int64{int64(len(data)), int64(len(data) + 4)}})
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-1e4))
			}
			writeRaw(t, filepath.Join(dir, "model.safetensors"), es, data)
		}, tensor.F32, ""},
		{"sharded", m, func(t *testing.T, dir string, m *Model) {
			writeConfig(t, dir, m.Config)
			w := m.Weights
			var a, b []checkpoint.Named
			idx := map[string]string{}
			for i, p := range params(&m.Config, &w) {
				nt := checkpoint.Named{Name: "transformer." + p.name, DType: tensor.F32, Tensor: *p.dst}
				file := "model-00001-of-00002.safetensors"
				if i%2 == 1 {
					file = "model-00002-of-00002.safetensors"
					b = append(b, nt)
				} else {
					a = append(a, nt)
				}
				idx[nt.Name] = file
			}
			if err := checkpoint.WriteSafetensors(filepath.Join(dir, "model-00001-of-00002.safetensors"), a); err != nil {
				t.Fatal(err)
			}
			if err := checkpoint.WriteSafetensors(filepath.Join(dir, "model-00002-of-00002.safetensors"), b); err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(map[string]any{"metadata": map[string]int{"total_size": 1}, "weight_map": idx})
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), js, 0o644)
		}, tensor.F32, ""},
		{"float16", m, writeDType(tensor.F16), tensor.F16, tensor.F16},
		{"bfloat16", m, writeDType(tensor.BF16), tensor.BF16, tensor.BF16},
		{"untied lm_head", untied, func(t *testing.T, dir string, m *Model) {
			if err := m.WriteCheckpoint(dir, ""); err != nil {
				t.Fatal(err)
			}
		}, tensor.F32, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt")
			os.MkdirAll(dir, 0o755)
			tc.write(t, dir, tc.model)
			got, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			want := tc.model
			if tc.want != "" {
				want = convertModel(want, tc.want)
			}
			if got.Name != "ckpt" || got.RandomWeights {
				t.Errorf("Name %q RandomWeights %v, want ckpt false", got.Name, got.RandomWeights)
			}
			if !reflect.DeepEqual(got.Config, tc.model.Config) {
				t.Errorf("config %+v, want %+v", got.Config, tc.model.Config)
			}
			if err := equalWeights(got, want); err != nil {
				t.Error(err)
			}
			if err := checkDTypes(got, tc.dtype); err != nil {
				t.Error(err)
			}
			if err := got.Check(); err != nil {
				t.Error(err)
			}
			tied := got.Weights.TiedHead()
			if tied != (tc.model != untied) {
				t.Errorf("LM head tied = %v", tied)
			}
		})
	}
}

// writeDType writes m's config.json and its tensors stored as dtype, under
// their Hugging Face names, as transformers' save_pretrained would after
// .half() or .bfloat16().
func writeDType(dtype tensor.DType) func(t *testing.T, dir string, m *Model) {
	return func(t *testing.T, dir string, m *Model) {
		writeConfig(t, dir, m.Config)
		w := m.Weights
		var ts []checkpoint.Named
		for _, p := range params(&m.Config, &w) {
			ts = append(ts, checkpoint.Named{Name: p.name, DType: dtype, Tensor: *p.dst})
		}
		if err := checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts); err != nil {
			t.Fatal(err)
		}
	}
}

// convertModel is m with every parameter stored as dtype (rounded to
// nearest even, as the safetensors writer rounds), a tied head still tied.
func convertModel(m *Model, dtype tensor.DType) *Model {
	out := &Model{Name: m.Name, Config: m.Config, Weights: NewWeights(&m.Config)}
	src, dst := params(&m.Config, &m.Weights), params(&out.Config, &out.Weights)
	for i := range src {
		*dst[i].dst = src[i].dst.Convert(dtype)
	}
	if m.Weights.TiedHead() {
		out.Weights.LMHead = out.Weights.Embed
	}
	return out
}

// checkDTypes fails unless every parameter of m is stored as dtype.
func checkDTypes(m *Model, dtype tensor.DType) error {
	for _, p := range params(&m.Config, &m.Weights) {
		if p.dst.DType != dtype {
			return fmt.Errorf("tensor %q is %s, want %s", p.name, p.dst.DType, dtype)
		}
	}
	return nil
}

// equalWeights compares every parameter of a and b by name (params: the LM
// head only when untied), values widened to float32 and compared bit for
// bit, and names the first tensor, and the first index in it, that
// differs. Stored types are not compared: an F16 tensor equals an F32 one
// holding the same values.
func equalWeights(a, b *Model) error {
	for _, m := range []*Model{a, b} {
		if err := sameForm(&m.Config, &m.Weights); err != nil {
			return fmt.Errorf("model %q: %w", m.Name, err)
		}
	}
	pa, pb := params(&a.Config, &a.Weights), params(&b.Config, &b.Weights)
	byName := make(map[string]param, len(pb))
	for _, p := range pb {
		byName[p.name] = p
	}
	for _, p := range pa {
		q, ok := byName[p.name]
		if !ok {
			return fmt.Errorf("tensor %q: in the first model only", p.name)
		}
		delete(byName, p.name)
		x, y := *p.dst, *q.dst
		if x.IsZero() || y.IsZero() {
			if x.IsZero() != y.IsZero() {
				return fmt.Errorf("tensor %q: absent from one model", p.name)
			}
			continue
		}
		if !slices.Equal(x.Shape, y.Shape) {
			return fmt.Errorf("tensor %q: shape %v, other %v", p.name, x.Shape, y.Shape)
		}
		if x.Len() != y.Len() {
			return fmt.Errorf("tensor %q: %d values, other %d", p.name, x.Len(), y.Len())
		}
		xs, ys := x.Float32s(), y.Float32s()
		for i := range xs {
			if math.Float32bits(xs[i]) != math.Float32bits(ys[i]) {
				return fmt.Errorf("tensor %q differs at index %d: %v, other %v", p.name, i, xs[i], ys[i])
			}
		}
	}
	if left := slices.Sorted(maps.Keys(byName)); len(left) > 0 {
		return fmt.Errorf("tensor %q: in the second model only", left[0])
	}
	return nil
}

// TestEqualWeights: the helper the other tests rely on finds a difference
// in any tensor and names it and the index.
func TestEqualWeights(t *testing.T) {
	m := smallModel(t)
	if err := equalWeights(m, m); err != nil {
		t.Fatalf("a model differs from itself: %v", err)
	}
	other := convertModel(m, tensor.F32) // a copy: Convert to its own type is the tensor itself
	ln := other.Weights.Layers[1].MLPNorm.B.Float32s()
	changed := slices.Clone(ln)
	changed[3] += 1
	other.Weights.Layers[1].MLPNorm.B = tensor.FromFloat32(changed, 4)
	err := equalWeights(m, other)
	if err == nil || !strings.Contains(err.Error(), `"h.1.ln_2.bias" differs at index 3`) {
		t.Errorf("equalWeights = %v, want it to name h.1.ln_2.bias at index 3", err)
	}
	untied := convertModel(m, tensor.F32)
	untied.Config.TiedEmbeddings = false
	if err := equalWeights(m, untied); err == nil || !strings.Contains(err.Error(), "lm_head.weight") {
		t.Errorf("tied against untied: %v, want it to name lm_head.weight", err)
	}
}

// mappedFile is the file whose memory mapping holds the n bytes at p,
// read from /proc/self/maps, or "" when they lie in no file mapping
// (the Go heap, say).
func mappedFile(t *testing.T, p unsafe.Pointer, n int) string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr := uint64(uintptr(p))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok || len(fields) < 6 {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || addr < start || addr+uint64(n) > end {
			continue
		}
		return strings.Join(fields[5:], " ")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ""
}

// checkAliases fails the test unless every parameter of m lies in the
// memory mapping of file (Linux only: elsewhere it says nothing).
func checkAliases(t *testing.T, m *Model, file string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	file, err := filepath.Abs(file)
	if err == nil {
		file, err = filepath.EvalSymlinks(file)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range params(&m.Config, &m.Weights) {
		raw := p.dst.Raw()
		if got := mappedFile(t, unsafe.Pointer(unsafe.SliceData(raw)), len(raw)); got != file {
			t.Errorf("tensor %q (%s) is not in the mapping of %s but in %q: copied at load", p.name, p.dst.DType, file, got)
		}
		if i == 0 {
			// The check itself: a copy on the heap is not in the mapping.
			cp := slices.Clone(raw)
			if got := mappedFile(t, unsafe.Pointer(unsafe.SliceData(cp)), len(cp)); got == file {
				t.Fatalf("a heap copy of %q is reported as in the mapping of %s", p.name, file)
			}
		}
	}
}

// TestLoadDotIsTheFolderName checks that a checkpoint loaded as "." or
// "../gpt2-tiny/." is named after its folder, as the docs say the id is the
// checkpoint folder's name, not "." or "..".
func TestLoadDotIsTheFolderName(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join(fixtures, "gpt2-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, p := range []string{".", "./", "../gpt2-tiny/."} {
		m, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Info().ID; got != "gpt2-tiny" {
			t.Errorf("Load(%q): id %q, want gpt2-tiny", p, got)
		}
		m.Close()
	}
}

// TestLoadFixtureMapsInPlace checks that float32 tensors alias the memory
// mapping (no copy) where the platform maps files, and that the head is
// tied to wte.
func TestLoadFixtureMapsInPlace(t *testing.T) {
	dir := filepath.Join(fixtures, "gpt2-tiny")
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Weights.TiedHead() {
		t.Error("lm head is not tied to wte")
	}
	if err := checkDTypes(m, tensor.F32); err != nil {
		t.Error(err)
	}
	checkAliases(t, m, filepath.Join(dir, "model.safetensors"))
	if got := m.NumParams(); got != 3382080 {
		t.Errorf("NumParams %d, want 3382080 (README)", got)
	}
	info := m.Info()
	if info.ID != "gpt2-tiny" || info.MaxModelLen != 1024 || info.VocabSize != 50257 || info.EOSTokenID != 50256 || info.RandomWeights {
		t.Errorf("Info %+v", info)
	}
}

// TestLoadBF16MapsInPlace: a bfloat16 checkpoint loads as BF16 tensors over
// the mapped file itself (not widened to float32, not copied), in both
// the Llama family's layout and GPT-2's.
func TestLoadBF16MapsInPlace(t *testing.T) {
	dir := filepath.Join(fixtures, "qwen3-tiny")
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := checkDTypes(m, tensor.BF16); err != nil {
		t.Error(err)
	}
	checkAliases(t, m, filepath.Join(dir, "model.safetensors"))
	if b := m.Weights.Embed.Bits(); len(b) != m.Config.VocabSize*m.Config.Hidden {
		t.Errorf("embedding holds %d bfloat16 values, want %d", len(b), m.Config.VocabSize*m.Config.Hidden)
	}
	if m.WeightBytes() != 2*m.NumParams() {
		t.Errorf("WeightBytes %d for %d bfloat16 parameters", m.WeightBytes(), m.NumParams())
	}

	small := t.TempDir()
	writeDType(tensor.BF16)(t, small, smallModel(t))
	g, err := Load(small)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := checkDTypes(g, tensor.BF16); err != nil {
		t.Error(err)
	}
	checkAliases(t, g, filepath.Join(small, "model.safetensors"))
}

// TestLoadLlamaFamily: the Llama, Qwen2 and Qwen3 fixtures load with every
// parameter their config implies, in its shape and stored type, the
// projections of the form NewWeights gives, and nothing else.
func TestLoadLlamaFamily(t *testing.T) {
	for _, name := range []string{"llama-tiny", "qwen2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(fixtures, name)
			m, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			c := &m.Config
			files, err := checkpoint.Open(dir, LoadAuto)
			if err != nil {
				t.Fatal(err)
			}
			defer files.Close()
			ps := params(c, &m.Weights)
			var names []string
			for _, p := range ps {
				names = append(names, p.name)
				if p.dst.IsZero() {
					t.Errorf("tensor %q not loaded", p.name)
					continue
				}
				if !slices.Equal(p.dst.Shape, p.shape) || !slices.Equal(files.Shape(p.name), p.shape) {
					t.Errorf("tensor %q: shape %v, file %v, want %v", p.name, p.dst.Shape, files.Shape(p.name), p.shape)
				}
				if p.dst.DType != tensor.BF16 {
					t.Errorf("tensor %q is %s, the file's is BF16", p.name, p.dst.DType)
				}
			}
			slices.Sort(names)
			if fn := files.Names(); !slices.Equal(names, fn) {
				t.Errorf("parameters %q\nfile holds %q", names, fn)
			}
			if !m.Weights.TiedHead() {
				t.Error("tie_word_embeddings true, but the head is not the embedding")
			}
			Q, KV, H, I := c.QDim(), c.KVDim(), c.Hidden, c.Intermediate
			for i, l := range m.Weights.Layers {
				for j, want := range []int{Q, KV, KV} {
					p := l.QKV[j]
					if p.In != H || p.Out != want || p.InMajor || !slices.Equal(p.W.Shape, []int64{int64(want), int64(H)}) {
						t.Errorf("layer %d: projection %d of q, k, v: in %d out %d in-major %v shape %v", i, j, p.In, p.Out, p.InMajor, p.W.Shape)
					}
					if p.B.IsZero() == c.QKVBias {
						t.Errorf("layer %d: projection %d of q, k, v: bias %v, config %v", i, j, !p.B.IsZero(), c.QKVBias)
					}
				}
				if l.O.In != Q || l.O.Out != H || !slices.Equal(l.O.W.Shape, []int64{int64(H), int64(Q)}) || !l.O.B.IsZero() {
					t.Errorf("layer %d: o_proj in %d out %d shape %v bias %v", i, l.O.In, l.O.Out, l.O.W.Shape, !l.O.B.IsZero())
				}
				if (!l.QNorm.IsZero() || !l.KNorm.IsZero()) != c.QKNorm {
					t.Errorf("layer %d: q/k norms %v, %v; config QKNorm %v", i, !l.QNorm.IsZero(), !l.KNorm.IsZero(), c.QKNorm)
				}
				if c.QKNorm && (!slices.Equal(l.QNorm.Shape, []int64{int64(c.HeadDim)}) || !slices.Equal(l.KNorm.Shape, []int64{int64(c.HeadDim)})) {
					t.Errorf("layer %d: q/k norm shapes %v, %v, want [%d]", i, l.QNorm.Shape, l.KNorm.Shape, c.HeadDim)
				}
				for j, p := range l.Up {
					if p.In != H || p.Out != I || !slices.Equal(p.W.Shape, []int64{int64(I), int64(H)}) {
						t.Errorf("layer %d: MLP input %d: in %d out %d shape %v", i, j, p.In, p.Out, p.W.Shape)
					}
				}
				if l.Down.In != I || l.Down.Out != H || !slices.Equal(l.Down.W.Shape, []int64{int64(H), int64(I)}) {
					t.Errorf("layer %d: down_proj in %d out %d shape %v", i, l.Down.In, l.Down.Out, l.Down.W.Shape)
				}
				if !l.AttnNorm.B.IsZero() || !l.MLPNorm.B.IsZero() {
					t.Errorf("layer %d: an RMSNorm with a bias", i)
				}
			}
			if !m.Weights.Positions.IsZero() || !m.Weights.FinalNorm.B.IsZero() {
				t.Error("learned positions or a final norm bias in a rotary RMSNorm model")
			}
		})
	}
}

// smallQwen is a Qwen-shaped config small enough to write in every test:
// Qwen2's q/k/v biases and tied head, or Qwen3's per-head q/k norms,
// head_dim apart from hidden/heads (4 heads of 8 on a width of 16) and an
// untied head; grouped-query attention in both.
func smallQwen(arch Arch) Config {
	c := Config{
		Arch: arch, VocabSize: 64, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 4, Intermediate: 24, MaxPositions: 32,
		Norm: RMSNorm, NormEps: 1e-6, Rotary: true, RopeTheta: 1e6, MLP: MLPGated, Activation: SiLU,
		BOSTokenID: -1, EOSTokenIDs: []int{62, 63}, TorchDType: "bfloat16",
	}
	switch arch {
	case ArchQwen2:
		c.Architecture, c.QKVBias, c.TiedEmbeddings = "Qwen2ForCausalLM", true, true
	case ArchQwen3:
		c.Architecture, c.QKNorm, c.HeadDim = "Qwen3ForCausalLM", true, 8
	}
	c.AttnScale = 1 / math.Sqrt(float64(c.HeadDim))
	return c
}

func smallQwenModel(t testing.TB, arch Arch) *Model {
	t.Helper()
	m, err := NewRandom("small-"+string(arch), smallQwen(arch), RandomOptions{Seed: 11, Std: 0.5, DType: tensor.BF16})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeTensors writes m's config.json and a model.safetensors holding its
// parameters in their own types, as edit leaves the list.
func writeTensors(t testing.TB, dir string, m *Model, edit func([]checkpoint.Named) []checkpoint.Named) {
	t.Helper()
	writeConfig(t, dir, m.Config)
	var ts []checkpoint.Named
	for _, p := range params(&m.Config, &m.Weights) {
		ts = append(ts, checkpoint.Named{Name: p.name, Tensor: *p.dst})
	}
	if edit != nil {
		ts = edit(ts)
	}
	if err := checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts); err != nil {
		t.Fatal(err)
	}
}

// TestLoadLlamaFamilyErrors: a Llama-family checkpoint that lacks a
// parameter its config implies, or holds one it does not, is refused with
// an error naming the tensor; the rotary inverse-frequency buffers older
// checkpoints carry are skipped.
func TestLoadLlamaFamilyErrors(t *testing.T) {
	m := smallQwenModel(t, ArchQwen3)
	extra := func(name string, n int) func([]checkpoint.Named) []checkpoint.Named {
		return func(ts []checkpoint.Named) []checkpoint.Named {
			return append(ts, checkpoint.Named{Name: name, Tensor: tensor.FromFloat32(make([]float32, n), int64(n))})
		}
	}
	tests := []struct {
		name string
		edit func([]checkpoint.Named) []checkpoint.Named
		want []string
	}{
		{"missing q_norm", func(ts []checkpoint.Named) []checkpoint.Named {
			return slices.DeleteFunc(ts, func(n checkpoint.Named) bool { return n.Name == "model.layers.1.self_attn.q_norm.weight" })
		}, []string{`missing tensor "model.layers.1.self_attn.q_norm.weight"`}},
		{"missing lm_head", func(ts []checkpoint.Named) []checkpoint.Named {
			return slices.DeleteFunc(ts, func(n checkpoint.Named) bool { return n.Name == "lm_head.weight" })
		}, []string{`missing tensor "lm_head.weight"`, "tie_word_embeddings false"}},
		{"layer past num_hidden_layers", extra("model.layers.2.input_layernorm.weight", 16),
			[]string{`unexpected tensor "model.layers.2.input_layernorm.weight"`, "Qwen3ForCausalLM with this config.json (2 layers)", "do not match"}},
		{"bias the config does not have", extra("model.layers.0.self_attn.o_proj.bias", 16),
			[]string{`unexpected tensor "model.layers.0.self_attn.o_proj.bias"`}},
		{"GPT-2's attention buffer", extra("model.layers.0.attn.bias", 16),
			[]string{`unexpected tensor "model.layers.0.attn.bias"`}},
		{"wrong shape", func(ts []checkpoint.Named) []checkpoint.Named {
			for i := range ts {
				if ts[i].Name == "model.layers.0.self_attn.k_proj.weight" {
					ts[i].Tensor = tensor.FromBits(tensor.BF16, ts[i].Tensor.Bits(), 8, 32) // 16 rows of 16 as 8 of 32
				}
			}
			return ts
		}, []string{`tensor "model.layers.0.self_attn.k_proj.weight" has shape [8 32], want [16 16]`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTensors(t, dir, m, tc.edit)
			got, err := Load(dir)
			if err == nil {
				got.Close()
				t.Fatal("Load succeeded on a broken checkpoint")
			}
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Errorf("error %q does not match ErrBadCheckpoint", err)
			}
			for _, s := range append(tc.want, filepath.Join(dir, "model.safetensors")) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}

	t.Run("rotary_emb.inv_freq ignored", func(t *testing.T) {
		dir := t.TempDir()
		writeTensors(t, dir, m, func(ts []checkpoint.Named) []checkpoint.Named {
			ts = extra("model.layers.0.self_attn.rotary_emb.inv_freq", 4)(ts)
			ts = extra("model.layers.1.self_attn.rotary_emb.inv_freq", 4)(ts)
			return extra("model.rotary_emb.inv_freq", 4)(ts)
		})
		got, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if err := equalWeights(got, m); err != nil {
			t.Error(err)
		}
	})
}

// TestWriteCheckpointRoundTrip: a Qwen-shaped model written as a bfloat16
// checkpoint loads back exactly: the same config (torch_dtype bfloat16) and
// the same bits in every tensor, stored BF16, the head tied as before.
func TestWriteCheckpointRoundTrip(t *testing.T) {
	for _, arch := range []Arch{ArchQwen2, ArchQwen3} {
		t.Run(string(arch), func(t *testing.T) {
			m := smallQwenModel(t, arch)
			dir := t.TempDir()
			if err := m.WriteCheckpoint(dir, tensor.BF16); err != nil {
				t.Fatal(err)
			}
			got, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if !reflect.DeepEqual(got.Config, m.Config) {
				t.Errorf("config\n got %+v\nwant %+v", got.Config, m.Config)
			}
			if err := equalWeights(got, m); err != nil {
				t.Error(err)
			}
			if err := checkDTypes(got, tensor.BF16); err != nil {
				t.Error(err)
			}
			for _, p := range params(&got.Config, &got.Weights) {
				var want []uint16
				for _, q := range params(&m.Config, &m.Weights) {
					if q.name == p.name {
						want = q.dst.Bits()
					}
				}
				if !slices.Equal(p.dst.Bits(), want) {
					t.Errorf("tensor %q: bits differ", p.name)
				}
			}
			if got.Weights.TiedHead() != m.Config.TiedEmbeddings {
				t.Errorf("head tied %v, config %v", got.Weights.TiedHead(), m.Config.TiedEmbeddings)
			}
			if err := got.Check(); err != nil {
				t.Error(err)
			}
		})
	}
	// Written as float32, a bfloat16 model's values come back unchanged
	// in float32 tensors (widening is exact), and config.json says so.
	m := smallQwenModel(t, ArchQwen3)
	dir := t.TempDir()
	if err := m.WriteCheckpoint(dir, tensor.F32); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if err := equalWeights(got, m); err != nil {
		t.Error(err)
	}
	if err := checkDTypes(got, tensor.F32); err != nil {
		t.Error(err)
	}
	if got.Config.TorchDType != "float32" {
		t.Errorf("torch_dtype %q, want float32", got.Config.TorchDType)
	}
}

func TestFloat16(t *testing.T) {
	tests := []struct {
		bits uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08},
		{0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05}, {0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	}
	for _, tc := range tests {
		if got := tensor.F16ToF32(tc.bits); got != tc.want {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", tc.bits, got, tc.want)
		}
		if got := tensor.F32ToF16(tc.want); got != tc.bits {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tc.want, got, tc.bits)
		}
	}
	if v := tensor.F16ToF32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("0x7e00 = %v, want NaN", v)
	}
	// Every half value survives a round trip through float32.
	for h := range uint32(1 << 16) {
		f := tensor.F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := tensor.F32ToF16(f); back != uint16(h) {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, back)
		}
	}
	// Ties round to even: 1 + 2^-11 is halfway between 1 and 1+2^-10.
	if got := tensor.F32ToF16(1 + 1.0/2048); got != 0x3c00 {
		t.Errorf("tie rounds to %#04x, want 0x3c00", got)
	}
	if got := tensor.F32ToBF16(1 + 1.0/256); got != 0x3f80 {
		t.Errorf("bfloat16 tie rounds to %#04x, want 0x3f80", got)
	}
}

// TestLMHeadFollowsTieWordEmbeddings: config.json's tie_word_embeddings
// decides the output layer, as in transformers and vLLM. A checkpoint with
// an untied head says so in its config; a tied config ignores an
// lm_head.weight; an untied config without one is an error naming it.
func TestLMHeadFollowsTieWordEmbeddings(t *testing.T) {
	untied := smallModel(t)
	head := make([]float32, untied.Weights.Embed.Len())
	for i := range head {
		head[i] = float32(i%5) * 0.25
	}
	untied.Weights.LMHead = tensor.FromFloat32(head, slices.Clone(untied.Weights.Embed.Shape)...)
	dir := t.TempDir()
	if err := untied.WriteCheckpoint(dir, ""); err != nil {
		t.Fatal(err)
	}
	setTie := func(dir string, tie bool) {
		t.Helper()
		path := filepath.Join(dir, "config.json")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["tie_word_embeddings"] != !tie {
			t.Fatalf("config.json has tie_word_embeddings %v before the edit", m["tie_word_embeddings"])
		}
		m["tie_word_embeddings"] = tie
		b, _ = json.Marshal(m)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	isHead := slices.Equal(got.Weights.LMHead.Float32s(), head)
	if got.Config.TiedEmbeddings || got.Weights.TiedHead() || !isHead {
		t.Errorf("untied checkpoint: TiedEmbeddings %v, head is its lm_head.weight %v", got.Config.TiedEmbeddings, isHead)
	}
	got.Close()

	setTie(dir, true) // tied: transformers' tie_weights replaces lm_head with wte
	got, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Config.TiedEmbeddings || !got.Weights.TiedHead() {
		t.Errorf("tied config: TiedEmbeddings %v, head tied %v", got.Config.TiedEmbeddings, got.Weights.TiedHead())
	}
	got.Close()

	tiedDir := t.TempDir()
	if err := smallModel(t).WriteCheckpoint(tiedDir, ""); err != nil {
		t.Fatal(err)
	}
	setTie(tiedDir, false)
	_, err = Load(tiedDir)
	if !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("untied config without lm_head.weight: %v, want ErrBadCheckpoint", err)
	}
	for _, want := range []string{`missing tensor "lm_head.weight"`, "tie_word_embeddings false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
