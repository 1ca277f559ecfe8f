package tinyserve

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// Engine flag names, as vllm serve spells them where the concept is the same.
const (
	FlagModel                = "model"
	FlagRevision             = "revision"
	FlagLoadFormat           = "load-format"
	FlagTokenizerRevision    = "tokenizer-revision"
	FlagBackend              = "backend"
	FlagDType                = "dtype"
	FlagQuantization         = "quantization"
	FlagTokenizer            = "tokenizer"
	FlagTokenizerDir         = "tokenizer-dir"
	FlagServedModelName      = "served-model-name"
	FlagChatTemplate         = "chat-template"
	FlagMaxNumSeqs           = "max-num-seqs"
	FlagMaxNumBatchedTokens  = "max-num-batched-tokens"
	FlagBlockSize            = "block-size"
	FlagNumBlocks            = "num-blocks"
	FlagMaxModelLen          = "max-model-len"
	FlagMaxPending           = "max-pending"
	FlagGPUMemoryUtilization = "gpu-memory-utilization"
	FlagKVCacheBytes         = "kv-cache-bytes"
	FlagThreads              = "threads"
	FlagGenerationConfig     = "generation-config"
	FlagEnforceEager         = "enforce-eager"
	FlagEnablePrefixCaching  = "enable-prefix-caching"
)

// EngineFlags returns the engine flags shared by cmd/serve, cmd/generate and
// the sweep's embedded target. With a non-empty envPrefix (TINYSERVE_) each
// flag is also read from envPrefix + the flag name in upper case with
// underscores, e.g. TINYSERVE_MAX_NUM_SEQS.
func EngineFlags(envPrefix string) []cli.Flag {
	env := func(name string) []string {
		if envPrefix == "" {
			return nil
		}
		return []string{envPrefix + EnvName(name)}
	}
	return []cli.Flag{
		&cli.StringFlag{Name: FlagModel, Value: DefaultModel, EnvVars: env(FlagModel), Usage: "built-in model (tiny-gpt2, gpt2-124m-random, qwen2.5-0.5b-random; random weights), a Hugging Face checkpoint folder (GPT-2, Llama, Qwen2, Qwen3) or its id in the local Hugging Face cache (openai-community/gpt2), a GGUF file, or an ollama model in the local ollama store (qwen2.5:0.5b-instruct-q8_0); never downloaded"},
		&cli.StringFlag{Name: FlagRevision, EnvVars: env(FlagRevision), Usage: "branch, tag or commit hash of a --model given as a Hugging Face id (default: the cache's main)"},
		&cli.StringFlag{Name: FlagLoadFormat, Value: "auto", EnvVars: env(FlagLoadFormat), Usage: "how weights are read, as vLLM's: auto (safetensors, else pytorch_model.bin), safetensors, pt, or dummy (random weights in config.json's shape)"},
		&cli.StringFlag{Name: FlagBackend, Value: BackendCPU, EnvVars: env(FlagBackend), Usage: "cpu, cuda or mock"},
		&cli.StringFlag{Name: FlagDType, Value: "auto", EnvVars: env(FlagDType), Usage: "weight type: auto (cpu: float32, cuda: float16), float16 or half (cuda), bfloat16, float32 or float"},
		&cli.StringFlag{Name: FlagQuantization, EnvVars: env(FlagQuantization), Usage: "quantize the weight matrices at load: none (default) or q8_0 (ggml's 8-bit blocks; cpu: 8-bit products, cuda: dequantized at upload)"},
		&cli.StringFlag{Name: FlagTokenizer, EnvVars: env(FlagTokenizer), Usage: "tokenizer override: gpt2, a tokenizer.json, a model folder or a Hugging Face id in the local cache"},
		&cli.StringFlag{Name: FlagTokenizerRevision, EnvVars: env(FlagTokenizerRevision), Usage: "branch, tag or commit hash of the tokenizer's Hugging Face id (--tokenizer, else --model's)"},
		&cli.StringFlag{Name: FlagTokenizerDir, EnvVars: env(FlagTokenizerDir), Usage: "extra folder searched for Hugging Face tokenizer ids"},
		&cli.StringFlag{Name: FlagServedModelName, EnvVars: env(FlagServedModelName), Usage: "model name clients use (default: the model's id)"},
		&cli.StringFlag{Name: FlagChatTemplate, EnvVars: env(FlagChatTemplate), Usage: "chat template for /v1/chat/completions, as vLLM's: a file, or the template itself (default: the model's)"},
		&cli.IntFlag{Name: FlagMaxNumSeqs, EnvVars: env(FlagMaxNumSeqs), Usage: "most sequences running at once (0: 256)"},
		&cli.IntFlag{Name: FlagMaxNumBatchedTokens, EnvVars: env(FlagMaxNumBatchedTokens), Usage: "token budget of one step (0: 2048)"},
		&cli.IntFlag{Name: FlagBlockSize, Value: 16, EnvVars: env(FlagBlockSize), Usage: "tokens per KV block"},
		&cli.IntFlag{Name: FlagNumBlocks, EnvVars: env(FlagNumBlocks), Usage: "KV blocks in the pool (0: what the memory budget holds)"},
		&cli.IntFlag{Name: FlagMaxModelLen, EnvVars: env(FlagMaxModelLen), Usage: "context length cap (0: the model's)"},
		&cli.IntFlag{Name: FlagMaxPending, EnvVars: env(FlagMaxPending), Usage: "requests that may wait to run before new ones are refused (0: 1024)"},
		&cli.Float64Flag{Name: FlagGPUMemoryUtilization, Value: 0.9, EnvVars: env(FlagGPUMemoryUtilization), Usage: "fraction of free GPU memory for the KV cache (cuda)"},
		&cli.Int64Flag{Name: FlagKVCacheBytes, EnvVars: env(FlagKVCacheBytes), Usage: "KV cache budget in bytes (cpu; 0: the backend's default)"},
		&cli.IntFlag{Name: FlagThreads, EnvVars: env(FlagThreads), Usage: "CPU threads for the forward pass (0: GOMAXPROCS)"},
		&cli.StringFlag{Name: FlagGenerationConfig, Value: "auto", EnvVars: env(FlagGenerationConfig), Usage: "default sampling settings for what a request leaves out: auto (the checkpoint's generation_config.json, as vLLM), vllm (the API's own), or a folder holding a generation_config.json (whose max_new_tokens also limits every request's max_tokens)"},
		&cli.BoolFlag{Name: FlagEnablePrefixCaching, EnvVars: env(FlagEnablePrefixCaching), Usage: "reuse the KV of prompt prefixes earlier requests computed (off by default: repeated benchmark prompts would measure the cache)"},
		&cli.BoolFlag{Name: FlagEnforceEager, EnvVars: env(FlagEnforceEager), Usage: "run every step eagerly: no CUDA graphs for decode-only steps (cuda; the cpu and mock backends are always eager)"},
	}
}

// EnvName is the environment spelling of a flag name: max-num-seqs ->
// MAX_NUM_SEQS (callers add their prefix, such as TINYSERVE_).
func EnvName(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// ConfigFromFlags reads the engine flags of c into a Config.
func ConfigFromFlags(c *cli.Context) (Config, error) {
	cfg := Config{
		Model:                c.String(FlagModel),
		Revision:             c.String(FlagRevision),
		LoadFormat:           c.String(FlagLoadFormat),
		TokenizerRevision:    c.String(FlagTokenizerRevision),
		Backend:              c.String(FlagBackend),
		DType:                c.String(FlagDType),
		Quantization:         c.String(FlagQuantization),
		Tokenizer:            c.String(FlagTokenizer),
		TokenizerDir:         c.String(FlagTokenizerDir),
		ServedModelName:      c.String(FlagServedModelName),
		ChatTemplate:         c.String(FlagChatTemplate),
		MaxNumSeqs:           c.Int(FlagMaxNumSeqs),
		MaxNumBatchedTokens:  c.Int(FlagMaxNumBatchedTokens),
		BlockSize:            c.Int(FlagBlockSize),
		NumBlocks:            c.Int(FlagNumBlocks),
		MaxModelLen:          c.Int(FlagMaxModelLen),
		MaxPending:           c.Int(FlagMaxPending),
		GPUMemoryUtilization: c.Float64(FlagGPUMemoryUtilization),
		KVCacheBytes:         c.Int64(FlagKVCacheBytes),
		Threads:              c.Int(FlagThreads),
		EnforceEager:         c.Bool(FlagEnforceEager),
		EnablePrefixCaching:  c.Bool(FlagEnablePrefixCaching),
		GenerationConfig:     c.String(FlagGenerationConfig),
	}
	if cfg.Backend == BackendMock && !c.IsSet(FlagModel) {
		// The flag's default does not apply to the mock, but a --model the
		// user gave, even tiny-gpt2, is passed on for Open to refuse.
		cfg.Model = ""
	}
	// In flag order, so that the first bad flag is always the one named.
	for _, f := range []struct {
		name string
		v    int64
	}{
		{FlagMaxNumSeqs, int64(cfg.MaxNumSeqs)}, {FlagMaxNumBatchedTokens, int64(cfg.MaxNumBatchedTokens)},
		{FlagBlockSize, int64(cfg.BlockSize)}, {FlagNumBlocks, int64(cfg.NumBlocks)}, {FlagMaxModelLen, int64(cfg.MaxModelLen)},
		{FlagMaxPending, int64(cfg.MaxPending)}, {FlagKVCacheBytes, cfg.KVCacheBytes}, {FlagThreads, int64(cfg.Threads)},
	} {
		if f.v < 0 {
			return Config{}, fmt.Errorf("--%s must not be negative, got %d", f.name, f.v)
		}
	}
	if cfg.GPUMemoryUtilization <= 0 || cfg.GPUMemoryUtilization > 1 {
		return Config{}, fmt.Errorf("--%s must be in (0, 1], got %v", FlagGPUMemoryUtilization, cfg.GPUMemoryUtilization)
	}
	if cfg.Backend != BackendCUDA && !c.IsSet(FlagGPUMemoryUtilization) {
		// The flag's default is cuda's; given for another backend, Open
		// refuses it.
		cfg.GPUMemoryUtilization = 0
	}
	return cfg, nil
}
