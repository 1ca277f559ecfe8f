package gpt2

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// maxHeaderBytes bounds the safetensors JSON header (the format's reference
// implementation uses the same 100 MB limit) so that a corrupt length prefix
// cannot make the loader allocate or parse gigabytes.
const maxHeaderBytes = 100 << 20

// dtypeSizes are the element sizes of the safetensors dtypes. The loader
// converts only F32, F16 and BF16; the others are known so that a header
// holding them (an int64 buffer, say) can still be size-checked.
var dtypeSizes = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}

// tensorInfo is one header entry. Begin and End are byte offsets into the
// data section (which starts right after the header). Stride is nil for
// row-major tensors, which fill [Begin, End); a PyTorch checkpoint may
// store a view with other strides (in elements), whose elements lie in
// [Begin, End) and are gathered when read.
type tensorInfo struct {
	Name   string
	DType  string
	Shape  []int64
	Begin  int64
	End    int64
	Stride []int64
}

// stHeader is a parsed and validated weights file header: a safetensors
// header, or the layout of a PyTorch checkpoint (torchfile.go).
type stHeader struct {
	DataStart int64 // offset of the data section in the file: 8 + header length (0 for PyTorch)
	Tensors   map[string]tensorInfo
}

type rawTensor struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// parseSafetensors parses and validates the header of a safetensors file
// whose first bytes are b and whose total size is fileSize (len(b) may be
// shorter: only the length prefix and the header need to be present). It
// checks everything the format allows to be checked without reading the
// data: the header size limit, that the header and every tensor's bytes lie
// inside the file, that offsets agree with dtype and shape, and that no two
// tensors overlap. Errors do not name the file; callers add it.
func parseSafetensors(b []byte, fileSize int64) (*stHeader, error) {
	if fileSize < 8 || len(b) < 8 {
		return nil, fmt.Errorf("truncated file: %d bytes, shorter than the 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > maxHeaderBytes {
		return nil, fmt.Errorf("header of %d bytes exceeds the %d-byte (100 MB) limit", n, maxHeaderBytes)
	}
	hlen := int64(n)
	if 8+hlen > fileSize || 8+hlen > int64(len(b)) {
		return nil, fmt.Errorf("truncated file: header claims %d bytes, file has %d after the length prefix", hlen, fileSize-8)
	}
	// JSON is UTF-8 (the reference implementation refuses anything else);
	// encoding/json would quietly read each bad byte as U+FFFD.
	if !utf8.Valid(b[8 : 8+hlen]) {
		return nil, fmt.Errorf("header is not valid UTF-8 (byte %d of the header)", invalidUTF8At(b[8:8+hlen]))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+hlen], &raw); err != nil {
		return nil, fmt.Errorf("header is not a JSON object: %w", err)
	}
	if name, ok := repeatedKey(b[8 : 8+hlen]); ok {
		return nil, fmt.Errorf("tensor %q appears twice in the header", name)
	}
	dataLen := fileSize - 8 - hlen
	h := &stHeader{DataStart: 8 + hlen, Tensors: make(map[string]tensorInfo, len(raw))}
	// In name order, so that a file with several faults always reports the
	// same one.
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		msg := raw[name]
		if name == "__metadata__" {
			// The format's metadata is text to text; the reference
			// implementation refuses anything else, so a file that
			// holds something else was not written by it.
			var meta map[string]string
			if err := json.Unmarshal(msg, &meta); err != nil {
				got := string(msg)
				if len(got) > 40 {
					got = strings.ToValidUTF8(got[:40], "") + "..."
				}
				return nil, fmt.Errorf("__metadata__ must be an object of strings, got %s", got)
			}
			continue
		}
		var rt rawTensor
		if err := json.Unmarshal(msg, &rt); err != nil {
			return nil, fmt.Errorf("tensor %q: bad header entry: %w", name, err)
		}
		if rt.DType == "" {
			return nil, fmt.Errorf("tensor %q: no dtype", name)
		}
		if len(rt.DataOffsets) != 2 {
			return nil, fmt.Errorf("tensor %q: data_offsets must have 2 entries, got %d", name, len(rt.DataOffsets))
		}
		begin, end := rt.DataOffsets[0], rt.DataOffsets[1]
		if begin < 0 || end < begin {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] out of range", name, begin, end)
		}
		if end > dataLen {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] out of range: the data section has %d bytes (truncated file?)", name, begin, end, dataLen)
		}
		numel := int64(1)
		for _, d := range rt.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %q: negative dimension in shape %v", name, rt.Shape)
			}
			if d != 0 && numel > math.MaxInt64/8/d {
				return nil, fmt.Errorf("tensor %q: shape %v is too large", name, rt.Shape)
			}
			numel *= d
		}
		if size, ok := dtypeSizes[rt.DType]; ok && numel*size != end-begin {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] out of range: shape %v of %s needs %d bytes, offsets span %d",
				name, begin, end, rt.Shape, rt.DType, numel*size, end-begin)
		}
		h.Tensors[name] = tensorInfo{Name: name, DType: rt.DType, Shape: rt.Shape, Begin: begin, End: end}
	}
	// Overlap check: two tensors overlap when each starts before the other
	// ends. An empty tensor occupies no bytes, but one strictly inside
	// another's range overlaps it too: no writer puts a tensor there (the
	// reference implementation wants the tensors back to back).
	list := slices.Collect(maps.Values(h.Tensors))
	sort.Slice(list, func(i, j int) bool {
		if list[i].Begin != list[j].Begin {
			return list[i].Begin < list[j].Begin
		}
		if list[i].End != list[j].End {
			return list[i].End < list[j].End
		}
		return list[i].Name < list[j].Name
	})
	// last is the tensor reaching furthest so far: any tensor that overlaps
	// an earlier one also overlaps it.
	last := -1
	for i, t := range list {
		if last >= 0 && t.Begin < list[last].End && list[last].Begin < t.End {
			p := list[last]
			return nil, fmt.Errorf("tensors %q [%d, %d] and %q [%d, %d] overlap",
				p.Name, p.Begin, p.End, t.Name, t.Begin, t.End)
		}
		if last < 0 || t.End > list[last].End {
			last = i
		}
	}
	return h, nil
}

// invalidUTF8At returns the offset of the first byte of b that does not
// start a valid UTF-8 character, or len(b).
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// repeatedKey returns the first top-level key of a JSON object (already
// known to parse) that occurs twice. json.Unmarshal keeps the last value
// of a repeated key without a word, which would silently drop one of two
// descriptions of a tensor.
func repeatedKey(js []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(js))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false // null: no keys
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return "", false
		}
		if seen[key] {
			return key, true
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// stFile is an open safetensors file: its bytes (memory-mapped where the
// platform allows) and its parsed header.
type stFile struct {
	path    string
	data    []byte // the whole file
	header  *stHeader
	release func() error
}

// openSafetensors maps path and parses its header. The caller must call
// close when no tensor that aliases the file is in use any more.
func openSafetensors(path string) (*stFile, error) {
	// Check the header length before mapping or reading the whole file, so
	// that an absurd prefix is reported as such.
	precheck := func(f *os.File) error {
		var prefix [8]byte
		if n, _ := f.ReadAt(prefix[:], 0); n == 8 {
			if hl := binary.LittleEndian.Uint64(prefix[:]); hl > maxHeaderBytes {
				return fmt.Errorf("header of %d bytes exceeds the %d-byte (100 MB) limit", hl, maxHeaderBytes)
			}
		}
		return nil
	}
	return openWeightsFile(path, "safetensors file", precheck, func(data []byte) (*stHeader, error) {
		return parseSafetensors(data, int64(len(data)))
	})
}

// openWeightsFile maps the weights file at path (kind names its format in
// errors), runs precheck on the open file when there is one, and reads
// the header with parse.
func openWeightsFile(path, kind string, precheck func(*os.File) error, parse func([]byte) (*stHeader, error)) (*stFile, error) {
	// A file that is missing or unreadable (a shard the index names, say)
	// is a fault of the checkpoint too: every error here matches
	// ErrBadCheckpoint.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%w: %s is a folder, not a %s", ErrBadCheckpoint, path, kind)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("%w: %s: file of %d bytes is too large for this platform", ErrBadCheckpoint, path, st.Size())
	}
	if precheck != nil {
		if err := precheck(f); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
		}
	}
	data, release, err := mapFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	h, err := parse(data)
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	return &stFile{path: path, data: data, header: h, release: release}, nil
}

func (f *stFile) close() error {
	if f.release == nil {
		return nil
	}
	err := f.release()
	f.release = nil
	f.data = nil
	return err
}

// float32s returns tensor name as float32 values after checking its shape.
// A little-endian F32 tensor at an aligned offset aliases the file's bytes
// (no copy: the memory stays shared with the page cache and read-only);
// anything else is converted into a new slice.
func (f *stFile) float32s(name string, shape []int64) ([]float32, error) {
	t, ok := f.header.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s: missing tensor %q", ErrBadCheckpoint, f.path, name)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%w: %s: tensor %q has shape %v, want %v", ErrBadCheckpoint, f.path, name, t.Shape, shape)
	}
	raw := f.data[f.header.DataStart+t.Begin : f.header.DataStart+t.End]
	if t.Stride != nil {
		raw = gather(raw, t.Shape, t.Stride, dtypeSizes[t.DType])
	}
	n := len(raw) / max(1, int(dtypeSizes[t.DType]))
	switch t.DType {
	case "F32":
		if len(raw) == 0 {
			return []float32{}, nil
		}
		if littleEndianHost() && uintptr(unsafe.Pointer(&raw[0]))%4 == 0 {
			return unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), n), nil
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	case "F16":
		out := make([]float32, n)
		for i := range out {
			out[i] = float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
		return out, nil
	case "BF16":
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s: tensor %q has unsupported dtype %s (want F32, F16 or BF16)", ErrBadCheckpoint, f.path, name, t.DType)
}

// littleEndianHost reports whether float32 values in memory have the byte
// order safetensors uses, so mapped F32 data can be used in place.
func littleEndianHost() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// float16ToFloat32 converts an IEEE 754 binary16 value exactly.
func float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal: value = mant * 2^-24, exact in float32.
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}

// float32ToFloat16 rounds to nearest even, as torch's .half() does. Used to
// write float16 test checkpoints.
func float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // inf / NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal or zero in half precision
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is still correct
	}
	return sign | uint16(half)
}

// float32ToBFloat16 rounds to nearest even, as torch's .bfloat16() does.
func float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it a NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
