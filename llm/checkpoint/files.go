// Package checkpoint reads the weight files of a Hugging Face checkpoint
// folder: safetensors (one file, or shards listed in
// model.safetensors.index.json) and PyTorch's pytorch_model.bin (one file or
// shards, read as data: nothing in a pickle is run), memory-mapped where the
// platform allows. It hands out tensors by name in their stored type
// (float32, float16, bfloat16); which names a model needs, and what they
// mean, is the model layer's business (llm/model).
//
// Every error about the files' contents matches ErrBad and names the file
// and, where there is one, the tensor.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// ErrBad is matched (errors.Is) by every error about a checkpoint's
// contents: malformed or truncated weight files, a missing or bad tensor,
// an unreadable shard. Errors that are not about the checkpoint (a missing
// folder, permission denied on it) wrap the os error instead.
var ErrBad = errors.New("bad checkpoint")

// The weight formats, vLLM's --load-format values that name files.
const (
	// FormatAuto reads safetensors, else pytorch_model.bin, the order in
	// which transformers looks for them.
	FormatAuto = "auto"
	// FormatSafetensors reads only model.safetensors or its shards.
	FormatSafetensors = "safetensors"
	// FormatPT reads only pytorch_model.bin or its shards.
	FormatPT = "pt"
)

// format is one way a folder may hold its weights.
type format struct {
	name, single, index string
	open                func(path string) (*stFile, error)
}

// formats are the ways a folder may hold its weights, in the order
// transformers looks for them.
var formats = []format{
	{FormatSafetensors, "model.safetensors", "model.safetensors.index.json", openSafetensors},
	{FormatPT, "pytorch_model.bin", "pytorch_model.bin.index.json", openTorch},
}

// formatsFor is the formats name reads, in order.
func formatsFor(name string) ([]format, error) {
	if name == "" || name == FormatAuto {
		return formats, nil
	}
	for _, f := range formats {
		if f.name == name {
			return []format{f}, nil
		}
	}
	return nil, fmt.Errorf("checkpoint: weight format %q: want %s, %s or %s", name, FormatAuto, FormatSafetensors, FormatPT)
}

// WeightFiles lists the file names a weight format looks for in a folder
// (the single file, then the shard index, for each format it reads): what
// an error or a download command names. An unknown format lists none.
func WeightFiles(format string) []string {
	fs, _ := formatsFor(format)
	var names []string
	for _, f := range fs {
		names = append(names, f.single, f.index)
	}
	return names
}

// HasWeights reports whether dir holds weights in the given format (one of
// the files WeightFiles names).
func HasWeights(dir, format string) bool {
	for _, name := range WeightFiles(format) {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// Files is an open checkpoint's weight files and, for a sharded one,
// which file holds which tensor. Call Close when no tensor that aliases
// them is in use any more.
type Files struct {
	dir     string
	files   map[string]*stFile // by base name
	weights map[string]string  // tensor name -> file base name (sharded)
	single  string             // base name of the one file (unsharded)
	index   string             // the index file's path (sharded)
}

// Open opens the weights of the checkpoint folder dir in the given format
// (FormatAuto, FormatSafetensors or FormatPT; "" is FormatAuto): the first
// of the single file and the shard index that is there, in the formats'
// order.
func Open(dir, format string) (*Files, error) {
	fs, err := formatsFor(format)
	if err != nil {
		return nil, err
	}
	for _, wf := range fs {
		single := filepath.Join(dir, wf.single)
		if _, err := os.Stat(single); err == nil {
			f, err := wf.open(single)
			if err != nil {
				return nil, err
			}
			return &Files{dir: dir, files: map[string]*stFile{wf.single: f}, single: wf.single}, nil
		}
		indexPath := filepath.Join(dir, wf.index)
		data, err := ReadJSONFile(indexPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return openShards(dir, indexPath, data, wf.open)
	}
	return nil, fmt.Errorf("%w: %s: no weights: none of %s is there", ErrBad, dir, strings.Join(WeightFiles(format), ", "))
}

// ReadJSONFile is os.ReadFile for a checkpoint's JSON files, except that a
// folder where the file belongs is a bad checkpoint, as a folder where the
// weights belong is: the read fails either way, but only this says which
// name is wrong and matches ErrBad. Other errors are the os error, wrapped
// with the path (fs.ErrNotExist for a missing file).
func ReadJSONFile(path string) ([]byte, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%w: %s is a folder, not a file", ErrBad, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return data, nil
}

// openShards opens the files a sharded checkpoint's index (its bytes are
// data) lists, each with open.
func openShards(dir, indexPath string, data []byte, open func(string) (*stFile, error)) (*Files, error) {
	cf := &Files{dir: dir, files: map[string]*stFile{}}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBad, indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%w: %s: empty weight_map", ErrBad, indexPath)
	}
	cf.weights = idx.WeightMap
	cf.index = indexPath
	for _, file := range slices.Sorted(maps.Values(idx.WeightMap)) {
		if _, ok := cf.files[file]; ok {
			continue
		}
		// filepath.Base("/") is "/" itself: without the last test that
		// shard was the checkpoint folder ("... is a folder, not a
		// safetensors file").
		if file != filepath.Base(file) || file == "." || file == ".." || file == string(filepath.Separator) {
			_ = cf.Close()
			return nil, fmt.Errorf("%w: %s: shard %q is not a file name in the checkpoint folder", ErrBad, indexPath, file)
		}
		f, err := open(filepath.Join(dir, file))
		if err != nil {
			_ = cf.Close()
			return nil, err
		}
		cf.files[file] = f
	}
	return cf, nil
}

// Close releases the files' memory mappings. Tensors read from them must
// not be used afterwards. Closing twice does nothing.
func (cf *Files) Close() error {
	var errs []error
	for _, f := range cf.files {
		errs = append(errs, f.close())
	}
	return errors.Join(errs...)
}

// FileNames are the files read, relative to the folder: the weight files
// and, for shards, their index.
func (cf *Files) FileNames() []string {
	var n []string
	for name := range cf.files {
		n = append(n, name)
	}
	if cf.index != "" {
		n = append(n, filepath.Base(cf.index))
	}
	sort.Strings(n)
	return n
}

// Names are the tensor names the checkpoint holds, sorted.
func (cf *Files) Names() []string {
	if cf.weights != nil {
		return slices.Sorted(maps.Keys(cf.weights))
	}
	return slices.Sorted(maps.Keys(cf.files[cf.single].header.Tensors))
}

// Has reports whether the checkpoint holds a tensor called name.
func (cf *Files) Has(name string) bool {
	_, ok := cf.file(name)
	return ok
}

func (cf *Files) file(name string) (*stFile, bool) {
	if cf.weights == nil {
		f := cf.files[cf.single]
		_, ok := f.header.Tensors[name]
		return f, ok
	}
	file, ok := cf.weights[name]
	if !ok {
		return nil, false
	}
	return cf.files[file], true
}

// Tensor returns the tensor called name in its stored type after checking
// its shape (nil: any shape). Every value must be finite: a NaN or an
// infinity in a weight would not fail anywhere later (it turns logits into
// NaN, which greedy decoding reads as token 0), so one pass at load names
// the tensor instead. The result may alias the file's memory mapping.
func (cf *Files) Tensor(name string, shape []int64) (tensor.Tensor, error) {
	f, ok := cf.file(name)
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("%w: %s: missing tensor %q", ErrBad, cf.Where(), name)
	}
	t, err := f.tensor(name, shape)
	if err != nil {
		return tensor.Tensor{}, err
	}
	if i, v, bad := t.FirstNonFinite(); bad {
		return tensor.Tensor{}, fmt.Errorf("%w: %s: tensor %q has a non-finite value (%v) at flat index %d", ErrBad, f.path, name, v, i)
	}
	return t, nil
}

// Shape is the stored shape of the tensor called name, or nil when there
// is none.
func (cf *Files) Shape(name string) []int64 {
	f, ok := cf.file(name)
	if !ok {
		return nil
	}
	return slices.Clone(f.header.Tensors[name].Shape)
}

// Where names the checkpoint in errors: its one weight file, or its index.
func (cf *Files) Where() string {
	if cf.weights != nil {
		return cf.index
	}
	return filepath.Join(cf.dir, cf.single)
}
