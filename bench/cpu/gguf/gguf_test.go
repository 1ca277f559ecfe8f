package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// A minimal GGUF reader, independent of the writer, for the tests.

type readKV struct {
	typ     uint32
	elemTyp uint32 // for arrays
	val     any    // scalar, string, []string, []int32 or []any
}

type readTensor struct {
	name   string
	ne     []uint64
	typ    uint32
	offset uint64
}

type readFile struct {
	version  uint32
	kvs      map[string]readKV
	keys     []string // in file order
	tensors  []readTensor
	dataBase uint64
	size     uint64
	data     []byte
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+n > len(r.b) {
		r.err = fmt.Errorf("truncated at offset %d (want %d bytes)", r.off, n)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string {
	n := r.u64()
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string length %d too large", n)
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) scalar(t uint32) any {
	switch t {
	case typeUint8:
		return r.u8()
	case typeInt8:
		return int8(r.u8())
	case typeUint16:
		if b := r.take(2); b != nil {
			return binary.LittleEndian.Uint16(b)
		}
	case typeInt16:
		if b := r.take(2); b != nil {
			return int16(binary.LittleEndian.Uint16(b))
		}
	case typeUint32:
		return r.u32()
	case typeInt32:
		return int32(r.u32())
	case typeFloat32:
		return math.Float32frombits(r.u32())
	case typeBool:
		return r.u8() != 0
	case typeString:
		return r.str()
	case typeUint64:
		return r.u64()
	case typeInt64:
		return int64(r.u64())
	case typeFloat64:
		return math.Float64frombits(r.u64())
	default:
		r.err = fmt.Errorf("unknown value type %d", t)
	}
	return nil
}

func parseGGUF(b []byte) (*readFile, error) {
	r := &reader{b: b}
	if string(r.take(4)) != "GGUF" {
		return nil, fmt.Errorf("bad magic")
	}
	f := &readFile{version: r.u32(), kvs: map[string]readKV{}, size: uint64(len(b)), data: b}
	nt, nkv := r.u64(), r.u64()
	for range nkv {
		k := r.str()
		t := r.u32()
		kv := readKV{typ: t}
		if t == typeArray {
			kv.elemTyp = r.u32()
			n := r.u64()
			switch kv.elemTyp {
			case typeString:
				v := make([]string, 0, min(n, 1<<20))
				for range n {
					v = append(v, r.str())
				}
				kv.val = v
			case typeInt32:
				v := make([]int32, 0, min(n, 1<<20))
				for range n {
					v = append(v, int32(r.u32()))
				}
				kv.val = v
			default:
				var v []any
				for range n {
					v = append(v, r.scalar(kv.elemTyp))
				}
				kv.val = v
			}
		} else {
			kv.val = r.scalar(t)
		}
		if r.err != nil {
			return nil, fmt.Errorf("key %q: %w", k, r.err)
		}
		if _, dup := f.kvs[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		f.kvs[k] = kv
		f.keys = append(f.keys, k)
	}
	for range nt {
		var t readTensor
		t.name = r.str()
		nd := r.u32()
		if nd > 4 {
			return nil, fmt.Errorf("tensor %q has %d dimensions", t.name, nd)
		}
		for range nd {
			t.ne = append(t.ne, r.u64())
		}
		t.typ = r.u32()
		t.offset = r.u64()
		f.tensors = append(f.tensors, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	align := uint64(32)
	if kv, ok := f.kvs["general.alignment"]; ok {
		align = uint64(kv.val.(uint32))
	}
	f.dataBase = alignUp(uint64(r.off), align)
	return f, nil
}

func (f *readFile) tensor(name string) *readTensor {
	for i := range f.tensors {
		if f.tensors[i].name == name {
			return &f.tensors[i]
		}
	}
	return nil
}

// elemSize is the bytes of one value of a ggml type this package writes.
func elemSize(typ uint32) uint64 {
	switch typ {
	case ggmlTypeF32:
		return 4
	case ggmlTypeF16, ggmlTypeBF16:
		return 2
	}
	panic(fmt.Sprintf("ggml type %d", typ))
}

func (f *readFile) raw(t *readTensor) []byte {
	n := elemSize(t.typ)
	for _, d := range t.ne {
		n *= d
	}
	return f.data[f.dataBase+t.offset : f.dataBase+t.offset+n]
}

func (f *readFile) floats(t *readTensor) []float32 {
	if t.typ != ggmlTypeF32 {
		panic(fmt.Sprintf("tensor %q is of type %d, not F32", t.name, t.typ))
	}
	b := f.raw(t)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// bits returns an F16 or BF16 tensor's raw values.
func (f *readFile) bits(t *readTensor) []uint16 {
	if t.typ != ggmlTypeF16 && t.typ != ggmlTypeBF16 {
		panic(fmt.Sprintf("tensor %q is of type %d, not 16-bit", t.name, t.typ))
	}
	b := f.raw(t)
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

func TestWriteTinyGPT2(t *testing.T) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	f := writeAndParse(t, m, convertOptions{})
	c := m.Config
	if f.version != 3 {
		t.Errorf("version %d, want 3", f.version)
	}

	// Metadata: types and values.
	wantScalars := map[string]struct {
		typ uint32
		val any
	}{
		"general.architecture":              {typeString, "gpt2"},
		"general.alignment":                 {typeUint32, uint32(32)},
		"gpt2.context_length":               {typeUint32, uint32(c.MaxPositions)},
		"gpt2.embedding_length":             {typeUint32, uint32(c.Hidden)},
		"gpt2.feed_forward_length":          {typeUint32, uint32(4 * c.Hidden)},
		"gpt2.block_count":                  {typeUint32, uint32(c.Layers)},
		"gpt2.attention.head_count":         {typeUint32, uint32(c.Heads)},
		"gpt2.attention.layer_norm_epsilon": {typeFloat32, float32(1e-5)},
		"tokenizer.ggml.model":              {typeString, "gpt2"},
		"tokenizer.ggml.pre":                {typeString, "gpt-2"},
		"tokenizer.ggml.bos_token_id":       {typeUint32, uint32(50256)},
		"tokenizer.ggml.eos_token_id":       {typeUint32, uint32(50256)},
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
	if f.keys[0] != "general.architecture" {
		t.Errorf("first key %q, want general.architecture", f.keys[0])
	}

	// Tokenizer arrays.
	toks, ok := f.kvs["tokenizer.ggml.tokens"].val.([]string)
	if !ok || len(toks) != c.VocabSize {
		t.Fatalf("tokenizer.ggml.tokens: %d strings, want %d", len(toks), c.VocabSize)
	}
	types, ok := f.kvs["tokenizer.ggml.token_type"].val.([]int32)
	if !ok || len(types) != c.VocabSize {
		t.Fatalf("tokenizer.ggml.token_type: %d int32s, want %d", len(types), c.VocabSize)
	}
	merges, ok := f.kvs["tokenizer.ggml.merges"].val.([]string)
	if !ok || len(merges) != 50000 {
		t.Fatalf("tokenizer.ggml.merges: %d strings, want 50000", len(merges))
	}
	// Well-known entries of GPT-2's vocab.json and merges.txt.
	for id, want := range map[int]string{0: "!", 11: ",", 198: "Ċ", 220: "Ġ", 256: "Ġt", 262: "Ġthe", 50256: "<|endoftext|>"} {
		if toks[id] != want {
			t.Errorf("token %d = %q, want %q", id, toks[id], want)
		}
	}
	if types[50256] != tokenControl || types[0] != tokenNormal || types[50255] != tokenNormal {
		t.Errorf("token types: 0 -> %d, 50255 -> %d, 50256 -> %d; want 1, 1, 3", types[0], types[50255], types[50256])
	}
	// As in GPT-2's merges.txt.
	if merges[0] != "Ġ t" || merges[2] != "h e" || merges[6] != "Ġt he" {
		t.Errorf("merges 0, 2, 6 = %q, %q, %q; want \"Ġ t\", \"h e\", \"Ġt he\"", merges[0], merges[2], merges[6])
	}
	// Every merge joins to the token of the next rank, and tokens are
	// distinct.
	for i, mg := range merges {
		l, r, ok := strings.Cut(mg, " ")
		if !ok || l == "" || r == "" || strings.Contains(r, " ") {
			t.Fatalf("merge %d %q is not two parts", i, mg)
		}
		if l+r != toks[256+i] {
			t.Fatalf("merge %d %q does not make token %d %q", i, mg, 256+i, toks[256+i])
		}
	}
	if s := slices.Clone(toks); len(slices.Compact(sortStrings(s))) != len(toks) {
		t.Errorf("tokens are not distinct")
	}
	// The vocabulary decodes to tinyserve's tokenizer's bytes.
	tk, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{0, 1, 100, 198, 220, 256, 262, 1000, 30000, 50255} {
		raw, ok := tokenizer.ByteLevelDecode(toks[id])
		if !ok {
			t.Errorf("token %d is %q, not in the byte-level alphabet", id, toks[id])
		}
		if got, want := string(raw), tk.Decode([]int{id}, false); got != want && strings.ToValidUTF8(got, "\uFFFD") != want {
			t.Errorf("token %d decodes to %q, tokenizer says %q", id, got, want)
		}
	}

	// Tensors: names, shapes, types, aligned and non-overlapping offsets.
	C, V, P, I := uint64(c.Hidden), uint64(c.VocabSize), uint64(c.MaxPositions), uint64(4*c.Hidden)
	want := map[string][]uint64{
		"token_embd.weight": {C, V}, "position_embd.weight": {C, P},
		"output_norm.weight": {C}, "output_norm.bias": {C}, "output.weight": {C, V},
	}
	for i := range c.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		for k, v := range map[string][]uint64{
			"attn_norm.weight": {C}, "attn_norm.bias": {C},
			"attn_qkv.weight": {C, 3 * C}, "attn_qkv.bias": {3 * C},
			"attn_output.weight": {C, C}, "attn_output.bias": {C},
			"ffn_norm.weight": {C}, "ffn_norm.bias": {C},
			"ffn_up.weight": {C, I}, "ffn_up.bias": {I},
			"ffn_down.weight": {I, C}, "ffn_down.bias": {C},
		} {
			want[p+k] = v
		}
	}
	if len(f.tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(f.tensors), len(want))
	}
	type span struct {
		lo, hi uint64
		name   string
	}
	var spans []span
	for _, ti := range f.tensors {
		w, ok := want[ti.name]
		if !ok {
			t.Errorf("unexpected tensor %q", ti.name)
			continue
		}
		if !slices.Equal(ti.ne, w) {
			t.Errorf("tensor %q shape %v, want %v", ti.name, ti.ne, w)
		}
		if ti.typ != ggmlTypeF32 {
			t.Errorf("tensor %q type %d, want F32 (0)", ti.name, ti.typ)
		}
		if ti.offset%32 != 0 {
			t.Errorf("tensor %q offset %d not aligned to 32", ti.name, ti.offset)
		}
		n := uint64(4)
		for _, d := range ti.ne {
			n *= d
		}
		if f.dataBase+ti.offset+n > f.size {
			t.Errorf("tensor %q [%d, %d) runs past the end of the file (%d)", ti.name, f.dataBase+ti.offset, f.dataBase+ti.offset+n, f.size)
		}
		spans = append(spans, span{ti.offset, ti.offset + n, ti.name})
	}
	if f.dataBase%32 != 0 {
		t.Errorf("data section at %d, not aligned", f.dataBase)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			t.Errorf("tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	if t.Failed() {
		return
	}

	// Values: a transposed Conv1D matrix and an untransposed embedding.
	l := &m.Weights.Layers[1]
	qkv := f.floats(f.tensor("blk.1.attn_qkv.weight")) // [3C][C]
	for o := range 3 * c.Hidden {
		for in := range c.Hidden {
			if got, w := qkv[o*c.Hidden+in], l.QKV[0].W.At(in*3*c.Hidden+o); got != w {
				t.Fatalf("blk.1.attn_qkv.weight[out %d][in %d] = %v, want c_attn[in][out] = %v", o, in, got, w)
			}
		}
	}
	down := f.floats(f.tensor("blk.3.ffn_down.weight")) // [C][4C]
	for o := range c.Hidden {
		for in := range 4 * c.Hidden {
			if got, w := down[o*4*c.Hidden+in], m.Weights.Layers[3].Down.W.At(in*c.Hidden+o); got != w {
				t.Fatalf("blk.3.ffn_down.weight[%d][%d] = %v, want %v", o, in, got, w)
			}
		}
	}
	if !slices.Equal(f.floats(f.tensor("token_embd.weight")), m.Weights.Embed.Float32s()) {
		t.Errorf("token_embd.weight differs from wte")
	}
	if !slices.Equal(f.floats(f.tensor("output.weight")), m.Weights.LMHead.Float32s()) {
		t.Errorf("output.weight differs from the LM head")
	}
	if !slices.Equal(f.floats(f.tensor("blk.2.attn_qkv.bias")), m.Weights.Layers[2].QKV[0].B.Float32s()) {
		t.Errorf("blk.2.attn_qkv.bias differs")
	}
}

func sortStrings(s []string) []string { slices.Sort(s); return s }

func TestTranspose(t *testing.T) {
	a := []float32{1, 2, 3, 4, 5, 6} // [2][3]
	if got := transpose(a, 2, 3); !slices.Equal(got, []float32{1, 4, 2, 5, 3, 6}) {
		t.Errorf("transpose = %v", got)
	}
}

func TestRejectsUnsupportedConfig(t *testing.T) {
	m, err := model.Builtin(model.BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	m.Config.Activation = model.GeluErf
	if err := convert(m, nil, convertOptions{}); err == nil {
		t.Errorf("converted a model with the erf GELU")
	}
}
