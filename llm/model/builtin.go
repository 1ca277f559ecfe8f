package model

import (
	"fmt"
	"slices"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// Names of the built-in models. Their weights are generated from
// BuiltinSeed (their text is meaningless) and their vocabularies are real,
// so a real tokenizer goes with each.
const (
	// BuiltinTiny is the default model: a GPT-2 of 4 layers, width 64, 4
	// heads, 1024 positions, vocabulary 50257. It builds in a few tens of
	// milliseconds.
	BuiltinTiny = "tiny-gpt2"
	// Builtin124M has the shape of OpenAI's GPT-2 small (12 layers, width
	// 768, 12 heads, 1024 positions, 124M parameters), for benchmarks.
	Builtin124M = "gpt2-124m-random"
	// BuiltinQwen05B has the exact shape of Qwen2.5-0.5B (24 layers, width
	// 896, 14 query and 2 key/value heads of 64, MLP 4864, vocabulary
	// 151936, tied embeddings, q/k/v biases, rope_theta 1e6, 32768
	// positions), in bfloat16: it stands in for Qwen2.5-0.5B-Instruct in
	// benchmarks, with Qwen's tokenizer. Generating its 494M weights takes
	// a few seconds.
	BuiltinQwen05B = "qwen2.5-0.5b-random"
)

// BuiltinSeed is the seed the built-in models' weights are generated from,
// fixed so that every run and every machine gets the same weights.
const BuiltinSeed = 20240601

// builtin is one built-in model: its shape, how its weights are drawn and
// the built-in tokenizer that goes with it.
type builtin struct {
	config    Config
	std       float64
	dtype     tensor.DType
	tokenizer string
}

// builtins are the built-in models by name.
var builtins = map[string]builtin{
	BuiltinTiny:    {gpt2Builtin(4, 64, 4), 0.1, tensor.F32, "gpt2"},
	Builtin124M:    {gpt2Builtin(12, 768, 12), 0.02, tensor.F32, "gpt2"},
	BuiltinQwen05B: {qwen05B(), 0.02, tensor.BF16, "qwen2.5"},
}

func gpt2Builtin(layers, width, heads int) Config {
	c := GPT2Config(50257, 1024, width, layers, heads)
	c.BOSTokenID, c.EOSTokenIDs, c.TorchDType = 50256, []int{50256}, "float32"
	return c
}

// qwen05B is Qwen2.5-0.5B-Instruct's config.json, as the hub has it.
func qwen05B() Config {
	return Config{
		Arch: ArchQwen2, Architecture: "Qwen2ForCausalLM",
		VocabSize: 151936, MaxPositions: 32768, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
		Intermediate: 4864, Norm: RMSNorm, NormEps: 1e-6, Rotary: true, RopeTheta: 1e6, QKVBias: true,
		MLP: MLPGated, Activation: SiLU, AttnScale: 1.0 / 8, TiedEmbeddings: true,
		BOSTokenID: 151643, EOSTokenIDs: []int{151645}, TorchDType: "bfloat16",
	}
}

// BuiltinNames lists the built-in model names, the default first.
func BuiltinNames() []string { return []string{BuiltinTiny, Builtin124M, BuiltinQwen05B} }

// IsBuiltin reports whether name is a built-in model rather than a folder.
func IsBuiltin(name string) bool { _, ok := builtins[name]; return ok }

// BuiltinConfig returns the shape of a built-in model.
func BuiltinConfig(name string) (Config, error) {
	b, ok := builtins[name]
	if !ok {
		return Config{}, fmt.Errorf("model: unknown built-in model %q (built-in: %v)", name, BuiltinNames())
	}
	c := b.config
	c.EOSTokenIDs = slices.Clone(c.EOSTokenIDs)
	return c, nil
}

// Builtin generates a built-in model from BuiltinSeed. tiny-gpt2 uses
// weight scale 0.1, so that its continuations vary instead of repeating
// one token; the others use 0.02, their architectures' initializer_range.
// A built-in Qwen model also carries Qwen2.5-Instruct's generation EOS ids
// (<|im_end|> and <|endoftext|>).
func Builtin(name string) (*Model, error) {
	b, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("model: unknown built-in model %q (built-in: %v)", name, BuiltinNames())
	}
	cfg, _ := BuiltinConfig(name)
	m, err := NewRandom(name, cfg, RandomOptions{Seed: BuiltinSeed, Std: b.std, DType: b.dtype})
	if err != nil {
		return nil, err
	}
	m.Source = Source{Name: name, Builtin: name, Tokenizer: b.tokenizer}
	if cfg.Arch == ArchQwen2 {
		m.GenerationEOS = []int{151645, 151643}
	}
	return m, nil
}
