package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// TensorOut is one tensor to write. Dims are ggml's ne (Dims[0] the
// fastest-varying dimension). Type is how the file stores the values: F32,
// F16, BF16 or Q8_0. Data returns the values in that memory order, in any
// stored type: they are converted to Type (rounding to nearest even when
// narrowing to a float type, with ggml's reference rounding to Q8_0, in
// blocks along Dims[0]). It is called once, while the data section is
// written, so that a large model is converted one tensor at a time.
type TensorOut struct {
	Name string
	Dims []uint64
	Type tensor.DType
	Data func() tensor.Tensor
	// Encoded, when set, returns the tensor's bytes already in ggml type
	// GGMLType (Q4_0 blocks, a tensor copied from another file): written
	// as they are, Type and Data unused. Like Data it is called once,
	// while the data section is written.
	Encoded  func() []byte
	GGMLType Type
}

func (t *TensorOut) elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// ggmlType is the ggml type a tensor.DType is written as.
func ggmlType(d tensor.DType) (Type, bool) {
	switch d {
	case tensor.F32:
		return TypeF32, true
	case tensor.F16:
		return TypeF16, true
	case tensor.BF16:
		return TypeBF16, true
	case tensor.Q8_0:
		return TypeQ8_0, true
	}
	return 0, false
}

// size is the bytes of t's data, or an error when its type or shape cannot
// be written.
func (t *TensorOut) size() (uint64, error) {
	typ, ok := t.ggml()
	if !ok {
		return 0, fmt.Errorf("gguf: tensor %q: unsupported type %q (want F32, F16, BF16 or Q8_0)", t.Name, t.Type)
	}
	if len(t.Dims) == 0 || len(t.Dims) > MaxDims {
		return 0, fmt.Errorf("gguf: tensor %q: %d dimensions (1 to %d)", t.Name, len(t.Dims), MaxDims)
	}
	vals, bytes, known := typ.Block()
	if !known || t.Dims[0]%vals != 0 {
		return 0, fmt.Errorf("gguf: tensor %q: %s needs rows of whole %d-value blocks, got %d", t.Name, typ, vals, t.Dims[0])
	}
	return t.elems() / vals * bytes, nil
}

// ggml is the ggml type the tensor is written in.
func (t *TensorOut) ggml() (Type, bool) {
	if t.Encoded != nil {
		return t.GGMLType, true
	}
	return ggmlType(t.Type)
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// writer counts the bytes it has written, for the alignment padding.
type writer struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (g *writer) bytes(b []byte) {
	if g.err != nil {
		return
	}
	k, err := g.w.Write(b)
	g.n += uint64(k)
	g.err = err
}

func (g *writer) u32(v uint32) { g.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (g *writer) u64(v uint64) { g.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (g *writer) str(s string) { g.u64(uint64(len(s))); g.bytes([]byte(s)) }

func (g *writer) pad(align uint64) {
	if p := alignUp(g.n, align) - g.n; p > 0 {
		g.bytes(make([]byte, p))
	}
}

// valueType is the GGUF type of a metadata value (a scalar or a slice, see
// KV), with, for an array, its element type.
func valueType(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return ValueUint8, true
	case int8:
		return ValueInt8, true
	case uint16:
		return ValueUint16, true
	case int16:
		return ValueInt16, true
	case uint32:
		return ValueUint32, true
	case int32:
		return ValueInt32, true
	case float32:
		return ValueFloat32, true
	case bool:
		return ValueBool, true
	case string:
		return ValueString, true
	case uint64:
		return ValueUint64, true
	case int64:
		return ValueInt64, true
	case float64:
		return ValueFloat64, true
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string, []uint64, []int64, []float64, []any:
		return ValueArray, true
	}
	return 0, false
}

// scalar writes a scalar value without its type.
func (g *writer) scalar(v any) {
	switch v := v.(type) {
	case uint8:
		g.bytes([]byte{v})
	case int8:
		g.bytes([]byte{byte(v)})
	case uint16:
		g.bytes(binary.LittleEndian.AppendUint16(nil, v))
	case int16:
		g.bytes(binary.LittleEndian.AppendUint16(nil, uint16(v)))
	case uint32:
		g.u32(v)
	case int32:
		g.u32(uint32(v))
	case float32:
		g.u32(math.Float32bits(v))
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		g.bytes([]byte{b})
	case string:
		g.str(v)
	case uint64:
		g.u64(v)
	case int64:
		g.u64(uint64(v))
	case float64:
		g.u64(math.Float64bits(v))
	}
}

// value writes v's type, then v.
func (g *writer) value(key string, v any) error {
	vt, ok := valueType(v)
	if !ok {
		return fmt.Errorf("gguf: metadata %q: unsupported value type %T", key, v)
	}
	g.u32(uint32(vt))
	if vt != ValueArray {
		g.scalar(v)
		return nil
	}
	return g.array(key, v)
}

// array writes an array's element type, length and elements.
func (g *writer) array(key string, v any) error {
	write := func(et ValueType, n int, at func(int) any) error {
		g.u32(uint32(et))
		g.u64(uint64(n))
		for i := range n {
			if et == ValueArray {
				if err := g.array(key, at(i)); err != nil {
					return err
				}
				continue
			}
			g.scalar(at(i))
		}
		return nil
	}
	switch a := v.(type) {
	case []uint8:
		return write(ValueUint8, len(a), func(i int) any { return a[i] })
	case []int8:
		return write(ValueInt8, len(a), func(i int) any { return a[i] })
	case []uint16:
		return write(ValueUint16, len(a), func(i int) any { return a[i] })
	case []int16:
		return write(ValueInt16, len(a), func(i int) any { return a[i] })
	case []uint32:
		return write(ValueUint32, len(a), func(i int) any { return a[i] })
	case []int32:
		return write(ValueInt32, len(a), func(i int) any { return a[i] })
	case []float32:
		return write(ValueFloat32, len(a), func(i int) any { return a[i] })
	case []bool:
		return write(ValueBool, len(a), func(i int) any { return a[i] })
	case []string:
		return write(ValueString, len(a), func(i int) any { return a[i] })
	case []uint64:
		return write(ValueUint64, len(a), func(i int) any { return a[i] })
	case []int64:
		return write(ValueInt64, len(a), func(i int) any { return a[i] })
	case []float64:
		return write(ValueFloat64, len(a), func(i int) any { return a[i] })
	case []any:
		for _, e := range a {
			if vt, _ := valueType(e); vt != ValueArray {
				return fmt.Errorf("gguf: metadata %q: an []any holds arrays only, got %T", key, e)
			}
		}
		return write(ValueArray, len(a), func(i int) any { return a[i] })
	}
	return fmt.Errorf("gguf: metadata %q: unsupported array type %T", key, v)
}

// Write writes a GGUF v3 file: header, metadata, tensor infos, then each
// tensor's data at an offset aligned to general.alignment (a uint32 in
// meta; DefaultAlignment when meta has none).
func Write(w io.Writer, meta []KV, tensors []TensorOut) error {
	align := uint64(DefaultAlignment)
	seen := map[string]bool{}
	for _, kv := range meta {
		if seen[kv.Key] {
			return fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("gguf: general.alignment %v (%T): want a power of two as uint32", kv.Value, kv.Value)
			}
			align = uint64(a)
		}
	}
	offsets := make([]uint64, len(tensors))
	var off uint64
	for i := range tensors {
		t := &tensors[i]
		if seen["tensor:"+t.Name] {
			return fmt.Errorf("gguf: duplicate tensor %q", t.Name)
		}
		seen["tensor:"+t.Name] = true
		size, err := t.size()
		if err != nil {
			return err
		}
		offsets[i] = off
		off = alignUp(off+size, align)
	}

	g := &writer{w: bufio.NewWriterSize(w, 1<<20)}
	g.bytes([]byte(Magic))
	g.u32(Version)
	g.u64(uint64(len(tensors)))
	g.u64(uint64(len(meta)))
	for _, kv := range meta {
		g.str(kv.Key)
		if err := g.value(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	for i := range tensors {
		t := &tensors[i]
		g.str(t.Name)
		g.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			g.u64(d)
		}
		typ, _ := t.ggml()
		g.u32(uint32(typ))
		g.u64(offsets[i])
	}
	g.pad(align)
	base := g.n
	for i := range tensors {
		t := &tensors[i]
		if g.n-base != offsets[i] {
			return fmt.Errorf("gguf: internal error: tensor %q at data offset %d, want %d", t.Name, g.n-base, offsets[i])
		}
		if err := g.tensorData(t); err != nil {
			return err
		}
		g.pad(align)
	}
	if g.err != nil {
		return g.err
	}
	return g.w.Flush()
}

// tensorData writes t's values converted to t.Type.
func (g *writer) tensorData(t *TensorOut) error {
	if t.Encoded != nil {
		b := t.Encoded()
		if n, _ := t.size(); uint64(len(b)) != n {
			return fmt.Errorf("gguf: tensor %q: %d encoded bytes, %s %v needs %d", t.Name, len(b), t.GGMLType, t.Dims, n)
		}
		g.bytes(b)
		return nil
	}
	data := t.Data()
	if uint64(data.Len()) != t.elems() {
		return fmt.Errorf("gguf: tensor %q has %d values, its dimensions %v need %d", t.Name, data.Len(), t.Dims, t.elems())
	}
	switch t.Type {
	case tensor.Q8_0:
		if data.DType != tensor.Q8_0 || data.Shape[len(data.Shape)-1] != int64(t.Dims[0]) {
			q, err := tensor.QuantizeQ8_0(data.Float32s(), int64(t.elems()/t.Dims[0]), int64(t.Dims[0]))
			if err != nil {
				return fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
			}
			data = q
		}
		g.bytes(data.Q8_0Blocks())
	case tensor.F32:
		v := data.Convert(tensor.F32).Float32s()
		buf := make([]byte, 0, 1<<16)
		for j := 0; j < len(v); {
			buf = buf[:0]
			for ; j < len(v) && len(buf) < cap(buf); j++ {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v[j]))
			}
			g.bytes(buf)
		}
	default:
		v := data.Convert(t.Type).Bits()
		buf := make([]byte, 0, 1<<16)
		for j := 0; j < len(v); {
			buf = buf[:0]
			for ; j < len(v) && len(buf) < cap(buf); j++ {
				buf = binary.LittleEndian.AppendUint16(buf, v[j])
			}
			g.bytes(buf)
		}
	}
	return nil
}
