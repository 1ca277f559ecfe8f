package checkpoint

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
)

// This file reads PyTorch checkpoints (torch.save of a state dict, as in
// pytorch_model.bin) in both of torch.save's formats:
//
//   - the zip archive of PyTorch 1.6 and later: <folder>/data.pkl is the
//     pickled state dict, and each storage is the uncompressed entry
//     <folder>/data/<key>;
//   - the legacy format of earlier versions (and of
//     _use_new_zipfile_serialization=False): five pickles in a row (a magic
//     number, a protocol version, system information, the state dict, the
//     list of storage keys), then each storage as an 8-byte element count
//     and its bytes.
//
// The state dict's pickle is read by pickle.go's data-only machine, with
// hooks that know exactly the names torch.save writes for tensors; any
// other name fails the load rather than run. The result is a header like a
// safetensors file's (tensor name, dtype, shape and byte range in the
// file), so the rest of the loader is the same for both formats and
// float32 weights are used in place from the mapped file.

// torchStorageDTypes maps torch's storage classes to safetensors dtype
// names (whose element sizes dtypeSizes has).
var torchStorageDTypes = map[string]string{
	"FloatStorage": "F32", "HalfStorage": "F16", "BFloat16Storage": "BF16",
	"DoubleStorage": "F64", "LongStorage": "I64", "IntStorage": "I32",
	"ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
	"BoolStorage": "BOOL",
}

// torchStorage is one storage a persistent id names. base is its byte
// offset in the file, known once the file's layout has been read; err says
// why its bytes are not all there (reported with the first tensor that
// uses it).
type torchStorage struct {
	key    string
	dtype  string
	numel  int64
	base   int64
	placed bool
	err    error
}

// torchTensor is what _rebuild_tensor_v2 describes: a view of a storage.
type torchTensor struct {
	storage *torchStorage
	offset  int64
	shape   []int64
	stride  []int64
}

// torchUnpickler holds the storages one pickle names, by key.
type torchUnpickler struct {
	storages map[string]*torchStorage
	legacy   bool
}

func (u *torchUnpickler) hooks() pickleHooks {
	return pickleHooks{call: u.call, build: u.build, persistentLoad: u.persistentLoad}
}

// persistentLoad reads ('storage', torch.XStorage, key, location, numel),
// with a sixth element (a view, which must be None) in the legacy format.
func (u *torchUnpickler) persistentLoad(pid any) (any, error) {
	t, ok := pid.(pyTuple)
	want := 5
	if u.legacy {
		want = 6
	}
	if !ok || len(t) != want || t[0] != "storage" {
		return nil, fmt.Errorf("persistent id %s is not a storage reference", describePy(pid))
	}
	g, ok := t[1].(pyGlobal)
	dtype := torchStorageDTypes[g.name]
	if !ok || g.module != "torch" || dtype == "" {
		return nil, fmt.Errorf("storage type %s is not supported", describePy(t[1]))
	}
	key, ok1 := t[2].(string)
	numel, ok2 := t[4].(int64)
	if !ok1 || !ok2 || numel < 0 || numel > math.MaxInt64/8 {
		return nil, fmt.Errorf("storage reference %s: want a string key and an element count", describePy(pid))
	}
	if u.legacy && t[5] != nil {
		return nil, fmt.Errorf("storage %q is a view of another storage (torch before 1.0); re-save the checkpoint", key)
	}
	if s, ok := u.storages[key]; ok {
		if s.dtype != dtype || s.numel != numel {
			return nil, fmt.Errorf("storage %q is named as %s of %d and as %s of %d elements", key, s.dtype, s.numel, dtype, numel)
		}
		return s, nil
	}
	s := &torchStorage{key: key, dtype: dtype, numel: numel}
	u.storages[key] = s
	return s, nil
}

// call allows the callables torch.save writes for a state dict and
// nothing else.
func (u *torchUnpickler) call(g pyGlobal, args pyTuple) (any, error) {
	switch g.String() {
	case "collections.OrderedDict":
		if len(args) != 0 {
			return nil, fmt.Errorf("OrderedDict with arguments is not supported")
		}
		return &pyDict{}, nil
	case "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor":
		// (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
		if len(args) < 4 {
			return nil, fmt.Errorf("%s with %d arguments, want at least 4", g, len(args))
		}
		s, ok := args[0].(*torchStorage)
		if !ok {
			return nil, fmt.Errorf("%s of a %s, not a storage", g, pyTypeName(args[0]))
		}
		offset, ok := args[1].(int64)
		shape, err1 := pyInts(args[2])
		stride, err2 := pyInts(args[3])
		if !ok || err1 != nil || err2 != nil || len(shape) != len(stride) {
			return nil, fmt.Errorf("%s: storage offset %s, size %s and stride %s are not integers of one rank",
				g, describePy(args[1]), describePy(args[2]), describePy(args[3]))
		}
		return &torchTensor{storage: s, offset: offset, shape: shape, stride: stride}, nil
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		if len(args) < 1 {
			return nil, fmt.Errorf("%s without arguments", g)
		}
		if _, ok := args[0].(*torchTensor); !ok {
			return nil, fmt.Errorf("%s of a %s, not a tensor", g, pyTypeName(args[0]))
		}
		return args[0], nil
	}
	return nil, fmt.Errorf("refusing to call %s: a checkpoint is read as data, and only tensors, dicts and OrderedDicts are allowed (nothing in the file is run)", g)
}

// build accepts the state an OrderedDict carries (a state dict's
// _metadata, the module versions), which the loader does not need.
func (u *torchUnpickler) build(obj, state any) (any, error) {
	if d, ok := obj.(*pyDict); ok {
		return d, nil
	}
	return nil, fmt.Errorf("BUILD of a %s is not supported", pyTypeName(obj))
}

func pyInts(v any) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("not a tuple")
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("not an int")
		}
		out[i] = n
	}
	return out, nil
}

// parseTorch reads the layout of a torch.save file whose bytes are data:
// every tensor of the state dict with its byte range in data. Like
// parseSafetensors it reads no tensor values and checks every range
// against the file, and its errors do not name the file.
func parseTorch(data []byte) (*stHeader, error) {
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		return parseTorchZip(data)
	}
	if len(data) > 262 && string(data[257:262]) == "ustar" {
		return nil, fmt.Errorf("this is torch.save's tar format of PyTorch before 0.4, which is not supported: load and save it again with a current PyTorch")
	}
	if len(data) > 1 && data[0] == opProto {
		return parseTorchLegacy(data)
	}
	if bytes.HasPrefix(data, []byte("L119547037146038801333356L\n")) { // the legacy magic number, pickled as text
		return nil, fmt.Errorf("this is torch.save's legacy format with pickle protocol 0 or 1, which is not supported (2 to 5 are): load and save it again with torch.save's default protocol")
	}
	return nil, fmt.Errorf("not a PyTorch checkpoint: neither a zip archive nor a pickle")
}

// torchHeader turns an unpickled state dict into tensor ranges. A tensor
// that is a contiguous view gets the byte range of its elements; any
// other view (transposed, sliced with a step) gets its strides, and its
// values are gathered when read, into at most fileSize bytes.
func torchHeader(v any, fileSize int64) (*stHeader, error) {
	d, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("the checkpoint holds a %s, not a state dict", pyTypeName(v))
	}
	tensors := map[string]*torchTensor{}
	for i, k := range d.keys {
		name, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("state dict key %s is not a string", describePy(k))
		}
		t, ok := d.vals[i].(*torchTensor)
		if !ok {
			return nil, fmt.Errorf("state dict entry %q is a %s, not a tensor", name, pyTypeName(d.vals[i]))
		}
		tensors[name] = t
	}
	// In name order, so that of several faults the same one is reported
	// whatever order the file lists them in (as for safetensors).
	h := &stHeader{Tensors: map[string]tensorInfo{}}
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		ti, err := tensors[name].info(name, fileSize)
		if err != nil {
			return nil, err
		}
		h.Tensors[name] = ti
	}
	return h, nil
}

// info checks that every element of t lies inside its storage and returns
// its range in the file. A view that is not contiguous may hold more
// elements than its storage (an expanded tensor has strides 0); gathered,
// it may not take more bytes than the file of fileSize bytes, so that a
// small file cannot make the loader allocate without bound.
func (t *torchTensor) info(name string, fileSize int64) (tensorInfo, error) {
	s := t.storage
	if !s.placed {
		if s.err == nil {
			return tensorInfo{}, fmt.Errorf("tensor %q: storage %q has no data in the file", name, s.key)
		}
		return tensorInfo{}, fmt.Errorf("tensor %q: %w", name, s.err)
	}
	es := dtypeSizes[s.dtype]
	if t.offset < 0 {
		return tensorInfo{}, fmt.Errorf("tensor %q: negative storage offset %d", name, t.offset)
	}
	count, last := int64(1), t.offset // elements, and the index of the last one
	for i, n := range t.shape {
		if n < 0 || t.stride[i] < 0 {
			return tensorInfo{}, fmt.Errorf("tensor %q: negative size or stride (size %v, stride %v)", name, t.shape, t.stride)
		}
		if n > 0 && count > math.MaxInt64/n {
			return tensorInfo{}, fmt.Errorf("tensor %q: size %v overflows", name, t.shape)
		}
		count *= n
		if n > 1 && t.stride[i] > 0 {
			if t.stride[i] > (math.MaxInt64-last)/(n-1) {
				return tensorInfo{}, fmt.Errorf("tensor %q: stride %v overflows", name, t.stride)
			}
			last += (n - 1) * t.stride[i]
		}
	}
	ti := tensorInfo{Name: name, DType: s.dtype, Shape: slices.Clone(t.shape)}
	if count == 0 {
		// torch checks no offset of an empty tensor (it may lie past the
		// storage, or overflow a byte offset): it has no bytes to read.
		ti.Begin, ti.End = s.base, s.base
		return ti, nil
	}
	if last >= s.numel {
		return tensorInfo{}, fmt.Errorf("tensor %q: offset %d, size %v and stride %v reach past its storage of %d elements",
			name, t.offset, t.shape, t.stride, s.numel)
	}
	ti.Begin = s.base + t.offset*es
	if contiguous(t.shape, t.stride) {
		ti.End = ti.Begin + count*es
	} else {
		if count > fileSize/es {
			return tensorInfo{}, fmt.Errorf("tensor %q: a view of size %v and stride %v would take %d elements of %s, more than the whole file of %d bytes holds (an expanded tensor?); save it with .contiguous()",
				name, t.shape, t.stride, count, s.dtype, fileSize)
		}
		ti.Stride = slices.Clone(t.stride)
		ti.End = s.base + (last+1)*es
	}
	return ti, nil
}

// contiguous reports whether stride is the row-major layout of shape
// (dimensions of size 1 may have any stride).
func contiguous(shape, stride []int64) bool {
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && stride[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// gather copies the elements of a strided tensor whose first element is
// at raw[0] into a new row-major buffer.
func gather(raw []byte, shape, stride []int64, es int64) []byte {
	count := int64(1)
	for _, n := range shape {
		count *= n
	}
	out := make([]byte, 0, count*es)
	idx := make([]int64, len(shape))
	for range count {
		var off int64
		for i, k := range idx {
			off += k * stride[i]
		}
		out = append(out, raw[off*es:(off+1)*es]...)
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}

// openTorch maps a torch.save file and reads its layout. Errors name the
// file; the caller must call close when no tensor that aliases the file is
// in use.
func openTorch(path string) (*stFile, error) {
	return openWeightsFile(path, "PyTorch checkpoint", nil, parseTorch)
}
