package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// tinyQwen2 is a Qwen2 of the real vocabulary (151936 rows) and a tiny
// body, random bfloat16 weights: the shape of testdata/qwen2-tiny.
func tinyQwen2(t *testing.T, tied bool) *model.Model {
	t.Helper()
	cfg, err := model.BuiltinConfig(model.BuiltinQwen05B)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Hidden, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.Intermediate = 32, 2, 2, 1, 16, 64
	cfg.AttnScale = 0.25
	cfg.TiedEmbeddings = tied
	m, err := model.NewRandom("qwen2-test", cfg, model.RandomOptions{Seed: 7, Std: 0.05, DType: tensor.BF16})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeAndParse(t *testing.T, m *model.Model, opts convertOptions) *readFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := writeFile(m, path, opts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseGGUF(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestWriteQwen2(t *testing.T) {
	m := tinyQwen2(t, true)
	c := m.Config
	f := writeAndParse(t, m, convertOptions{})
	if f.version != 3 || f.keys[0] != "general.architecture" {
		t.Errorf("version %d, first key %q", f.version, f.keys[0])
	}

	// Metadata: types and values.
	wantScalars := map[string]struct {
		typ uint32
		val any
	}{
		"general.architecture":                   {typeString, "qwen2"},
		"general.alignment":                      {typeUint32, uint32(32)},
		"general.file_type":                      {typeUint32, uint32(32)}, // LLAMA_FTYPE_MOSTLY_BF16
		"qwen2.context_length":                   {typeUint32, uint32(32768)},
		"qwen2.embedding_length":                 {typeUint32, uint32(32)},
		"qwen2.feed_forward_length":              {typeUint32, uint32(64)},
		"qwen2.block_count":                      {typeUint32, uint32(2)},
		"qwen2.attention.head_count":             {typeUint32, uint32(2)},
		"qwen2.attention.head_count_kv":          {typeUint32, uint32(1)},
		"qwen2.rope.freq_base":                   {typeFloat32, float32(1e6)},
		"qwen2.attention.layer_norm_rms_epsilon": {typeFloat32, float32(1e-6)},
		"tokenizer.ggml.model":                   {typeString, "gpt2"},
		"tokenizer.ggml.pre":                     {typeString, "qwen2"},
		"tokenizer.ggml.bos_token_id":            {typeUint32, uint32(151643)},
		"tokenizer.ggml.eos_token_id":            {typeUint32, uint32(151645)},
		"tokenizer.ggml.padding_token_id":        {typeUint32, uint32(151643)},
		"tokenizer.ggml.add_bos_token":           {typeBool, false},
	}
	for k, w := range wantScalars {
		kv, ok := f.kvs[k]
		switch {
		case !ok:
			t.Errorf("missing key %q", k)
		case kv.typ != w.typ || kv.val != w.val:
			t.Errorf("%s = (type %d) %v, want (type %d) %v", k, kv.typ, kv.val, w.typ, w.val)
		}
	}

	// The vocabulary: the tokenizer's spellings, padded to the model's rows.
	toks, _ := f.kvs["tokenizer.ggml.tokens"].val.([]string)
	types, _ := f.kvs["tokenizer.ggml.token_type"].val.([]int32)
	merges, _ := f.kvs["tokenizer.ggml.merges"].val.([]string)
	if len(toks) != c.VocabSize || len(types) != c.VocabSize {
		t.Fatalf("%d tokens and %d types, want %d", len(toks), len(types), c.VocabSize)
	}
	if len(merges) != 151387 { // Qwen2.5's merges.txt: 151643 ranks - 256 bytes
		t.Errorf("%d merges, want 151387", len(merges))
	}
	for id, want := range map[int]struct {
		tok string
		typ int32
	}{
		0: {"!", tokenNormal}, 220: {"Ġ", tokenNormal}, 198: {"Ċ", tokenNormal}, 151642: {"â½Ĺ", tokenNormal},
		151643: {"<|endoftext|>", tokenControl}, 151644: {"<|im_start|>", tokenControl}, 151645: {"<|im_end|>", tokenControl},
		151659: {"<|fim_prefix|>", tokenControl}, // not special in tokenizer.json, but spelled <|...|>
		151657: {"<tool_call>", tokenUserDefined}, 151667: {"<think>", tokenUserDefined},
		151668: {"</think>", tokenUserDefined}, 151669: {"[PAD151669]", tokenUnused}, 151935: {"[PAD151935]", tokenUnused},
	} {
		if toks[id] != want.tok || types[id] != want.typ {
			t.Errorf("token %d = %q type %d, want %q type %d", id, toks[id], types[id], want.tok, want.typ)
		}
	}
	if s := slices.Clone(toks); len(slices.Compact(sortStrings(s))) != len(toks) {
		t.Errorf("tokens are not distinct")
	}
	tk, err := tokenizer.Qwen()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{0, 1, 100, 198, 220, 1000, 30000, 100000, 151642} {
		raw, ok := tokenizer.ByteLevelDecode(toks[id])
		if got, want := string(raw), tk.Decode([]int{id}, false); !ok || got != want && strings.ToValidUTF8(got, "\uFFFD") != want {
			t.Errorf("token %d %q decodes to %q, the tokenizer says %q", id, toks[id], got, want)
		}
	}

	// Tensors: names, ggml shapes, types; the 16-bit ones hold the
	// checkpoint's bfloat16 bits exactly, the norms and biases float32.
	C, KV, I, V := uint64(32), uint64(16), uint64(64), uint64(c.VocabSize)
	type want struct {
		ne  []uint64
		typ uint32
		src tensor.Tensor
	}
	w := &m.Weights
	wants := map[string]want{
		"token_embd.weight":  {[]uint64{C, V}, ggmlTypeBF16, w.Embed},
		"output_norm.weight": {[]uint64{C}, ggmlTypeF32, w.FinalNorm.W},
	}
	for i := range c.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		for k, v := range map[string]want{
			"attn_norm.weight":   {[]uint64{C}, ggmlTypeF32, l.AttnNorm.W},
			"attn_q.weight":      {[]uint64{C, C}, ggmlTypeBF16, l.QKV[0].W},
			"attn_q.bias":        {[]uint64{C}, ggmlTypeF32, l.QKV[0].B},
			"attn_k.weight":      {[]uint64{C, KV}, ggmlTypeBF16, l.QKV[1].W},
			"attn_k.bias":        {[]uint64{KV}, ggmlTypeF32, l.QKV[1].B},
			"attn_v.weight":      {[]uint64{C, KV}, ggmlTypeBF16, l.QKV[2].W},
			"attn_v.bias":        {[]uint64{KV}, ggmlTypeF32, l.QKV[2].B},
			"attn_output.weight": {[]uint64{C, C}, ggmlTypeBF16, l.O.W},
			"ffn_norm.weight":    {[]uint64{C}, ggmlTypeF32, l.MLPNorm.W},
			"ffn_gate.weight":    {[]uint64{C, I}, ggmlTypeBF16, l.Up[0].W},
			"ffn_up.weight":      {[]uint64{C, I}, ggmlTypeBF16, l.Up[1].W},
			"ffn_down.weight":    {[]uint64{I, C}, ggmlTypeBF16, l.Down.W},
		} {
			wants[p+k] = v
		}
	}
	if len(f.tensors) != len(wants) {
		t.Errorf("%d tensors, want %d (a tied head writes no output.weight)", len(f.tensors), len(wants))
	}
	for _, ti := range f.tensors {
		wt, ok := wants[ti.name]
		if !ok {
			t.Errorf("unexpected tensor %q", ti.name)
			continue
		}
		if !slices.Equal(ti.ne, wt.ne) || ti.typ != wt.typ || ti.offset%32 != 0 {
			t.Errorf("tensor %q: shape %v type %d offset %d; want %v type %d, aligned", ti.name, ti.ne, ti.typ, ti.offset, wt.ne, wt.typ)
			continue
		}
		if wt.typ == ggmlTypeF32 {
			if !slices.Equal(f.floats(&ti), wt.src.Float32s()) {
				t.Errorf("tensor %q differs from the model's", ti.name)
			}
		} else if !slices.Equal(f.bits(&ti), wt.src.Bits()) {
			t.Errorf("tensor %q differs from the model's bfloat16 bits", ti.name)
		}
	}
}

func TestWriteQwen2Types(t *testing.T) {
	m := tinyQwen2(t, false)
	w := &m.Weights
	for _, tc := range []struct {
		typ      tensor.DType
		ggml     uint32
		fileType uint32
	}{{tensor.F16, ggmlTypeF16, 1}, {tensor.F32, ggmlTypeF32, 0}} {
		f := writeAndParse(t, m, convertOptions{Type: tc.typ})
		if got := f.kvs["general.file_type"].val; got != tc.fileType {
			t.Errorf("%s: general.file_type %v, want %d", tc.typ, got, tc.fileType)
		}
		out := f.tensor("output.weight")
		if out == nil {
			t.Fatalf("%s: an untied head has no output.weight", tc.typ)
		}
		for name, src := range map[string]tensor.Tensor{"output.weight": w.LMHead, "blk.1.ffn_down.weight": w.Layers[1].Down.W} {
			ti := f.tensor(name)
			if ti.typ != tc.ggml {
				t.Errorf("%s: %s is of type %d, want %d", tc.typ, name, ti.typ, tc.ggml)
				continue
			}
			if tc.typ == tensor.F32 {
				if !slices.Equal(f.floats(ti), src.Float32s()) {
					t.Errorf("%s: %s differs", tc.typ, name)
				}
			} else if !slices.Equal(f.bits(ti), src.Convert(tensor.F16).Bits()) {
				t.Errorf("%s: %s differs from the weights rounded to float16", tc.typ, name)
			}
		}
		if ti := f.tensor("blk.0.attn_q.bias"); ti.typ != ggmlTypeF32 {
			t.Errorf("%s: a bias is of type %d, want F32", tc.typ, ti.typ)
		}
	}
}

// The merges derived from the ranks are tokenizer.json's own list, in
// order, and the vocabulary is its vocab.
func TestQwenMergesMatchTokenizerJSON(t *testing.T) {
	gz, err := os.ReadFile("../../../llm/tokenizer/builtin/qwen/tokenizer.json.gz")
	if err != nil {
		t.Skip(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Model struct {
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := json.Unmarshal(doc.Model.Merges, &want); err != nil {
		want = nil // pairs, the format of tokenizers >= 0.20
		var pairs [][2]string
		if err := json.Unmarshal(doc.Model.Merges, &pairs); err != nil {
			t.Fatal(err)
		}
		for _, p := range pairs {
			want = append(want, p[0]+" "+p[1])
		}
	}
	v, err := buildQwenVocab(151936)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Merges) != len(want) {
		t.Fatalf("%d merges, tokenizer.json has %d", len(v.Merges), len(want))
	}
	for i := range want {
		if v.Merges[i] != want[i] {
			t.Fatalf("merge %d is %q, tokenizer.json's %q", i, v.Merges[i], want[i])
		}
	}
	for tok, id := range doc.Model.Vocab {
		if v.Tokens[id] != tok {
			t.Fatalf("token %d is %q, tokenizer.json's %q", id, v.Tokens[id], tok)
		}
	}
}

func TestQwen2Refusals(t *testing.T) {
	for name, change := range map[string]func(*model.Config){
		"q/k norm":      func(c *model.Config) { c.QKNorm = true },
		"output bias":   func(c *model.Config) { c.OBias = true },
		"GELU MLP":      func(c *model.Config) { c.Activation = model.GeluTanh },
		"rope scaling":  func(c *model.Config) { c.RopeScaling.Factor = 8 },
		"wide heads":    func(c *model.Config) { c.HeadDim = 32; c.AttnScale = 1 / 5.656854249492381 },
		"no qkv biases": func(c *model.Config) { c.QKVBias = false },
	} {
		m := tinyQwen2(t, true)
		change(&m.Config)
		if err := convert(m, io.Discard, convertOptions{}); err == nil {
			t.Errorf("%s: converted", name)
		}
	}
	if err := convert(tinyQwen2(t, true), io.Discard, convertOptions{Type: "Q8_0"}); err == nil {
		t.Errorf("converted to an unknown type")
	}
}
