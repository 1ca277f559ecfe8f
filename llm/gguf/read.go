package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/tinyserve/tinyserve/llm/checkpoint"
)

// ErrBad is matched (errors.Is) by every error about a file's contents:
// bad magic or version, truncation, an impossible count or offset, a
// metadata value of the wrong type, an unsupported tensor type. It is
// llm/checkpoint's ErrBad, so a server reports a bad GGUF as it reports a
// bad safetensors file.
var ErrBad = checkpoint.ErrBad

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	// Name is the tensor's GGUF name (blk.0.attn_q.weight, ...).
	Name string
	// Dims are ggml's ne: Dims[0] is the innermost (fastest-varying)
	// dimension, so a [rows, cols] matrix has Dims [cols, rows].
	Dims []uint64
	// Type is how the values are stored.
	Type Type
	// Offset is where the data starts, relative to the data section.
	Offset uint64
	// Size is the data's bytes, 0 when the type's block is unknown here.
	Size uint64
}

// Elems is the number of values.
func (t *TensorInfo) Elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d // checked against overflow when the file was read
	}
	return n
}

// Shape is the tensor's shape outermost first, as llm/tensor orders it:
// Dims reversed.
func (t *TensorInfo) Shape() []int64 {
	s := make([]int64, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int64(d)
	}
	return s
}

// File is a parsed GGUF file: its metadata and tensor descriptions, over
// the file's bytes (a read-only memory mapping for Open).
type File struct {
	// Version is the header's version (always 3).
	Version uint32
	// Alignment is general.alignment, or DefaultAlignment.
	Alignment uint64
	// KV is the metadata in file order.
	KV []KV
	// Tensors are the tensor descriptions in file order.
	Tensors []TensorInfo
	// DataOffset is where the data section starts in the file.
	DataOffset uint64
	// Path is the file Open read ("" for Parse).
	Path string

	data    []byte
	release func() error
	keys    map[string]int
	names   map[string]int
}

// Open maps the GGUF file at path and parses it. Close releases the
// mapping; tensors from File.Tensor must not be used after that.
func Open(path string) (*File, error) {
	data, release, err := checkpoint.MapFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Path, f.release = path, release
	return f, nil
}

// Close releases the file's mapping. Closing twice does nothing.
func (f *File) Close() error {
	if f.release == nil {
		return nil
	}
	r := f.release
	f.release, f.data = nil, nil
	return r()
}

// maxArrayDepth bounds arrays of arrays: no real file nests them, and a
// hostile one should not recurse deeply.
const maxArrayDepth = 4

// Parse reads the header, metadata and tensor descriptions of a GGUF file
// held in data, which the File keeps (tensors alias it). Every count is
// checked against the bytes left before anything is allocated for it.
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	magic := r.bytes(4, "magic")
	if r.err == nil && string(magic) != Magic {
		return nil, fmt.Errorf("%w: gguf: bad magic %q: not a GGUF file", ErrBad, magic)
	}
	version := r.u32("version")
	if r.err == nil && version != Version {
		return nil, fmt.Errorf("%w: gguf: version %d: only GGUF version %d is supported", ErrBad, version, Version)
	}
	nTensors := r.u64("tensor count")
	nKV := r.u64("metadata count")
	if r.err != nil {
		return nil, r.err
	}
	// A KV is at least a key length, a type and one byte; a tensor info at
	// least a name length, a dimension count, one dimension, a type and an
	// offset.
	if nKV > r.left()/13 {
		return nil, fmt.Errorf("%w: gguf: %d metadata entries cannot fit in the %d bytes left", ErrBad, nKV, r.left())
	}
	if nTensors > r.left()/32 {
		return nil, fmt.Errorf("%w: gguf: %d tensors cannot fit in the %d bytes left", ErrBad, nTensors, r.left())
	}
	f := &File{Version: version, Alignment: DefaultAlignment, data: data,
		KV: make([]KV, 0, nKV), keys: make(map[string]int, nKV), names: make(map[string]int, nTensors)}
	for i := range nKV {
		key := r.str("metadata key")
		vt := ValueType(r.u32("metadata value type"))
		if r.err != nil {
			return nil, fmt.Errorf("%w (metadata entry %d of %d)", r.err, i, nKV)
		}
		v := r.value(vt, key, 0)
		if r.err != nil {
			return nil, r.err
		}
		if _, dup := f.keys[key]; dup {
			return nil, fmt.Errorf("%w: gguf: metadata key %q appears twice", ErrBad, key)
		}
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{key, v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("%w: gguf: general.alignment %v (%T): want a power of two as uint32", ErrBad, v, v)
		}
		f.Alignment = uint64(a)
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for range nTensors {
		t, err := r.tensorInfo(f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.names[t.Name]; dup {
			return nil, fmt.Errorf("%w: gguf: tensor %q appears twice", ErrBad, t.Name)
		}
		f.names[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	// The data section starts at the next multiple of the alignment.
	f.DataOffset = (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	if len(f.Tensors) > 0 && f.DataOffset > uint64(len(data)) {
		return nil, fmt.Errorf("%w: gguf: truncated: the data section would start at byte %d of a %d-byte file", ErrBad, f.DataOffset, len(data))
	}
	dataLen := uint64(len(data)) - min(f.DataOffset, uint64(len(data)))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Size > 0 && (t.Offset > dataLen || t.Size > dataLen-t.Offset) {
			return nil, fmt.Errorf("%w: gguf: tensor %q (%s, %d bytes at data offset %d) lies outside the file: truncated, the data section holds %d bytes",
				ErrBad, t.Name, t.Type, t.Size, t.Offset, dataLen)
		}
	}
	return f, nil
}

// tensorInfo reads one tensor description and checks its dimensions,
// type block and offset.
func (r *reader) tensorInfo(align uint64) (TensorInfo, error) {
	var t TensorInfo
	t.Name = r.str("tensor name")
	nd := r.u32("tensor dimension count")
	if r.err != nil {
		return t, r.err
	}
	if nd == 0 || nd > MaxDims {
		return t, fmt.Errorf("%w: gguf: tensor %q has %d dimensions (1 to %d)", ErrBad, t.Name, nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	n := uint64(1)
	for i := range t.Dims {
		t.Dims[i] = r.u64("tensor dimension")
		hi, lo := bits.Mul64(n, t.Dims[i])
		if r.err == nil && (hi != 0 || lo > math.MaxInt64) {
			return t, fmt.Errorf("%w: gguf: tensor %q: dimensions %v overflow", ErrBad, t.Name, t.Dims[:i+1])
		}
		n = lo
	}
	t.Type = Type(r.u32("tensor type"))
	t.Offset = r.u64("tensor offset")
	if r.err != nil {
		return t, fmt.Errorf("%w (tensor %q)", r.err, t.Name)
	}
	if t.Offset%align != 0 {
		return t, fmt.Errorf("%w: gguf: tensor %q: data offset %d is not a multiple of the alignment %d", ErrBad, t.Name, t.Offset, align)
	}
	if vals, size, ok := t.Type.Block(); ok {
		if t.Dims[0]%vals != 0 {
			return t, fmt.Errorf("%w: gguf: tensor %q: %s rows of %d values are not whole blocks of %d", ErrBad, t.Name, t.Type, t.Dims[0], vals)
		}
		t.Size = n / vals * size // n < 2^63, size < 2^9: no overflow after the division
	}
	return t, nil
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.keys[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data is the bytes of a tensor whose type has a known block size.
func (f *File) Data(t *TensorInfo) ([]byte, error) {
	if t.Size == 0 && t.Elems() != 0 {
		return nil, fmt.Errorf("%w: gguf: tensor %q has ggml type %s, whose layout is unknown", ErrBad, t.Name, t.Type)
	}
	if f.data == nil && t.Size != 0 {
		return nil, errors.New("gguf: file closed")
	}
	start := f.DataOffset + t.Offset // checked in Parse for a known type's size
	if start > uint64(len(f.data)) || t.Size > uint64(len(f.data))-start {
		return nil, fmt.Errorf("%w: gguf: tensor %q (%d bytes at data offset %d) lies outside the file", ErrBad, t.Name, t.Size, t.Offset)
	}
	return f.data[start : start+t.Size : start+t.Size], nil
}

// reader reads little-endian fields from b, remembering the first error.
type reader struct {
	b   []byte
	off uint64
	err error
}

func (r *reader) left() uint64 { return uint64(len(r.b)) - r.off }

// bytes returns the next n bytes (aliasing b).
func (r *reader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > r.left() {
		r.err = fmt.Errorf("%w: gguf: truncated: %s needs %d bytes at offset %d, %d left", ErrBad, what, n, r.off, r.left())
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) u8(what string) uint8 {
	if b := r.bytes(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if b := r.bytes(2, what); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.bytes(4, what); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if b := r.bytes(8, what); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// str reads a length-prefixed string; the length is checked against the
// bytes left before anything is copied.
func (r *reader) str(what string) string {
	n := r.u64(what + " length")
	return string(r.bytes(n, what))
}

// value reads one metadata value of type vt for key.
func (r *reader) value(vt ValueType, key string, depth int) any {
	switch vt {
	case ValueUint8:
		return r.u8(key)
	case ValueInt8:
		return int8(r.u8(key))
	case ValueUint16:
		return r.u16(key)
	case ValueInt16:
		return int16(r.u16(key))
	case ValueUint32:
		return r.u32(key)
	case ValueInt32:
		return int32(r.u32(key))
	case ValueFloat32:
		return math.Float32frombits(r.u32(key))
	case ValueUint64:
		return r.u64(key)
	case ValueInt64:
		return int64(r.u64(key))
	case ValueFloat64:
		return math.Float64frombits(r.u64(key))
	case ValueBool:
		b := r.u8(key)
		if r.err == nil && b > 1 {
			r.err = fmt.Errorf("%w: gguf: metadata %q: bool byte %d (want 0 or 1)", ErrBad, key, b)
		}
		return b == 1
	case ValueString:
		return r.str("metadata " + key)
	case ValueArray:
		return r.array(key, depth)
	}
	if r.err == nil {
		r.err = fmt.Errorf("%w: gguf: metadata %q has unknown value type %d", ErrBad, key, uint32(vt))
	}
	return nil
}

// array reads an array value: its element type, its count (checked
// against the bytes left: every element takes at least one byte, a string
// eight, an array twelve), then the elements as a typed slice.
func (r *reader) array(key string, depth int) any {
	et := ValueType(r.u32(key + " array type"))
	n := r.u64(key + " array length")
	if r.err != nil {
		return nil
	}
	if depth >= maxArrayDepth && et == ValueArray {
		r.err = fmt.Errorf("%w: gguf: metadata %q: arrays nested more than %d deep", ErrBad, key, maxArrayDepth)
		return nil
	}
	least := et.size()
	switch et {
	case ValueString:
		least = 8
	case ValueArray:
		least = 12
	}
	if least == 0 {
		r.err = fmt.Errorf("%w: gguf: metadata %q: array of unknown value type %d", ErrBad, key, uint32(et))
		return nil
	}
	if n > r.left()/least {
		r.err = fmt.Errorf("%w: gguf: truncated: metadata %q: array of %d %s values needs at least %d bytes, %d left", ErrBad, key, n, et, n*least, r.left())
		return nil
	}
	switch et {
	case ValueUint8:
		return readArray(r, n, key, r.u8)
	case ValueInt8:
		return readArray(r, n, key, func(w string) int8 { return int8(r.u8(w)) })
	case ValueUint16:
		return readArray(r, n, key, r.u16)
	case ValueInt16:
		return readArray(r, n, key, func(w string) int16 { return int16(r.u16(w)) })
	case ValueUint32:
		return readArray(r, n, key, r.u32)
	case ValueInt32:
		return readArray(r, n, key, func(w string) int32 { return int32(r.u32(w)) })
	case ValueFloat32:
		return readArray(r, n, key, func(w string) float32 { return math.Float32frombits(r.u32(w)) })
	case ValueUint64:
		return readArray(r, n, key, r.u64)
	case ValueInt64:
		return readArray(r, n, key, func(w string) int64 { return int64(r.u64(w)) })
	case ValueFloat64:
		return readArray(r, n, key, func(w string) float64 { return math.Float64frombits(r.u64(w)) })
	case ValueBool:
		return readArray(r, n, key, func(w string) bool { return r.value(ValueBool, w, depth).(bool) })
	case ValueString:
		return readArray(r, n, key, r.str)
	default: // ValueArray
		return readArray(r, n, key, func(w string) any { return r.array(w, depth+1) })
	}
}

// readArray reads n elements with read, stopping at the first error.
func readArray[T any](r *reader, n uint64, key string, read func(string) T) []T {
	out := make([]T, n) // n was checked against the bytes left
	for i := range out {
		out[i] = read(key)
		if r.err != nil {
			return nil
		}
	}
	return out
}
