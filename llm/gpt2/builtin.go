package gpt2

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Names of the built-in models. Both have generated random weights (their
// text is meaningless) and GPT-2's real vocabulary, so GPT-2's tokenizer
// works with them.
const (
	// BuiltinTiny is the default model: 4 layers, width 64, 4 heads, 1024
	// positions, vocabulary 50257. It builds in a few tens of milliseconds.
	BuiltinTiny = "tiny-gpt2"
	// Builtin124M has the shape of OpenAI's GPT-2 small (12 layers, width
	// 768, 12 heads, 1024 positions, 124M parameters), for benchmarks.
	Builtin124M = "gpt2-124m-random"
)

// BuiltinSeed is the seed the built-in models' weights are generated from,
// fixed so that every run and every machine gets the same weights.
const BuiltinSeed = 20240601

// BuiltinNames lists the built-in model names, the default first.
func BuiltinNames() []string { return []string{BuiltinTiny, Builtin124M} }

// IsBuiltin reports whether name is a built-in model rather than a folder.
func IsBuiltin(name string) bool { return name == BuiltinTiny || name == Builtin124M }

// BuiltinConfig returns the shape of a built-in model.
func BuiltinConfig(name string) (Config, error) {
	c := Config{
		VocabSize: 50257, NPositions: 1024, LayerNormEpsilon: 1e-5, Activation: GeluTanh,
		ScaleAttnWeights: true, BOSTokenID: 50256, EOSTokenID: 50256,
	}
	switch name {
	case BuiltinTiny:
		c.NLayer, c.NEmbd, c.NHead = 4, 64, 4
	case Builtin124M:
		c.NLayer, c.NEmbd, c.NHead = 12, 768, 12
	default:
		return Config{}, fmt.Errorf("gpt2: unknown built-in model %q (built-in: %s, %s)", name, BuiltinTiny, Builtin124M)
	}
	err := c.Validate()
	return c, err
}

// Builtin generates a built-in model (BuiltinTiny or Builtin124M) from
// BuiltinSeed. tiny-gpt2 uses weight scale 0.1, so that its continuations
// vary instead of repeating one token; gpt2-124m-random uses GPT-2's 0.02.
func Builtin(name string) (*Model, error) {
	cfg, err := BuiltinConfig(name)
	if err != nil {
		return nil, err
	}
	std := 0.02
	if name == BuiltinTiny {
		std = 0.1
	}
	return NewRandom(name, cfg, BuiltinSeed, std)
}

// NewRandom generates a model of shape cfg with random weights: weight
// matrices and embeddings N(0, std²), biases N(0, 0.02²), LayerNorm weights
// 1 + N(0, 0.05²). The weights are a pure function of seed and cfg (not of
// GOMAXPROCS): each tensor is filled in fixed-size chunks, each from its own
// PCG stream. The model is marked RandomWeights.
func NewRandom(name string, cfg Config, seed uint64, std float64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	m := &Model{Name: name, Config: cfg, RandomWeights: true}
	m.Weights.Layers = make([]LayerWeights, cfg.NLayer)
	type job struct {
		dst        []float32
		mean, sdev float64
		stream     uint64
	}
	const chunk = 1 << 16
	var jobs []job
	for _, s := range specs(cfg, &m.Weights) {
		n := int64(1)
		for _, d := range s.shape {
			n *= d
		}
		*s.dst = make([]float32, n)
		mean, sdev := 0.0, std
		switch {
		case len(s.shape) == 1 && isLayerNormWeight(s.name):
			mean, sdev = 1, 0.05
		case len(s.shape) == 1:
			sdev = 0.02
		}
		base := uint64(crc32.ChecksumIEEE([]byte(s.name))) << 32
		for i := int64(0); i < n; i += chunk {
			jobs = append(jobs, job{(*s.dst)[i:min(n, i+chunk)], mean, sdev, base | uint64(i/chunk)})
		}
	}
	m.Weights.LMHead = m.Weights.WTE
	var wg sync.WaitGroup
	next := make(chan job)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range next {
				r := rand.New(rand.NewPCG(seed, j.stream))
				for i := range j.dst {
					j.dst[i] = float32(j.mean + j.sdev*r.NormFloat64())
				}
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return m, nil
}

func isLayerNormWeight(name string) bool {
	n := len(name)
	return n >= 7 && name[n-7:] == ".weight" && (strings.Contains(name, "ln_"))
}

// Open returns the model a --model flag names: a built-in model
// (BuiltinTiny, Builtin124M) by name, otherwise the checkpoint folder at
// that path, otherwise a Hugging Face id found in the local hub cache (see
// Locate; the environment says where the cache is). A folder that happens
// to be called like a built-in model can be opened as "./tiny-gpt2".
func Open(model string) (*Model, error) { return OpenWithEnv(model, os.Getenv) }

// OpenWithEnv is Open with the environment read through getenv.
func OpenWithEnv(model string, getenv func(string) string) (*Model, error) {
	return OpenWith(model, OpenOptions{Getenv: getenv})
}

// OpenOptions are OpenWith's settings beyond the model's name.
type OpenOptions struct {
	// Revision is the branch, tag or commit hash of a Hugging Face id
	// (see LocateAt); empty means OpenWithEnv's choice.
	Revision string
	// LoadFormat is vLLM's --load-format (see LoadFormat); empty means
	// LoadAuto. A built-in model takes LoadAuto and LoadDummy (its weights
	// are random already).
	LoadFormat string
	// Getenv reads the environment (the hub cache's location); nil means
	// os.Getenv.
	Getenv func(string) string
}

// OpenWith is Open with options: a revision of a Hugging Face id, a load
// format, the environment. A model found in the hub cache records the
// repository and the snapshot's commit (Model.HubID, Model.Revision).
func OpenWith(model string, o OpenOptions) (*Model, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	formats, err := weightFormatsFor(o.LoadFormat)
	if err != nil {
		return nil, err
	}
	if IsBuiltin(model) {
		if o.Revision != "" {
			return nil, fmt.Errorf("gpt2: revision %q applies to a model named by its Hugging Face id, and %s is built in", o.Revision, model)
		}
		if f := o.LoadFormat; f != "" && f != LoadAuto && f != LoadDummy {
			return nil, fmt.Errorf("gpt2: load format %q reads weight files, and %s is built in (its weights are generated)", f, model)
		}
		return Builtin(model)
	}
	dir, hub, err := locate(model, o.Revision, formats, o.Getenv)
	if err != nil {
		return nil, err
	}
	m, err := LoadFormat(dir, o.LoadFormat)
	if err != nil {
		return nil, err
	}
	if hub != nil {
		m.Name = model // served as the id asked for, not as the snapshot's revision hash
		m.HubID, m.Revision = hub.id, hub.commit
	}
	return m, nil
}
