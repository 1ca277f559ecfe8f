// Package gguf reads and writes GGUF files (version 3), the single-file
// model format of llama.cpp and ollama: a header, typed metadata
// (general.*, <arch>.*, tokenizer.ggml.*), tensor descriptions, then the
// tensors' data, each aligned to general.alignment.
//
// Read parses the header and metadata of a memory-mapped file and checks
// every count, length and offset against the file's size before using it,
// so a truncated or hostile file gets an error naming what is wrong, never
// a panic or an allocation larger than the file. File.Tensor hands out the
// weights as llm/tensor tensors aliasing the mapping: F32, F16, BF16 and
// Q8_0 as stored; Q4_0 converted to Q8_0 at load (exactly: a Q4_0 block
// is 32 values d·q with one float16 d and q in [−8, 7], which Q8_0 holds
// with the same d); any other ggml type is refused naming the tensor and
// the type.
//
// Write writes a GGUF file from metadata and tensors (F32, F16, BF16 or
// Q8_0); convert.go turns a tinyserve model into the tensors and metadata
// llama.cpp's own converter would write for it, and model.go (in
// llm/model) reads them back.
package gguf

import "fmt"

// Magic and Version are the header's first two fields.
const (
	Magic   = "GGUF"
	Version = 3
	// DefaultAlignment is the data alignment when the file does not set
	// general.alignment (ggml's GGUF_DEFAULT_ALIGNMENT).
	DefaultAlignment = 32
	// MaxDims is the most dimensions a ggml tensor has (GGML_MAX_DIMS).
	MaxDims = 4
)

// Type is a tensor's ggml type (ggml.h's enum ggml_type).
type Type uint32

// The ggml types. Only F32, F16, BF16, Q8_0 and Q4_0 can be loaded; the
// others are named so that a refusal says which type a file uses.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
)

// typeInfo is a ggml type's name and block: values per block and bytes per
// block (0 bytes when unknown here).
type typeInfo struct {
	name          string
	values, bytes uint64
}

// types are ggml's type traits (ggml.c's type_traits) for the types above.
var types = map[Type]typeInfo{
	TypeF32: {"F32", 1, 4}, TypeF16: {"F16", 1, 2}, TypeBF16: {"BF16", 1, 2}, TypeF64: {"F64", 1, 8},
	TypeI8: {"I8", 1, 1}, TypeI16: {"I16", 1, 2}, TypeI32: {"I32", 1, 4}, TypeI64: {"I64", 1, 8},
	TypeQ4_0: {"Q4_0", 32, 18}, TypeQ4_1: {"Q4_1", 32, 20}, TypeQ5_0: {"Q5_0", 32, 22}, TypeQ5_1: {"Q5_1", 32, 24},
	TypeQ8_0: {"Q8_0", 32, 34}, TypeQ8_1: {"Q8_1", 32, 36},
	TypeQ2_K: {"Q2_K", 256, 84}, TypeQ3_K: {"Q3_K", 256, 110}, TypeQ4_K: {"Q4_K", 256, 144}, TypeQ5_K: {"Q5_K", 256, 176},
	TypeQ6_K: {"Q6_K", 256, 210}, TypeQ8_K: {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66}, TypeIQ2_XS: {"IQ2_XS", 256, 74}, TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S: {"IQ1_S", 256, 50}, TypeIQ4_NL: {"IQ4_NL", 32, 18}, TypeIQ3_S: {"IQ3_S", 256, 110},
	TypeIQ2_S: {"IQ2_S", 256, 82}, TypeIQ4_XS: {"IQ4_XS", 256, 136}, TypeIQ1_M: {"IQ1_M", 256, 56},
	TypeTQ1_0: {"TQ1_0", 256, 54}, TypeTQ2_0: {"TQ2_0", 256, 66}, TypeMXFP4: {"MXFP4", 32, 17},
}

// String is ggml's name of the type (Q4_K, ...), or "type N" for a number
// ggml does not define.
func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// Block is the values per block and the bytes per block of t; ok is false
// for a type whose block this package does not know.
func (t Type) Block() (values, bytes uint64, ok bool) {
	ti, ok := types[t]
	return ti.values, ti.bytes, ok
}

// ValueType is a metadata value's type (gguf.h's enum gguf_type).
type ValueType uint32

// The metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String is the type's name as gguf.h spells it without the prefix.
func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("value type %d", uint32(v))
}

// size is the bytes of one value of a fixed-size type, 0 for string and
// array (and unknown types).
func (v ValueType) size() uint64 {
	switch v {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// KV is one metadata entry. Value is a uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64 or float64, or an array:
// a slice of one of those types, or []any of arrays (an array of arrays).
type KV struct {
	Key   string
	Value any
}
