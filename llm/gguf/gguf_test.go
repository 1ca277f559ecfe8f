package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// everyValue is metadata of every value type, arrays of each and an array
// of arrays.
var everyValue = []KV{
	{"general.architecture", "test"}, {"general.alignment", uint32(64)},
	{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
	{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5)}, {"bool", true},
	{"str", "héllo"}, {"u64", uint64(1) << 63}, {"i64", int64(-1) << 62}, {"f64", math.Pi},
	{"a.u8", []uint8{1, 2}}, {"a.i8", []int8{-1}}, {"a.u16", []uint16{7}}, {"a.i16", []int16{-7}},
	{"a.u32", []uint32{1, 2, 3}}, {"a.i32", []int32{-1, 2}}, {"a.f32", []float32{0.5, -2}}, {"a.bool", []bool{true, false}},
	{"a.str", []string{"a", "", "ü b"}}, {"a.u64", []uint64{9}}, {"a.i64", []int64{-9}}, {"a.f64", []float64{2.25}},
	{"a.empty", []string{}}, {"a.nested", []any{[]int32{1, 2}, []int32{3}}},
}

// testTensors are one tensor of each type the writer writes.
func testTensors() ([]TensorOut, map[string][]float32) {
	want := map[string][]float32{}
	var ts []TensorOut
	for i, typ := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0} {
		v := make([]float32, 2*64)
		for j := range v {
			v[j] = float32(math.Sin(float64(j*(i+1)))) * 3
		}
		name := "t." + string(typ)
		t := tensor.FromFloat32(v, 2, 64).Convert(typ)
		want[name] = t.Float32s() // the values after rounding to the type
		ts = append(ts, TensorOut{Name: name, Dims: []uint64{64, 2}, Type: typ, Data: func() tensor.Tensor { return tensor.FromFloat32(v, 2, 64) }})
	}
	return ts, want
}

func writeFile(t *testing.T, meta []KV, ts []TensorOut) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, meta, ts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	ts, want := testTensors()
	data := writeFile(t, everyValue, ts)
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 || f.DataOffset%64 != 0 || len(f.KV) != len(everyValue) {
		t.Fatalf("alignment %d, data at %d, %d keys", f.Alignment, f.DataOffset, len(f.KV))
	}
	for i, kv := range everyValue {
		if got := f.KV[i]; got.Key != kv.Key || !reflect.DeepEqual(got.Value, kv.Value) {
			t.Errorf("metadata %d: %q = %#v, want %q = %#v", i, got.Key, got.Value, kv.Key, kv.Value)
		}
	}
	if n, err := f.Int("u16"); err != nil || n != 60000 {
		t.Errorf("Int(u16) = %d, %v", n, err)
	}
	if _, err := f.String("u16"); err == nil || !strings.Contains(err.Error(), `"u16"`) {
		t.Errorf("String(u16): %v, want an error naming the key", err)
	}
	if ids, err := f.Ints("a.u32"); err != nil || !reflect.DeepEqual(ids, []int64{1, 2, 3}) {
		t.Errorf("Ints(a.u32) = %v, %v", ids, err)
	}
	for _, out := range ts {
		got, err := f.Load(out.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.DType != out.Type || !reflect.DeepEqual(got.Shape, []int64{2, 64}) {
			t.Errorf("%s: %s %v", out.Name, got.DType, got.Shape)
		}
		if !reflect.DeepEqual(got.Float32s(), want[out.Name]) {
			t.Errorf("%s: values differ after the round trip", out.Name)
		}
		info, _ := f.Tensor(out.Name)
		if info.Offset%64 != 0 {
			t.Errorf("%s at data offset %d, not aligned", out.Name, info.Offset)
		}
	}
	// The Q8_0 bytes are QuantizeQ8_0's.
	q, _ := f.Load("t.Q8_0")
	v := make([]float32, 128)
	for j := range v {
		v[j] = float32(math.Sin(float64(j*4))) * 3
	}
	ref, _ := tensor.QuantizeQ8_0(v, 2, 64)
	if !bytes.Equal(q.Q8_0Blocks(), ref.Q8_0Blocks()) {
		t.Error("Q8_0 blocks differ from tensor.QuantizeQ8_0's")
	}
}

// TestQ4_0 reads a hand-made Q4_0 block as the Q8_0 holding the same
// values.
func TestQ4_0(t *testing.T) {
	block := make([]byte, 18)
	binary.LittleEndian.PutUint16(block, tensor.F32ToF16(0.5))
	want := make([]float32, 32)
	for j := range 16 {
		lo, hi := byte(j), byte(15-j)
		block[2+j] = lo | hi<<4
		want[j], want[j+16] = 0.5*float32(int(lo)-8), 0.5*float32(int(hi)-8)
	}
	data := build(t, 3, []KV{{"general.alignment", uint32(32)}}, []rawTensor{{"q", []uint64{32}, uint32(TypeQ4_0), 0}}, block)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Load("q")
	if err != nil {
		t.Fatal(err)
	}
	if got.DType != tensor.Q8_0 || !reflect.DeepEqual(got.Float32s(), want) {
		t.Errorf("Q4_0 read as %s %v, want Q8_0 %v", got.DType, got.Float32s(), want)
	}
}

// rawTensor is a tensor info written as given, for files the writer would
// refuse to make.
type rawTensor struct {
	name string
	dims []uint64
	typ  uint32
	off  uint64
}

// build writes a GGUF file field by field: header (with the given
// version), metadata, tensor infos, padding to the alignment, then data.
func build(t *testing.T, version uint32, meta []KV, ts []rawTensor, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	g := &writer{w: bufio.NewWriter(&b)}
	g.bytes([]byte(Magic))
	g.u32(version)
	g.u64(uint64(len(ts)))
	g.u64(uint64(len(meta)))
	for _, kv := range meta {
		g.str(kv.Key)
		if err := g.value(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range ts {
		g.str(r.name)
		g.u32(uint32(len(r.dims)))
		for _, d := range r.dims {
			g.u64(d)
		}
		g.u32(r.typ)
		g.u64(r.off)
	}
	g.pad(32)
	g.bytes(data)
	if err := g.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestBadFiles(t *testing.T) {
	ts, _ := testTensors()
	good := writeFile(t, everyValue, ts)
	le := binary.LittleEndian
	patch := func(off int, v uint64) []byte {
		b := bytes.Clone(good)
		le.PutUint64(b[off:], v)
		return b
	}
	f32 := uint32(TypeF32)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: magic"},
		{"bad magic", append([]byte("GGML"), good[4:]...), `bad magic "GGML"`},
		{"version 2", build(t, 2, nil, nil, nil), "version 2"},
		{"huge tensor count", patch(8, 1<<62), "tensors cannot fit"},
		{"huge metadata count", patch(16, 1<<62), "metadata entries cannot fit"},
		{"huge key length", patch(24, 1<<62), "truncated: metadata key"},
		{"huge string", func() []byte {
			b := build(t, 3, []KV{{"s", "x"}}, nil, nil)
			le.PutUint64(b[24+8+1+4:], 1<<62)
			return b
		}(), `truncated: metadata s needs 4611686018427387904 bytes`},
		{"huge array", func() []byte {
			b := build(t, 3, []KV{{"a", []uint32{1}}}, nil, nil)
			le.PutUint64(b[24+8+1+4+4:], 1<<60)
			return b
		}(), "array of 1152921504606846976 uint32 values"},
		{"unknown value type", func() []byte {
			b := build(t, 3, []KV{{"k", uint32(1)}}, nil, nil)
			le.PutUint32(b[24+8+1:], 99)
			return b
		}(), `metadata "k" has unknown value type 99`},
		{"bool byte", func() []byte {
			b := build(t, 3, []KV{{"b", true}}, nil, nil)
			b[24+8+1+4] = 2
			return b
		}(), "bool byte 2"},
		{"duplicate key", build(t, 3, []KV{{"k", uint32(1)}, {"k", uint32(2)}}, nil, nil), `"k" appears twice`},
		{"bad alignment", build(t, 3, []KV{{"general.alignment", uint32(48)}}, nil, nil), "general.alignment 48"},
		{"alignment type", build(t, 3, []KV{{"general.alignment", uint64(32)}}, nil, nil), "general.alignment 32 (uint64)"},
		{"too many dims", build(t, 3, nil, []rawTensor{{"w", []uint64{1, 1, 1, 1, 1}, f32, 0}}, make([]byte, 4)), `tensor "w" has 5 dimensions`},
		{"dims overflow", build(t, 3, nil, []rawTensor{{"w", []uint64{1 << 40, 1 << 40}, f32, 0}}, nil), `tensor "w": dimensions`},
		{"misaligned offset", build(t, 3, nil, []rawTensor{{"w", []uint64{4}, f32, 8}}, make([]byte, 64)), "data offset 8 is not a multiple of the alignment 32"},
		{"tensor outside the file", build(t, 3, nil, []rawTensor{{"w", []uint64{64}, f32, 0}}, make([]byte, 100)), `tensor "w" (F32, 256 bytes at data offset 0) lies outside the file`},
		{"partial block", build(t, 3, nil, []rawTensor{{"w", []uint64{16}, uint32(TypeQ8_0), 0}}, make([]byte, 64)), "not whole blocks of 32"},
		{"duplicate tensor", build(t, 3, nil, []rawTensor{{"w", []uint64{1}, f32, 0}, {"w", []uint64{1}, f32, 0}}, make([]byte, 32)), `tensor "w" appears twice`},
		{"truncated data", good[:len(good)-100], "lies outside the file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil || !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrBad containing %q", err, c.want)
			}
		})
	}
	// Every truncation of a good file that cuts into a tensor is refused,
	// never a panic (the padding after the last one may go).
	f, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	end := uint64(0)
	for _, ti := range f.Tensors {
		end = max(end, f.DataOffset+ti.Offset+ti.Size)
	}
	for n := range int(end) {
		if _, err := Parse(good[:n]); err == nil {
			t.Fatalf("a file cut to %d of %d bytes parsed", n, len(good))
		}
	}
}

func TestUnsupportedTensorType(t *testing.T) {
	data := build(t, 3, nil, []rawTensor{{"blk.0.ffn_down.weight", []uint64{256}, uint32(TypeQ4_K), 0}, {"x", []uint64{4}, 99, 256}}, make([]byte, 512))
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Load("blk.0.ffn_down.weight")
	if err == nil || !strings.Contains(err.Error(), `tensor "blk.0.ffn_down.weight" has ggml type Q4_K`) {
		t.Errorf("Q4_K: %v", err)
	}
	if _, err = f.Load("x"); err == nil || !strings.Contains(err.Error(), `tensor "x" has ggml type type 99`) {
		t.Errorf("type 99: %v", err)
	}
	// An empty tensor placed past the end of the file is refused, not
	// sliced.
	g, err := Parse(build(t, 3, nil, []rawTensor{{"e", []uint64{0}, uint32(TypeF32), 1 << 40}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load("e"); err == nil || !strings.Contains(err.Error(), "outside the file") {
		t.Errorf("empty tensor past the end: %v", err)
	}
	if _, err = f.Load("y"); err == nil || !strings.Contains(err.Error(), `missing tensor "y"`) {
		t.Errorf("missing: %v", err)
	}
}

func TestWriteRefuses(t *testing.T) {
	one := func() tensor.Tensor { return tensor.FromFloat32(make([]float32, 16), 16) }
	for _, c := range []struct {
		meta []KV
		ts   []TensorOut
		want string
	}{
		{[]KV{{"k", 1}}, nil, "unsupported value type int"},
		{[]KV{{"k", uint32(1)}, {"k", uint32(1)}}, nil, "duplicate metadata key"},
		{nil, []TensorOut{{Name: "w", Dims: []uint64{16}, Type: tensor.Q8_0, Data: one}}, "whole 32-value blocks"},
		{nil, []TensorOut{{Name: "w", Dims: []uint64{16}, Type: "F64", Data: one}}, "unsupported type"},
		{nil, []TensorOut{{Name: "w", Dims: []uint64{8}, Type: tensor.F32, Data: one}}, "has 16 values"},
	} {
		if err := Write(&bytes.Buffer{}, c.meta, c.ts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write: %v, want %q", err, c.want)
		}
	}
}

// TestQuantizeQ4_0 checks the reference rounding on a hand-computed block
// and the round trip through Q4_0ToQ8_0.
func TestQuantizeQ4_0(t *testing.T) {
	v := make([]float32, 32)
	for j := range v {
		v[j] = float32(j) - 16 // -16 (the largest magnitude) .. 15
	}
	b, err := QuantizeQ4_0(v)
	if err != nil {
		t.Fatal(err)
	}
	// d = -16/-8 = 2: q = trunc(x/2 + 8.5), so -16 -> 0, 15 -> 16 clamped to 15.
	if d := tensor.F16ToF32(binary.LittleEndian.Uint16(b)); d != 2 {
		t.Fatalf("d = %v, want 2", d)
	}
	q, _ := tensor.FromQ8_0(Q4_0ToQ8_0(b), 32)
	for j, got := range q.Float32s() {
		want := 2 * float32(min(15, int8(v[j]/2+8.5))-8)
		if got != want {
			t.Errorf("value %d: %v, want %v", j, got, want)
		}
	}
	if _, err := QuantizeQ4_0(make([]float32, 31)); err == nil {
		t.Error("a partial block was quantized")
	}
}
