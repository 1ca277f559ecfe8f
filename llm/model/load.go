package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
	"github.com/tinyserve/tinyserve/llm/checkpoint"
)

// The load formats, vLLM's --load-format values.
const (
	// LoadAuto reads safetensors, else pytorch_model.bin (Load's order).
	LoadAuto = checkpoint.FormatAuto
	// LoadSafetensors reads only model.safetensors or its shards.
	LoadSafetensors = checkpoint.FormatSafetensors
	// LoadPT reads only pytorch_model.bin or its shards.
	LoadPT = checkpoint.FormatPT
	// LoadDummy reads only config.json (and generation_config.json) and
	// makes random weights of that shape, as vLLM's dummy format does for
	// profiling: the model is marked RandomWeights.
	LoadDummy = "dummy"
)

// LoadFormats lists the load formats in the order --help gives them.
func LoadFormats() []string { return []string{LoadAuto, LoadSafetensors, LoadPT, LoadDummy} }

// checkLoadFormat refuses a load format that is not one of LoadFormats.
func checkLoadFormat(format string) error {
	if format == "" || slices.Contains(LoadFormats(), format) {
		return nil
	}
	return fmt.Errorf("model: load format %q: want one of %s", format, strings.Join(LoadFormats(), ", "))
}

// LoadConfig reads and parses dir/config.json.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := checkpoint.ReadJSONFile(path)
	if err != nil {
		if errors.Is(err, ErrBadCheckpoint) {
			return Config{}, err
		}
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() && errors.Is(err, fs.ErrNotExist) {
			// The folder exists but is not a checkpoint.
			return Config{}, fmt.Errorf("%w: %s: no config.json", ErrBadCheckpoint, dir)
		}
		return Config{}, fmt.Errorf("model: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrBadCheckpoint, path, err)
	}
	return c, nil
}

// MarshalConfig writes c as a config.json that transformers and
// ParseConfig both read.
func MarshalConfig(c Config) ([]byte, error) {
	var m map[string]any
	if c.Arch == ArchGPT2 {
		m = marshalGPT2(&c)
	} else {
		m = marshalLlama(&c)
	}
	if c.BOSTokenID >= 0 {
		m["bos_token_id"] = c.BOSTokenID
	} else {
		m["bos_token_id"] = nil
	}
	switch len(c.EOSTokenIDs) {
	case 0:
		m["eos_token_id"] = nil
	case 1:
		m["eos_token_id"] = c.EOSTokenIDs[0]
	default:
		m["eos_token_id"] = c.EOSTokenIDs
	}
	if c.TorchDType != "" {
		m["torch_dtype"] = c.TorchDType
	}
	return json.MarshalIndent(m, "", "  ")
}

// Load reads a Hugging Face checkpoint folder of any supported
// architecture: config.json plus model.safetensors, or shards listed in
// model.safetensors.index.json, or else PyTorch's pytorch_model.bin or its
// shards (read as data: nothing in a pickle is run). Tensors keep their
// stored type (float32, float16 or bfloat16) and alias the files' read-only
// memory mappings; call Close to release them. The LM head is tied to the
// embedding when config.json says so (an lm_head.weight is then ignored, as
// transformers and vLLM ignore it); otherwise lm_head.weight must be there.
//
// Errors about the checkpoint match ErrBadCheckpoint and name the file and
// the tensor: missing tensor, wrong shape or unsupported dtype, truncated
// file, a NaN or infinite weight, a tensor that is not a parameter of the
// config (an unknown name, a layer past the config's count), a missing or
// unreadable shard, a config field tinyserve does not implement.
func Load(dir string) (*Model, error) { return LoadFormat(dir, LoadAuto) }

// LoadFormat is Load reading the weights in the given format (LoadAuto,
// LoadSafetensors, LoadPT or LoadDummy; "" means LoadAuto).
func LoadFormat(dir, format string) (*Model, error) {
	if err := checkLoadFormat(format); err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	gen, err := ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := checkIDs(gen.EOSTokenIDs, cfg.VocabSize, filepath.Join(dir, GenerationConfigFile)); err != nil {
		return nil, err
	}
	m := &Model{Name: folderName(dir), Source: Source{Dir: dir}, Config: cfg, Defaults: gen.Defaults, GenerationEOS: gen.EOSTokenIDs}
	if format == LoadDummy {
		r, err := NewRandom(m.Name, cfg, RandomOptions{Seed: BuiltinSeed})
		if err != nil {
			return nil, err
		}
		m.Weights, m.RandomWeights = r.Weights, true
		m.Files = configFiles(dir, nil)
		return m, nil
	}
	files, err := checkpoint.Open(dir, format)
	if err != nil {
		return nil, err
	}
	m.release = append(m.release, files.Close)
	m.Files = configFiles(dir, files.FileNames())
	if err := m.readWeights(files); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}

func checkIDs(ids []int, vocab int, path string) error {
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("%w: %s: eos_token_id %d out of vocabulary range [0, %d)", ErrBadCheckpoint, path, id, vocab)
		}
	}
	return nil
}

// readWeights reads every parameter of m's config from files.
func (m *Model) readWeights(files *checkpoint.Files) error {
	cfg := &m.Config
	m.Weights = NewWeights(cfg)
	ps := params(cfg, &m.Weights)
	if err := checkNames(files, cfg, ps); err != nil {
		return err
	}
	// In name order: a checkpoint with faults in several tensors then
	// names the same one, the first by name, whatever kind each fault is.
	slices.SortFunc(ps, func(a, b param) int { return strings.Compare(a.name, b.name) })
	for _, p := range ps {
		key, ok := storedKey(files, cfg.Arch, p.name)
		if !ok {
			if p.name == "lm_head.weight" {
				return fmt.Errorf("%w: %s: missing tensor \"lm_head.weight\": config.json sets tie_word_embeddings false, so the output layer is not the embedding",
					ErrBadCheckpoint, files.Where())
			}
			return fmt.Errorf("%w: %s: missing tensor %q", ErrBadCheckpoint, files.Where(), p.name)
		}
		t, err := files.Tensor(key, p.shape)
		if err != nil {
			return err
		}
		*p.dst = t
	}
	if cfg.TiedEmbeddings {
		m.Weights.LMHead = m.Weights.Embed
	}
	return nil
}

// storedKey is the checkpoint key parameter name is stored under.
func storedKey(files *checkpoint.Files, arch Arch, name string) (string, bool) {
	for _, k := range keys(arch, name) {
		if files.Has(k) {
			return k, true
		}
	}
	return "", false
}

// checkNames fails on the first tensor name (in sorted order) that is not
// a parameter of this config, nor lm_head.weight, nor a known buffer: as in
// vLLM's loader, an unknown tensor or a layer past the config's count
// means the config and the weights do not belong together, and silently
// dropping it would serve a different model. A parameter stored under two
// of its keys fails too: only one would be used.
func checkNames(files *checkpoint.Files, cfg *Config, ps []param) error {
	known := map[string]string{"lm_head.weight": "lm_head.weight"} // key -> parameter
	for _, p := range ps {
		for _, k := range keys(cfg.Arch, p.name) {
			known[k] = p.name
		}
	}
	stored := map[string]string{} // parameter -> the key it is stored under
	for _, key := range files.Names() {
		name, ok := known[key]
		if !ok {
			if ignored(cfg.Arch, key) {
				continue
			}
			return fmt.Errorf("%w: %s: unexpected tensor %q: not a parameter of a %s with this config.json (%d layers); the config and the weights do not match",
				ErrBadCheckpoint, files.Where(), key, cfg.Architecture, cfg.Layers)
		}
		if other, ok := stored[name]; ok {
			return fmt.Errorf("%w: %s: tensor %q is stored twice, as %q and %q", ErrBadCheckpoint, files.Where(), name, other, key)
		}
		stored[name] = key
	}
	return nil
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
	files := append(slices.Clone(weights), "config.json")
	if hfhub.IsFile(filepath.Join(dir, GenerationConfigFile)) {
		files = append(files, GenerationConfigFile)
	}
	sort.Strings(files)
	return files
}
