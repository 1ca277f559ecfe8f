package gpt2

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// smallConfig is a shape small enough to write and corrupt in every test.
func smallConfig() Config {
	return Config{VocabSize: 11, NPositions: 8, NEmbd: 4, NLayer: 2, NHead: 2,
		LayerNormEpsilon: 1e-5, Activation: GeluTanh, ScaleAttnWeights: true, BOSTokenID: 10, EOSTokenID: 10}
}

func smallModel(t testing.TB) *Model {
	t.Helper()
	m, err := NewRandom("small", smallConfig(), 7, 0.5)
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

// modelEntries lists m's tensors as F32 entries laid out contiguously, with
// the matching data section.
func modelEntries(m *Model, prefix string) ([]rawEntry, []byte) {
	var es []rawEntry
	var data []byte
	w := m.Weights
	for _, s := range specs(m.Config, &w) {
		begin := int64(len(data))
		for _, v := range *s.dst {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		es = append(es, rawEntry{prefix + s.name, "F32", s.shape, [2]int64{begin, int64(len(data))}})
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
	js, err := marshalConfig(c)
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
			want: []string{`unexpected tensor "score.weight"`, "n_layer 2"}},
		{name: "layer past n_layer",
			edit: func(es []rawEntry, d []byte) ([]rawEntry, []byte) {
				es = append(es, rawEntry{"transformer.h.2.ln_1.weight", "F32", []int64{4}, [2]int64{int64(len(d)), int64(len(d)) + 16}})
				return es, append(d, make([]byte, 16)...)
			},
			want: []string{`unexpected tensor "h.2.ln_1.weight"`, "do not match"}},
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
				c.SeparateLMHead = true
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
// float16 and bfloat16, and an untied lm_head.
func TestLoadVariants(t *testing.T) {
	m := smallModel(t)
	untied := smallModel(t)
	untied.Config.SeparateLMHead = true
	untied.Weights.LMHead = make([]float32, len(untied.Weights.WTE))
	for i := range untied.Weights.LMHead {
		untied.Weights.LMHead[i] = float32(i%7) * 0.125
	}
	round := func(conv func(float32) float32) func(Weights) Weights {
		return func(w Weights) Weights { return mapWeights(w, conv) }
	}
	tests := []struct {
		name  string
		model *Model
		write func(t *testing.T, dir string, m *Model)
		want  func(Weights) Weights // expected weights from the originals
	}{
		{"WriteCheckpoint", m, func(t *testing.T, dir string, m *Model) {
			if err := m.WriteCheckpoint(dir); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"transformer prefix and attn buffers", m, func(t *testing.T, dir string, m *Model) {
			writeConfig(t, dir, m.Config)
			es, data := modelEntries(m, "transformer.")
			for l := range m.Config.NLayer {
				mask := make([]byte, 64) // bool [1,1,8,8]
				es = append(es, rawEntry{fmt.Sprintf("transformer.h.%d.attn.bias", l), "BOOL", []int64{1, 1, 8, 8}, [2]int64{int64(len(data)), int64(len(data) + 64)}})
				data = append(data, mask...)
				es = append(es, rawEntry{fmt.Sprintf("transformer.h.%d.attn.masked_bias", l), "F32", []int64{}, [2]int64{int64(len(data)), int64(len(data) + 4)}})
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-1e4))
			}
			writeRaw(t, filepath.Join(dir, "model.safetensors"), es, data)
		}, nil},
		{"sharded", m, func(t *testing.T, dir string, m *Model) {
			writeConfig(t, dir, m.Config)
			w := m.Weights
			var a, b []namedTensor
			idx := map[string]string{}
			for i, s := range specs(m.Config, &w) {
				nt := namedTensor{name: "transformer." + s.name, dtype: "F32", shape: s.shape, data: *s.dst}
				file := "model-00001-of-00002.safetensors"
				if i%2 == 1 {
					file = "model-00002-of-00002.safetensors"
					b = append(b, nt)
				} else {
					a = append(a, nt)
				}
				idx[nt.name] = file
			}
			if err := writeSafetensorsFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), a); err != nil {
				t.Fatal(err)
			}
			if err := writeSafetensorsFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), b); err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(map[string]any{"metadata": map[string]int{"total_size": 1}, "weight_map": idx})
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), js, 0o644)
		}, nil},
		{"float16", m, writeDType("F16"), round(func(v float32) float32 { return float16ToFloat32(float32ToFloat16(v)) })},
		{"bfloat16", m, writeDType("BF16"), round(func(v float32) float32 {
			return math.Float32frombits(uint32(float32ToBFloat16(v)) << 16)
		})},
		{"untied lm_head", untied, func(t *testing.T, dir string, m *Model) {
			if err := m.WriteCheckpoint(dir); err != nil {
				t.Fatal(err)
			}
		}, nil},
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
			want := tc.model.Weights
			if tc.want != nil {
				want = tc.want(want)
			}
			if got.Name != "ckpt" || got.RandomWeights {
				t.Errorf("Name %q RandomWeights %v, want ckpt false", got.Name, got.RandomWeights)
			}
			if got.Config != tc.model.Config {
				t.Errorf("config %+v, want %+v", got.Config, tc.model.Config)
			}
			if err := equalWeights(got.Weights, want); err != nil {
				t.Error(err)
			}
			tied := sameSlice(got.Weights.LMHead, got.Weights.WTE)
			if tied != (tc.model != untied) {
				t.Errorf("LM head tied = %v", tied)
			}
		})
	}
}

func writeDType(dtype string) func(t *testing.T, dir string, m *Model) {
	return func(t *testing.T, dir string, m *Model) {
		writeConfig(t, dir, m.Config)
		w := m.Weights
		var ts []namedTensor
		for _, s := range specs(m.Config, &w) {
			ts = append(ts, namedTensor{name: s.name, dtype: dtype, shape: s.shape, data: *s.dst})
		}
		if err := writeSafetensorsFile(filepath.Join(dir, "model.safetensors"), ts); err != nil {
			t.Fatal(err)
		}
	}
}

func mapWeights(w Weights, f func(float32) float32) Weights {
	conv := func(s []float32) []float32 {
		out := make([]float32, len(s))
		for i, v := range s {
			out[i] = f(v)
		}
		return out
	}
	tied := sameSlice(w.LMHead, w.WTE)
	out := Weights{WTE: conv(w.WTE), WPE: conv(w.WPE), LNFW: conv(w.LNFW), LNFB: conv(w.LNFB)}
	out.LMHead = out.WTE
	if !tied {
		out.LMHead = conv(w.LMHead)
	}
	for _, l := range w.Layers {
		var nl LayerWeights
		src, dst := l.tensors(), nl.tensors()
		for i := range src {
			*dst[i] = conv(*src[i])
		}
		out.Layers = append(out.Layers, nl)
	}
	return out
}

func equalWeights(got, want Weights) error {
	pairs := [][2][]float32{{got.WTE, want.WTE}, {got.WPE, want.WPE}, {got.LNFW, want.LNFW}, {got.LNFB, want.LNFB}, {got.LMHead, want.LMHead}}
	if len(got.Layers) != len(want.Layers) {
		return fmt.Errorf("%d layers, want %d", len(got.Layers), len(want.Layers))
	}
	for i := range got.Layers {
		g, w := got.Layers[i].tensors(), want.Layers[i].tensors()
		for j := range g {
			pairs = append(pairs, [2][]float32{*g[j], *w[j]})
		}
	}
	for i, p := range pairs {
		if !slices.Equal(p[0], p[1]) {
			return fmt.Errorf("tensor %d differs", i)
		}
	}
	return nil
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
	m, err := Load(filepath.Join(fixtures, "gpt2-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !sameSlice(m.Weights.LMHead, m.Weights.WTE) {
		t.Error("lm head is not tied to wte")
	}
	if got := m.NumParams(); got != 3382080 {
		t.Errorf("NumParams %d, want 3382080 (README)", got)
	}
	info := m.Info()
	if info.ID != "gpt2-tiny" || info.MaxModelLen != 1024 || info.VocabSize != 50257 || info.EOSTokenID != 50256 || info.RandomWeights {
		t.Errorf("Info %+v", info)
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
		if got := float16ToFloat32(tc.bits); got != tc.want {
			t.Errorf("float16ToFloat32(%#04x) = %v, want %v", tc.bits, got, tc.want)
		}
		if got := float32ToFloat16(tc.want); got != tc.bits {
			t.Errorf("float32ToFloat16(%v) = %#04x, want %#04x", tc.want, got, tc.bits)
		}
	}
	if v := float16ToFloat32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("0x7e00 = %v, want NaN", v)
	}
	// Every half value survives a round trip through float32.
	for h := range uint32(1 << 16) {
		f := float16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := float32ToFloat16(f); back != uint16(h) {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, back)
		}
	}
	// Ties round to even: 1 + 2^-11 is halfway between 1 and 1+2^-10.
	if got := float32ToFloat16(1 + 1.0/2048); got != 0x3c00 {
		t.Errorf("tie rounds to %#04x, want 0x3c00", got)
	}
	if got := float32ToBFloat16(1 + 1.0/256); got != 0x3f80 {
		t.Errorf("bfloat16 tie rounds to %#04x, want 0x3f80", got)
	}
}

// TestLMHeadFollowsTieWordEmbeddings: config.json's tie_word_embeddings
// decides the output layer, as in transformers and vLLM. A checkpoint with
// an untied head says so in its config; a tied config ignores an
// lm_head.weight; an untied config without one is an error naming it.
func TestLMHeadFollowsTieWordEmbeddings(t *testing.T) {
	untied := smallModel(t)
	untied.Weights.LMHead = make([]float32, len(untied.Weights.WTE))
	for i := range untied.Weights.LMHead {
		untied.Weights.LMHead[i] = float32(i%5) * 0.25
	}
	dir := t.TempDir()
	if err := untied.WriteCheckpoint(dir); err != nil {
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
	if !got.Config.SeparateLMHead || sameSlice(got.Weights.LMHead, got.Weights.WTE) || !slices.Equal(got.Weights.LMHead, untied.Weights.LMHead) {
		t.Errorf("untied checkpoint: SeparateLMHead %v, head is its lm_head.weight %v", got.Config.SeparateLMHead, slices.Equal(got.Weights.LMHead, untied.Weights.LMHead))
	}
	got.Close()

	setTie(dir, true) // tied: transformers' tie_weights replaces lm_head with wte
	got, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.SeparateLMHead || !sameSlice(got.Weights.LMHead, got.Weights.WTE) {
		t.Errorf("tied config: SeparateLMHead %v, head tied %v", got.Config.SeparateLMHead, sameSlice(got.Weights.LMHead, got.Weights.WTE))
	}
	got.Close()

	tiedDir := t.TempDir()
	if err := smallModel(t).WriteCheckpoint(tiedDir); err != nil {
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
