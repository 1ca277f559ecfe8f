package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// GGUF constants (version 3, little endian).
const (
	ggufMagic     = "GGUF"
	ggufVersion   = 3
	ggufAlignment = 32
)

// ggml tensor types this writer stores (ggml.h's enum ggml_type).
const (
	ggmlTypeF32  uint32 = 0
	ggmlTypeF16  uint32 = 1
	ggmlTypeBF16 uint32 = 30
)

// ggmlTypes maps the stored types a tensor may be written in to ggml's
// numbers.
var ggmlTypes = map[tensor.DType]uint32{tensor.F32: ggmlTypeF32, tensor.F16: ggmlTypeF16, tensor.BF16: ggmlTypeBF16}

// GGUF metadata value types.
const (
	typeUint8   uint32 = 0
	typeInt8    uint32 = 1
	typeUint16  uint32 = 2
	typeInt16   uint32 = 3
	typeUint32  uint32 = 4
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
	typeUint64  uint32 = 10
	typeInt64   uint32 = 11
	typeFloat64 uint32 = 12
)

// metaKV is one metadata key/value. Val is a uint32, int32, float32, bool,
// string, []string or []int32.
type metaKV struct {
	Key string
	Val any
}

// tensorOut is one tensor to write. NE lists the dimensions in ggml's
// order: NE[0] is the fastest-varying one. Type is how the file stores the
// values (F32, F16 or BF16). Data returns the values in that memory order,
// in any stored type (they are converted to Type, rounding to nearest even
// when narrowing); it is called once, while the data section is written.
type tensorOut struct {
	Name string
	NE   []uint64
	Type tensor.DType
	Data func() tensor.Tensor
}

func (t *tensorOut) elems() uint64 {
	n := uint64(1)
	for _, d := range t.NE {
		n *= d
	}
	return n
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// ggufWriter counts the bytes it has written, for the alignment padding.
type ggufWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (g *ggufWriter) bytes(b []byte) {
	if g.err != nil {
		return
	}
	k, err := g.w.Write(b)
	g.n += uint64(k)
	g.err = err
}

func (g *ggufWriter) u32(v uint32) { g.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (g *ggufWriter) u64(v uint64) { g.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (g *ggufWriter) str(s string) { g.u64(uint64(len(s))); g.bytes([]byte(s)) }

func (g *ggufWriter) pad() {
	if p := alignUp(g.n, ggufAlignment) - g.n; p > 0 {
		g.bytes(make([]byte, p))
	}
}

func (g *ggufWriter) value(v any) error {
	switch v := v.(type) {
	case uint32:
		g.u32(typeUint32)
		g.u32(v)
	case int32:
		g.u32(typeInt32)
		g.u32(uint32(v))
	case float32:
		g.u32(typeFloat32)
		g.u32(math.Float32bits(v))
	case bool:
		g.u32(typeBool)
		b := byte(0)
		if v {
			b = 1
		}
		g.bytes([]byte{b})
	case string:
		g.u32(typeString)
		g.str(v)
	case []string:
		g.u32(typeArray)
		g.u32(typeString)
		g.u64(uint64(len(v)))
		for _, s := range v {
			g.str(s)
		}
	case []int32:
		g.u32(typeArray)
		g.u32(typeInt32)
		g.u64(uint64(len(v)))
		buf := make([]byte, 0, 4*len(v))
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
		}
		g.bytes(buf)
	default:
		return fmt.Errorf("gguf: unsupported metadata value type %T", v)
	}
	return nil
}

// writeGGUF writes a GGUF v3 file: header, metadata, tensor infos, then
// each tensor's data at an offset aligned to ggufAlignment. The metadata
// should contain general.alignment = ggufAlignment (uint32).
func writeGGUF(w io.Writer, meta []metaKV, tensors []tensorOut) error {
	g := &ggufWriter{w: bufio.NewWriterSize(w, 1<<20)}
	g.bytes([]byte(ggufMagic))
	g.u32(ggufVersion)
	g.u64(uint64(len(tensors)))
	g.u64(uint64(len(meta)))
	seen := map[string]bool{}
	for _, kv := range meta {
		if seen[kv.Key] {
			return fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		seen[kv.Key] = true
		g.str(kv.Key)
		if err := g.value(kv.Val); err != nil {
			return err
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
		offsets[i] = off
		g.str(t.Name)
		g.u32(uint32(len(t.NE)))
		for _, d := range t.NE {
			g.u64(d)
		}
		typ, ok := ggmlTypes[t.Type]
		if !ok {
			return fmt.Errorf("gguf: tensor %q: unsupported type %q", t.Name, t.Type)
		}
		g.u32(typ)
		g.u64(off)
		off = alignUp(off+uint64(t.Type.Size())*t.elems(), ggufAlignment)
	}
	g.pad()
	base := g.n
	buf := make([]byte, 0, 1<<16)
	for i := range tensors {
		t := &tensors[i]
		if g.n-base != offsets[i] {
			return fmt.Errorf("gguf: internal error: tensor %q at data offset %d, want %d", t.Name, g.n-base, offsets[i])
		}
		data := t.Data().Convert(t.Type)
		if uint64(data.Len()) != t.elems() {
			return fmt.Errorf("gguf: tensor %q has %d values, its shape %v needs %d", t.Name, data.Len(), t.NE, t.elems())
		}
		if t.Type == tensor.F32 {
			v := data.Float32s()
			for j := 0; j < len(v); {
				buf = buf[:0]
				for ; j < len(v) && len(buf) < cap(buf); j++ {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v[j]))
				}
				g.bytes(buf)
			}
		} else {
			v := data.Bits()
			for j := 0; j < len(v); {
				buf = buf[:0]
				for ; j < len(v) && len(buf) < cap(buf); j++ {
					buf = binary.LittleEndian.AppendUint16(buf, v[j])
				}
				g.bytes(buf)
			}
		}
		g.pad()
	}
	if g.err != nil {
		return g.err
	}
	return g.w.Flush()
}

var errShape = errors.New("gguf: bad shape")

// transpose returns the row-major [cols, rows] transpose of the row-major
// [rows, cols] matrix a.
func transpose(a []float32, rows, cols int) []float32 {
	if len(a) != rows*cols {
		panic(errShape)
	}
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
