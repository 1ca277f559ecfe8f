package gpt2

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"

	"github.com/tinyserve/tinyserve/llm"
)

// Weights are a GPT-2 model's parameters in float32, in Hugging Face's
// layout. Matrices are row-major; the Conv1D matrices (attention and MLP) are
// stored in×out, so a layer computes y = x·W + b. Slices loaded from a
// float32 checkpoint may alias a read-only memory mapping: never write to
// them.
type Weights struct {
	WTE []float32 // token embeddings [VocabSize, NEmbd]
	WPE []float32 // position embeddings [NPositions, NEmbd]
	// Layers are the transformer blocks, in order.
	Layers []LayerWeights
	LNFW   []float32 // final LayerNorm weight [NEmbd]
	LNFB   []float32 // final LayerNorm bias [NEmbd]
	// LMHead is the output projection [VocabSize, NEmbd]: a separate
	// lm_head.weight when the checkpoint has one, otherwise the same slice
	// as WTE (tied embeddings, as in every released GPT-2).
	LMHead []float32
}

// LayerWeights are one transformer block's parameters.
type LayerWeights struct {
	LN1W, LN1B []float32 // ln_1 [NEmbd]
	// AttnW [NEmbd, 3*NEmbd] and AttnB [3*NEmbd]: c_attn, output q|k|v,
	// heads contiguous within each of q, k and v.
	AttnW, AttnB []float32
	// AttnProjW [NEmbd, NEmbd] and AttnProjB [NEmbd]: attention c_proj.
	AttnProjW, AttnProjB []float32
	LN2W, LN2B           []float32 // ln_2 [NEmbd]
	// FCW [NEmbd, NInner] and FCB [NInner]: mlp.c_fc.
	FCW, FCB []float32
	// ProjW [NInner, NEmbd] and ProjB [NEmbd]: mlp.c_proj.
	ProjW, ProjB []float32
}

// Model is a GPT-2 model: its configuration and weights. It is read-only
// once built, so one Model may back several backends. Call Close when done
// with a loaded model to unmap its files.
type Model struct {
	// Name is the model's id: the built-in name, a checkpoint folder's
	// base name, or the Hugging Face id it was found under (OpenWithEnv).
	Name string
	// Dir is the checkpoint folder the model was loaded from ("" for a
	// built-in model); its tokenizer files, if any, are there.
	Dir string
	// HubID and Revision say where in the local Hugging Face cache the
	// model was found (OpenAt): the repository id whose folder held it and
	// the snapshot's commit hash. Both are empty for a folder or a
	// built-in model.
	HubID, Revision string
	// Files are the files of Dir that Load read, relative to it and sorted:
	// config.json, generation_config.json when there is one, the weights
	// and their index. Together they determine the model.
	Files []string
	// Config is the model's shape and numerical settings.
	Config Config
	// RandomWeights is true for the built-in models, whose weights are
	// generated: their text is meaningless.
	RandomWeights bool
	// Defaults are the sampling defaults of the checkpoint's
	// generation_config.json (ReadGenerationConfig); a server uses them for
	// what a request leaves out. Set them to zero to use the API's.
	Defaults llm.SamplingDefaults
	// Weights are the parameters.
	Weights Weights

	release []func() error // unmaps the checkpoint's files
}

// Info describes the model for an engine. Backend is left empty: the
// engine's backend fills it in (CPUBackend.Info does).
func (m *Model) Info() llm.ModelInfo {
	info := llm.ModelInfo{
		ID:            m.Name,
		MaxModelLen:   m.Config.NPositions,
		VocabSize:     m.Config.VocabSize,
		EOSTokenID:    m.Config.EOSTokenID,
		RandomWeights: m.RandomWeights,
		Defaults:      m.Defaults,
	}
	if m.Dir != "" {
		info.Source = &llm.ModelSource{Dir: m.Dir, HubID: m.HubID, Revision: m.Revision, Files: slices.Clone(m.Files)}
	}
	return info
}

// NumParams is the number of distinct parameters (a tied LM head counts
// once).
func (m *Model) NumParams() int {
	w := &m.Weights
	n := len(w.WTE) + len(w.WPE) + len(w.LNFW) + len(w.LNFB)
	if !w.TiedHead() {
		n += len(w.LMHead)
	}
	for i := range w.Layers {
		for _, t := range w.Layers[i].tensors() {
			n += len(*t)
		}
	}
	return n
}

// Close releases the memory mappings of a loaded checkpoint. The model's
// weights must not be used afterwards. Closing a built-in model, or closing
// twice, does nothing.
func (m *Model) Close() error {
	var errs []error
	for _, r := range m.release {
		errs = append(errs, r())
	}
	m.release = nil
	return errors.Join(errs...)
}

// checkWeights verifies that every tensor has the length its shape needs,
// so a hand-built Model fails at construction rather than deep in Forward.
func (m *Model) checkWeights() error {
	if len(m.Weights.Layers) != m.Config.NLayer {
		return fmt.Errorf("gpt2: model %q has %d layers of weights, config says %d", m.Name, len(m.Weights.Layers), m.Config.NLayer)
	}
	w := m.Weights
	all := append(specs(m.Config, &w), tensorSpec{"lm_head.weight", []int64{int64(m.Config.VocabSize), int64(m.Config.NEmbd)}, &w.LMHead})
	for _, s := range all {
		n := int64(1)
		for _, d := range s.shape {
			n *= d
		}
		if int64(len(*s.dst)) != n {
			return fmt.Errorf("gpt2: model %q: tensor %q has %d values, shape %v needs %d", m.Name, s.name, len(*s.dst), s.shape, n)
		}
	}
	return nil
}

// TrimVocab makes the model use only its first n token ids, dropping the
// rest of wte and of the LM head (views, no copy). A checkpoint trained
// with its vocabulary padded past the tokenizer's (nanoGPT pads GPT-2's
// 50257 to 50304, a multiple of 64) has rows for ids no tokenizer can
// produce or decode; with them gone the model never samples one. Call it
// before a backend is made from the model.
func (m *Model) TrimVocab(n int) error {
	if n < 1 || n > m.Config.VocabSize {
		return fmt.Errorf("gpt2: cannot trim a vocabulary of %d ids to %d", m.Config.VocabSize, n)
	}
	if m.Config.EOSTokenID >= n || m.Config.BOSTokenID >= n {
		return fmt.Errorf("gpt2: the bos/eos token id (%d/%d) is past the first %d ids, which the tokenizer has", m.Config.BOSTokenID, m.Config.EOSTokenID, n)
	}
	c := m.Config.NEmbd
	tied := m.Weights.TiedHead()
	m.Weights.WTE = m.Weights.WTE[:n*c]
	if tied {
		m.Weights.LMHead = m.Weights.WTE
	} else {
		m.Weights.LMHead = m.Weights.LMHead[:n*c]
	}
	m.Config.VocabSize = n
	return nil
}

// TiedHead reports whether the LM head is wte itself (the same memory), as
// in every released GPT-2, rather than a separate lm_head.weight.
func (w *Weights) TiedHead() bool { return sameSlice(w.LMHead, w.WTE) }

func sameSlice(a, b []float32) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (l *LayerWeights) tensors() []*[]float32 {
	return []*[]float32{&l.LN1W, &l.LN1B, &l.AttnW, &l.AttnB, &l.AttnProjW, &l.AttnProjB,
		&l.LN2W, &l.LN2B, &l.FCW, &l.FCB, &l.ProjW, &l.ProjB}
}

// tensorSpec names one parameter as Hugging Face does (without the
// "transformer." prefix) with its shape and where it goes in Weights.
type tensorSpec struct {
	name  string
	shape []int64
	dst   *[]float32
}

// specs lists every parameter of w for shape c, in the order of Hugging
// Face's state dict.
func specs(c Config, w *Weights) []tensorSpec {
	V, P, C, I := int64(c.VocabSize), int64(c.NPositions), int64(c.NEmbd), int64(c.NInner)
	s := []tensorSpec{{"wte.weight", []int64{V, C}, &w.WTE}, {"wpe.weight", []int64{P, C}, &w.WPE}}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := "h." + strconv.Itoa(i) + "."
		s = append(s,
			tensorSpec{p + "ln_1.weight", []int64{C}, &l.LN1W},
			tensorSpec{p + "ln_1.bias", []int64{C}, &l.LN1B},
			tensorSpec{p + "attn.c_attn.weight", []int64{C, 3 * C}, &l.AttnW},
			tensorSpec{p + "attn.c_attn.bias", []int64{3 * C}, &l.AttnB},
			tensorSpec{p + "attn.c_proj.weight", []int64{C, C}, &l.AttnProjW},
			tensorSpec{p + "attn.c_proj.bias", []int64{C}, &l.AttnProjB},
			tensorSpec{p + "ln_2.weight", []int64{C}, &l.LN2W},
			tensorSpec{p + "ln_2.bias", []int64{C}, &l.LN2B},
			tensorSpec{p + "mlp.c_fc.weight", []int64{C, I}, &l.FCW},
			tensorSpec{p + "mlp.c_fc.bias", []int64{I}, &l.FCB},
			tensorSpec{p + "mlp.c_proj.weight", []int64{I, C}, &l.ProjW},
			tensorSpec{p + "mlp.c_proj.bias", []int64{C}, &l.ProjB},
		)
	}
	return append(s, tensorSpec{"ln_f.weight", []int64{C}, &w.LNFW}, tensorSpec{"ln_f.bias", []int64{C}, &w.LNFB})
}

// Load reads a Hugging Face GPT-2 checkpoint folder: config.json plus
// model.safetensors, or shards listed in model.safetensors.index.json, or
// else PyTorch's pytorch_model.bin or the shards its
// pytorch_model.bin.index.json lists (read as data: nothing in a pickle is
// run; see torchfile.go). Tensors may be float32, float16 or bfloat16 (computed in float32), named
// with or without the "transformer." prefix; legacy attn.bias and
// attn.masked_bias buffers are ignored. The LM head is tied to wte unless
// config.json sets tie_word_embeddings false, when lm_head.weight must be
// there; with a tied head an lm_head.weight is ignored, as transformers and
// vLLM ignore it. float32 tensors are used in place from a
// read-only memory mapping; call Close to release it.
//
// Errors about the checkpoint match ErrBadCheckpoint and name the file and
// the tensor: missing tensor, wrong shape, unsupported dtype, truncated file,
// header offsets out of range or overlapping, a header over 100 MB, a NaN
// or infinite weight, a tensor that is not a parameter of the config (an
// unknown name, a layer past n_layer), a missing or unreadable shard.
func Load(dir string) (*Model, error) { return LoadFormat(dir, LoadAuto) }

// The load formats, vLLM's --load-format values that a GPT-2 folder can
// take.
const (
	// LoadAuto reads safetensors, else pytorch_model.bin (Load's order).
	LoadAuto = "auto"
	// LoadSafetensors reads only model.safetensors or its shards.
	LoadSafetensors = "safetensors"
	// LoadPT reads only pytorch_model.bin or its shards.
	LoadPT = "pt"
	// LoadDummy reads only config.json (and generation_config.json) and
	// makes random weights of that shape, as vLLM's dummy format does for
	// profiling: the model is marked RandomWeights.
	LoadDummy = "dummy"
)

// LoadFormats lists the load formats in the order --help gives them.
func LoadFormats() []string { return []string{LoadAuto, LoadSafetensors, LoadPT, LoadDummy} }

// LoadFormat is Load reading the weights in the given format (LoadAuto,
// LoadSafetensors, LoadPT or LoadDummy; "" means LoadAuto).
func LoadFormat(dir, format string) (*Model, error) {
	formats, err := weightFormatsFor(format)
	if err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	defaults, err := ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	name := folderName(dir)
	if format == LoadDummy {
		m, err := NewRandom(name, cfg, BuiltinSeed, 0.02)
		if err != nil {
			return nil, err
		}
		m.Dir, m.Defaults, m.Files = dir, defaults, configFiles(dir, nil)
		return m, nil
	}
	files, err := openCheckpointFiles(dir, formats)
	if err != nil {
		return nil, err
	}
	m := &Model{Name: name, Dir: dir, Config: cfg, Defaults: defaults, Files: configFiles(dir, files.names())}
	for _, f := range files.files {
		m.release = append(m.release, f.close)
	}
	m.Weights.Layers = make([]LayerWeights, cfg.NLayer)
	known := map[string]bool{"lm_head.weight": true}
	for _, s := range specs(cfg, &m.Weights) {
		known[s.name] = true
	}
	if err := files.checkNames(known, cfg.NLayer); err != nil {
		_ = m.Close()
		return nil, err
	}
	for _, s := range loadOrder(cfg, &m.Weights) {
		if s.name == "lm_head.weight" && !files.has(s.name) {
			_ = m.Close()
			return nil, fmt.Errorf("%w: %s: missing tensor \"lm_head.weight\": config.json sets tie_word_embeddings false, so the output layer is not wte",
				ErrBadCheckpoint, files.where())
		}
		v, err := files.float32s(s.name, s.shape)
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		*s.dst = v
	}
	if !cfg.SeparateLMHead {
		m.Weights.LMHead = m.Weights.WTE
	}
	return m, nil
}

// loadOrder is the tensors Load reads into w, lm_head.weight included when
// the config unties it, in name order: a checkpoint with faults in several
// tensors then names the same one, the first by name, whatever kind each
// fault is (docs/gpt2.md, Errors), as the header's checks do.
func loadOrder(cfg Config, w *Weights) []tensorSpec {
	s := specs(cfg, w)
	if cfg.SeparateLMHead {
		s = append(s, tensorSpec{"lm_head.weight", []int64{int64(cfg.VocabSize), int64(cfg.NEmbd)}, &w.LMHead})
	}
	slices.SortFunc(s, func(a, b tensorSpec) int { return strings.Compare(a.name, b.name) })
	return s
}

// folderName is the model's name for a checkpoint folder: its base name,
// or for "." or "../" the folder's own name, not the path's last element.
func folderName(dir string) string {
	name := filepath.Base(filepath.Clean(dir))
	if name == "." || name == ".." || name == string(filepath.Separator) {
		if abs, err := filepath.Abs(dir); err == nil && filepath.Base(abs) != string(filepath.Separator) {
			name = filepath.Base(abs)
		}
	}
	return name
}

// configFiles is weights plus the config files of dir that Load reads,
// sorted: what Model.Files lists.
func configFiles(dir string, weights []string) []string {
	files := append(weights, "config.json")
	if hfhub.IsFile(filepath.Join(dir, GenerationConfigFile)) {
		files = append(files, GenerationConfigFile)
	}
	sort.Strings(files)
	return files
}

// checkpointFiles is the set of weight files of one checkpoint and,
// for sharded checkpoints, which file holds which tensor.
type checkpointFiles struct {
	dir      string
	files    map[string]*stFile // by base name
	weights  map[string]string  // tensor name -> file base name (sharded)
	single   string             // base name of the one file (unsharded)
	indexErr string             // the index file's path, for errors
}

// weightFormats are the ways a folder may hold its weights, in the order
// transformers looks for them: safetensors (one file, then shards), then
// PyTorch's pytorch_model.bin (one file, then shards).
var weightFormats = []weightFormat{
	{LoadSafetensors, "model.safetensors", "model.safetensors.index.json", openSafetensors},
	{LoadPT, "pytorch_model.bin", "pytorch_model.bin.index.json", openTorch},
}

// weightFormat is one way a folder may hold its weights.
type weightFormat struct {
	name, single, index string
	open                func(path string) (*stFile, error)
}

// weightFormatsFor is the weight formats a load format reads, in order;
// none for LoadDummy.
func weightFormatsFor(format string) ([]weightFormat, error) {
	switch format {
	case "", LoadAuto:
		return weightFormats, nil
	case LoadDummy:
		return nil, nil
	}
	for _, wf := range weightFormats {
		if wf.name == format {
			return []weightFormat{wf}, nil
		}
	}
	return nil, fmt.Errorf("gpt2: load format %q: want one of %s", format, strings.Join(LoadFormats(), ", "))
}

func openCheckpointFiles(dir string, formats []weightFormat) (*checkpointFiles, error) {
	for _, wf := range formats {
		single := filepath.Join(dir, wf.single)
		if _, err := os.Stat(single); err == nil {
			f, err := wf.open(single)
			if err != nil {
				return nil, err
			}
			return &checkpointFiles{dir: dir, files: map[string]*stFile{wf.single: f}, single: wf.single}, nil
		}
		indexPath := filepath.Join(dir, wf.index)
		data, err := readCheckpointFile(indexPath)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if errors.Is(err, ErrBadCheckpoint) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("gpt2: %w", err)
		}
		return openShards(dir, indexPath, data, wf.open)
	}
	var names []string
	for _, wf := range formats {
		names = append(names, wf.single, wf.index)
	}
	return nil, fmt.Errorf("%w: %s: no weights: none of %s is there", ErrBadCheckpoint, dir, strings.Join(names, ", "))
}

// openShards opens the files a sharded checkpoint's index (its bytes are
// data) lists, each with open.
func openShards(dir, indexPath string, data []byte, open func(string) (*stFile, error)) (*checkpointFiles, error) {
	cf := &checkpointFiles{dir: dir, files: map[string]*stFile{}}
	closeAll := func() {
		for _, f := range cf.files {
			_ = f.close()
		}
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%w: %s: empty weight_map", ErrBadCheckpoint, indexPath)
	}
	cf.weights = idx.WeightMap
	cf.indexErr = indexPath
	names := make([]string, 0, len(idx.WeightMap))
	for _, file := range idx.WeightMap {
		names = append(names, file)
	}
	sort.Strings(names)
	for _, file := range names {
		if _, ok := cf.files[file]; ok {
			continue
		}
		// filepath.Base("/") is "/" itself: without the last test that
		// shard was the checkpoint folder ("... is a folder, not a
		// safetensors file").
		if file != filepath.Base(file) || file == "." || file == ".." || file == string(filepath.Separator) {
			closeAll()
			return nil, fmt.Errorf("%w: %s: shard %q is not a file name in the checkpoint folder", ErrBadCheckpoint, indexPath, file)
		}
		f, err := open(filepath.Join(dir, file))
		if err != nil {
			closeAll()
			return nil, err
		}
		cf.files[file] = f
	}
	return cf, nil
}

// names are the files read, relative to the folder: the weight files and,
// for shards, their index.
func (cf *checkpointFiles) names() []string {
	var n []string
	for name := range cf.files {
		n = append(n, name)
	}
	if cf.indexErr != "" {
		n = append(n, filepath.Base(cf.indexErr))
	}
	return n
}

// lookup finds which file holds the tensor called name, with or without the
// "transformer." prefix, and the key it is stored under.
func (cf *checkpointFiles) lookup(name string) (*stFile, string, bool) {
	for _, key := range []string{name, "transformer." + name} {
		if cf.weights == nil {
			f := cf.files[cf.single]
			if _, ok := f.header.Tensors[key]; ok {
				return f, key, true
			}
			continue
		}
		if file, ok := cf.weights[key]; ok {
			return cf.files[file], key, true
		}
	}
	return nil, "", false
}

func (cf *checkpointFiles) has(name string) bool {
	_, _, ok := cf.lookup(name)
	return ok
}

func (cf *checkpointFiles) float32s(name string, shape []int64) ([]float32, error) {
	f, key, ok := cf.lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s: missing tensor %q", ErrBadCheckpoint, cf.where(), name)
	}
	v, err := f.float32s(key, shape)
	if err != nil {
		return nil, err
	}
	// A NaN or an infinity in a weight would not fail anywhere later: it
	// turns logits into NaN, which greedy decoding reads as token 0 and
	// sampling as EOS. One pass at load names the tensor instead.
	for i, x := range v {
		if x-x != 0 {
			return nil, fmt.Errorf("%w: %s: tensor %q has a non-finite value (%v) at flat index %d", ErrBadCheckpoint, f.path, key, x, i)
		}
	}
	return v, nil
}

// where names the checkpoint in errors: its one file, or its index.
func (cf *checkpointFiles) where() string {
	if cf.weights != nil {
		return cf.indexErr
	}
	return filepath.Join(cf.dir, cf.single)
}

// checkNames fails on the first tensor name (in sorted order) that is not a
// parameter of this config, nor lm_head.weight, nor a legacy attention
// buffer: as in vLLM's loader, an unknown tensor or a layer past n_layer
// means the config and the weights do not belong together, and silently
// dropping it would serve a different model. A parameter stored both with
// and without the "transformer." prefix fails too: only one of the two
// would be used, without a word about the other.
func (cf *checkpointFiles) checkNames(known map[string]bool, nLayer int) error {
	var names []string
	if cf.weights != nil {
		names = slices.Collect(maps.Keys(cf.weights))
	} else {
		names = slices.Collect(maps.Keys(cf.files[cf.single].header.Tensors))
	}
	slices.Sort(names)
	stored := map[string]string{} // parameter -> the key it is stored under
	for _, key := range names {
		n := strings.TrimPrefix(key, "transformer.")
		if !known[n] && !strings.HasSuffix(n, ".attn.bias") && !strings.HasSuffix(n, ".attn.masked_bias") {
			return fmt.Errorf("%w: %s: unexpected tensor %q: not a parameter of a GPT-2 with this config.json (n_layer %d); the config and the weights do not match",
				ErrBadCheckpoint, cf.where(), n, nLayer)
		}
		if other, ok := stored[n]; ok {
			return fmt.Errorf("%w: %s: tensor %q is stored twice, as %q and %q", ErrBadCheckpoint, cf.where(), n, other, key)
		}
		stored[n] = key
	}
	return nil
}

// WriteCheckpoint writes m as a Hugging Face checkpoint folder that Load,
// transformers and other engines read: dir/config.json and a float32
// dir/model.safetensors with a tied LM head (lm_head.weight is written, and
// tie_word_embeddings set false, only when the model's head is not tied). dir is created if needed; existing
// files are replaced.
func (m *Model) WriteCheckpoint(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	w := m.Weights
	c := m.Config
	c.SeparateLMHead = !w.TiedHead()
	cfg, err := marshalConfig(c)
	if err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(cfg, '\n'), 0o644); err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	var ts []namedTensor
	for _, s := range specs(m.Config, &w) {
		ts = append(ts, namedTensor{name: s.name, dtype: "F32", shape: s.shape, data: *s.dst})
	}
	if c.SeparateLMHead {
		ts = append(ts, namedTensor{name: "lm_head.weight", dtype: "F32",
			shape: []int64{int64(m.Config.VocabSize), int64(m.Config.NEmbd)}, data: w.LMHead})
	}
	return writeSafetensorsFile(filepath.Join(dir, "model.safetensors"), ts)
}

// namedTensor is one tensor to write: float32 values stored as dtype (F32,
// F16 or BF16).
type namedTensor struct {
	name  string
	dtype string
	shape []int64
	data  []float32
}

// writeSafetensorsFile writes tensors contiguously in the given order, with
// a space-padded header as PyTorch's safetensors writer produces.
func writeSafetensorsFile(path string, ts []namedTensor) error {
	var hdr strings.Builder
	hdr.WriteString(`{"__metadata__":{"format":"pt"}`)
	var off int64
	for _, t := range ts {
		size := int64(len(t.data)) * dtypeSizes[t.dtype]
		shape, _ := json.Marshal(t.shape)
		fmt.Fprintf(&hdr, `,%q:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, t.name, t.dtype, shape, off, off+size)
		off += size
	}
	hdr.WriteString("}")
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	buf := make([]byte, 8, 1<<20)
	binary.LittleEndian.PutUint64(buf, uint64(hdr.Len()))
	buf = append(buf, hdr.String()...)
	flush := func() error {
		_, err := f.Write(buf)
		buf = buf[:0]
		return err
	}
	for _, t := range ts {
		for _, v := range t.data {
			switch t.dtype {
			case "F32":
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			case "F16":
				buf = binary.LittleEndian.AppendUint16(buf, float32ToFloat16(v))
			case "BF16":
				buf = binary.LittleEndian.AppendUint16(buf, float32ToBFloat16(v))
			default:
				f.Close()
				return fmt.Errorf("gpt2: cannot write dtype %s", t.dtype)
			}
			if len(buf) >= 1<<20-8 {
				if err := flush(); err != nil {
					f.Close()
					return fmt.Errorf("gpt2: %w", err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		f.Close()
		return fmt.Errorf("gpt2: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	return nil
}
