package checkpoint

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

	"github.com/tinyserve/tinyserve/llm/tensor"
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
	// ErrBad.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBad, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBad, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%w: %s is a folder, not a %s", ErrBad, path, kind)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("%w: %s: file of %d bytes is too large for this platform", ErrBad, path, st.Size())
	}
	if precheck != nil {
		if err := precheck(f); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBad, path, err)
		}
	}
	data, release, err := mapFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBad, path, err)
	}
	h, err := parse(data)
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("%w: %s: %w", ErrBad, path, err)
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

// tensor returns the tensor called name after checking its shape (nil
// shape: any). A little-endian tensor at an aligned offset aliases the
// file's bytes (no copy: the memory stays shared with the page cache and
// read-only); a strided PyTorch view is gathered into a new slice.
func (f *stFile) tensor(name string, shape []int64) (tensor.Tensor, error) {
	t, ok := f.header.Tensors[name]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("%w: %s: missing tensor %q", ErrBad, f.path, name)
	}
	if shape != nil && !slices.Equal(t.Shape, shape) {
		return tensor.Tensor{}, fmt.Errorf("%w: %s: tensor %q has shape %v, want %v", ErrBad, f.path, name, t.Shape, shape)
	}
	dt := tensor.DType(t.DType)
	if dt.Size() == 0 {
		return tensor.Tensor{}, fmt.Errorf("%w: %s: tensor %q has unsupported dtype %s (want F32, F16 or BF16)", ErrBad, f.path, name, t.DType)
	}
	raw := f.data[f.header.DataStart+t.Begin : f.header.DataStart+t.End]
	if t.Stride != nil {
		raw = gather(raw, t.Shape, t.Stride, dtypeSizes[t.DType])
	}
	v, err := tensor.FromBytes(dt, raw, slices.Clone(t.Shape)...)
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("%w: %s: tensor %q: %w", ErrBad, f.path, name, err)
	}
	return v, nil
}
