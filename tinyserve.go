// Package tinyserve wires the engine together: Config says which model,
// backend and scheduler settings to use, Open loads the model, picks the
// backend, sizes the KV pool and returns a running engine, and Settings
// declares each setting once, for the command-line flags (internal/cli),
// their environment variables and the sweep's JSON names. A Go service that
// embeds tinyserve calls Open and openai.NewHandler; nothing else needs to
// know the backends, and it links no CLI library.
package tinyserve

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tinyserve/tinyserve/internal/hfhub"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/chat"
	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/cuda"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/kv"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// DefaultModel is the model Open loads when Config.Model is empty: a small
// GPT-2 with random weights, generated in code, that needs no download.
const DefaultModel = model.BuiltinTiny

// Backends Open knows.
const (
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
	BackendMock = "mock"
)

// Config says what to serve and how. The zero value serves the built-in
// tiny-gpt2 on the CPU with vLLM's scheduler defaults. Each setting is
// declared once, in Settings, from which its command-line flag, its
// environment variable and its JSON key (the sweep's target.engine, read
// by DecodeConfigJSON) derive.
type Config struct {
	// Model is a built-in model name (tiny-gpt2, gpt2-124m-random,
	// qwen2.5-0.5b-random), a Hugging Face checkpoint folder (GPT-2, Llama,
	// Qwen2/2.5, Qwen3), the id of one in the local Hugging Face cache
	// (Qwen/Qwen2.5-0.5B-Instruct), a GGUF file (or a folder holding one),
	// or an ollama model name in the local ollama store
	// (qwen2.5:0.5b-instruct-q8_0); nothing is downloaded. Empty means
	// DefaultModel.
	Model string
	// Revision is the branch, tag or commit hash of a Model given as a
	// Hugging Face id (vLLM's --revision), which the local cache must
	// hold; empty means the snapshot refs/main names. A folder or a
	// built-in model refuses it.
	Revision string
	// LoadFormat is vLLM's --load-format: auto (empty: safetensors, else
	// pytorch_model.bin), safetensors, pt, or dummy (random weights in the
	// shape config.json gives, for benchmarks without the weights).
	LoadFormat string
	// Backend is cpu, cuda or mock. Empty means cpu. The mock serves its
	// own model with a byte tokenizer and refuses Model (other than mock).
	// Each backend refuses the options it would ignore rather than ignore
	// them: DType (other than auto) and Tokenizer on the mock, KVCacheBytes
	// and Threads (cpu only), GPUMemoryUtilization (cuda only),
	// MockLatency (mock only).
	Backend string
	// DType is the weight and KV type. auto (the default) follows the
	// checkpoint's torch_dtype, as vLLM does: bfloat16 for a bfloat16
	// checkpoint on either backend; otherwise float32 on the cpu backend
	// and float16 on cuda. cuda also takes float32 (for exact comparisons);
	// cpu takes bfloat16 for the streamed matrix weights (computed in
	// float32, half the bytes per decode step) and float32.
	DType string
	// Quantization is vLLM's --quantization: none (empty) keeps the
	// checkpoint's types; q8_0 quantizes every weight matrix and the token
	// embedding to ggml's Q8_0 at load (model.Quantize), so the cpu
	// backend streams about 1.06 bytes a weight with float32 activations;
	// the cuda backend dequantizes Q8_0 at upload (same values, no saving).
	// Matrices a checkpoint already stores as Q8_0 (a GGUF file) are kept.
	Quantization string
	// Tokenizer overrides the model's tokenizer: gpt2, a tokenizer.json
	// path, a model folder (tokenizer.json, or vocab.json and merges.txt)
	// or a Hugging Face id found in the local cache.
	Tokenizer string
	// TokenizerRevision is the branch, tag or commit hash of the
	// tokenizer's Hugging Face id (vLLM's --tokenizer-revision): Tokenizer
	// when given, else Model's, which must then be an id.
	TokenizerRevision string
	// TokenizerDir is an extra folder searched for Hugging Face ids.
	TokenizerDir string
	// ChatTemplate replaces the model's chat template, as vLLM's
	// --chat-template: a file's path, or the template itself (a value
	// holding '{', '}' or a newline). Empty keeps the template of the
	// tokenizer's or the model's folder (tokenizer_config.json's
	// chat_template or chat_template.jinja, or a GGUF file's).
	ChatTemplate string
	// ServedModelName is the name clients use; empty means the model's id.
	ServedModelName string
	// GenerationConfig says where the defaults come from for the sampling
	// fields a request leaves out (temperature, top_p, top_k, min_p,
	// repetition_penalty, and max_new_tokens for "max_tokens": null), as
	// vLLM's --generation-config: "auto" or empty, the checkpoint's
	// generation_config.json (else its config.json); "vllm", the API's own
	// defaults; otherwise a folder holding a generation_config.json, whose
	// max_new_tokens also limits every request's max_tokens.
	GenerationConfig string
	// MaxNumSeqs caps the running sequences; 0 means 256.
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step; 0 means 2048.
	MaxNumBatchedTokens int
	// BlockSize is the tokens per KV block; 0 means 16.
	BlockSize int
	// NumBlocks is the KV pool size in blocks; 0 means what the backend's
	// memory budget holds, and a negative one is refused.
	NumBlocks int
	// MaxModelLen caps the context length; 0 means the model's own, and a
	// negative one is refused.
	MaxModelLen int
	// MaxPending bounds requests waiting to run; 0 means 1024.
	MaxPending int
	// EnablePrefixCaching reuses the KV of whole blocks that earlier
	// requests with the same first tokens computed (vLLM's
	// --enable-prefix-caching). Off by default, unlike vLLM: a benchmark
	// that sends the same prompts at several concurrencies would otherwise
	// measure the cache in every condition after the first.
	EnablePrefixCaching bool
	// GPUMemoryUtilization is the fraction of free GPU memory the CUDA
	// backend may use for KV; 0 means 0.9.
	GPUMemoryUtilization float64
	// KVCacheBytes is the CPU backend's KV budget in bytes; 0 means the
	// backend's default.
	KVCacheBytes int64
	// Threads is the CPU backend's parallelism; 0 means GOMAXPROCS.
	Threads int
	// EnforceEager runs every step eagerly, as vLLM's --enforce-eager. By
	// default the cuda backend replays steps of up to 512 token rows from
	// CUDA graphs (cuda.Options.CUDAGraphs); the cpu and mock backends are always
	// eager, so they accept it too.
	EnforceEager bool
	// Seed seeds the seeds of requests that set none (vLLM's --seed; see
	// engine.Config.Seed); nil means from the clock.
	Seed *uint64
	// MockLatency gives the mock backend a device-like latency model.
	MockLatency mock.Latency

	// Logger receives logs; nil discards them.
	Logger *slog.Logger
	// Getenv reads the environment for the Hugging Face cache's location
	// (HF_HOME, ...: models and tokenizers named by id are looked up there)
	// and the CUDA libraries'; nil means os.Getenv.
	Getenv func(string) string
}

// Open builds and starts an engine for cfg. The caller must Close it.
// ctx is checked before the model is loaded (a cancelled ctx returns its
// error); loading itself is not interrupted, and the engine does not stop
// when ctx ends later: only Close (after Drain, for a graceful stop) does.
func Open(ctx context.Context, cfg Config) (*engine.Engine, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.MaxModelLen < 0 {
		// Refused before the model is loaded, as --max-model-len is: read
		// as 0, it would silently serve the model's whole context.
		return nil, fmt.Errorf("max_model_len must not be negative (0 for the model's context length), got %d", cfg.MaxModelLen)
	}
	backend, tok, info, err := load(cfg)
	if err != nil {
		return nil, err
	}
	lenWhy := "the model's context length (its config's max_position_embeddings)"
	if cfg.MaxModelLen > 0 {
		if cfg.MaxModelLen > info.MaxModelLen {
			closeQuietly(backend)
			return nil, fmt.Errorf("max_model_len %d is larger than the model's context length %d", cfg.MaxModelLen, info.MaxModelLen)
		}
		info.MaxModelLen, lenWhy = cfg.MaxModelLen, "--max-model-len"
	}
	cfg.Logger.Info("context length", "max_model_len", info.MaxModelLen, "from", lenWhy)
	if cfg.ServedModelName != "" {
		// Root says a name was given, even the model's own: a folder
		// served under it is then not also asked for by its path.
		info.Root, info.ID = info.ID, cfg.ServedModelName
	}
	var tmpl llm.ChatTemplate
	var tmplVars map[string]any
	if cfg.ChatTemplate != "" {
		if tmpl, tmplVars, err = givenChatTemplate(cfg.ChatTemplate, info, cfg.Logger); err != nil {
			closeQuietly(backend)
			return nil, err
		}
	} else {
		tmpl, tmplVars = chatTemplateOf(info, cfg.Logger)
	}
	e, err := engine.New(backend, tok, info, engine.Config{
		ChatTemplate:        tmpl,
		ChatVars:            tmplVars,
		MaxNumSeqs:          cfg.MaxNumSeqs,
		MaxNumBatchedTokens: cfg.MaxNumBatchedTokens,
		BlockSize:           cfg.BlockSize,
		NumBlocks:           cfg.NumBlocks,
		MaxPending:          cfg.MaxPending,
		PrefixCaching:       cfg.EnablePrefixCaching,
		Seed:                cfg.Seed,
		Logger:              cfg.Logger,
	})
	if err != nil {
		closeQuietly(backend)
		return nil, err
	}
	return e, nil
}

func closeQuietly(b engine.Backend) {
	if c, ok := b.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// load picks the backend and tokenizer for cfg.
func load(cfg Config) (engine.Backend, llm.Tokenizer, llm.ModelInfo, error) {
	switch cfg.Backend {
	case BackendMock, "", BackendCPU, BackendCUDA:
		if err := refuseIgnored(cfg); err != nil {
			return nil, nil, llm.ModelInfo{}, err
		}
	}
	switch cfg.Backend {
	case BackendMock:
		if cfg.Model != "" && cfg.Model != "mock" {
			return nil, nil, llm.ModelInfo{}, fmt.Errorf("the mock backend serves only the mock model, not %q", cfg.Model)
		}
		return mock.NewBackend(mock.Config{Latency: cfg.MockLatency}), mock.NewTokenizer(), mock.Info(), nil
	case "", BackendCPU:
		switch cfg.DType {
		case "", "auto", "float32", "float", "bfloat16": // "float": vLLM's name for float32
		default:
			return nil, nil, llm.ModelInfo{}, fmt.Errorf("dtype %q is not supported by the cpu backend (auto/float32, bfloat16)", cfg.DType)
		}
	case BackendCUDA:
		switch cfg.DType {
		case "", "auto", "float16", "half", "bfloat16", "float32", "float": // half, float: vLLM's names
		default:
			return nil, nil, llm.ModelInfo{}, fmt.Errorf("dtype %q is not supported by the cuda backend (auto, float16, bfloat16, float32)", cfg.DType)
		}
	default:
		return nil, nil, llm.ModelInfo{}, fmt.Errorf("unknown backend %q (want cpu, cuda or mock)", cfg.Backend)
	}
	quant, err := model.ParseQuantization(cfg.Quantization)
	if err != nil {
		return nil, nil, llm.ModelInfo{}, err
	}

	name := cfg.Model
	if name == "" {
		name = DefaultModel
	}
	src, err := model.Resolve(name, model.ResolveOptions{Revision: cfg.Revision, LoadFormat: cfg.LoadFormat, Getenv: cfg.Getenv})
	if err != nil {
		return nil, nil, llm.ModelInfo{}, err
	}
	m, err := model.Open(src, cfg.LoadFormat)
	if err != nil {
		return nil, nil, llm.ModelInfo{}, err
	}
	if src.HubID != "" {
		// A Hugging Face id: say which snapshot of the cache was loaded.
		cfg.Logger.Info("model found in the Hugging Face cache", "model", name, "revision", src.Revision, "folder", src.Dir)
	}
	tok, tokSpec, tokFiles, err := modelTokenizer(cfg, name, m)
	if err != nil {
		m.Close()
		return nil, nil, llm.ModelInfo{}, err
	}
	if err := fitVocab(cfg, m, tok, tokSpec); err != nil {
		m.Close()
		return nil, nil, llm.ModelInfo{}, err
	}
	if err := setSamplingDefaults(cfg, m); err != nil {
		m.Close()
		return nil, nil, llm.ModelInfo{}, err
	}
	if quant != "" {
		if err := m.Quantize(quant); err != nil {
			m.Close()
			return nil, nil, llm.ModelInfo{}, err
		}
	}
	dtype := resolveDType(cfg.Backend, cfg.DType, m.Config.TorchDType)
	kvElem := 4
	if cfg.Backend == BackendCUDA && dtype != "float32" {
		kvElem = 2
	}
	cfg.Logger.Info("model loaded", "model", name, "architecture", m.Config.Architecture, "params", m.NumParams(),
		"weights_bytes", m.WeightBytes(), "dtype", dtype, "quantization", cmp.Or(quant, "none"), "heads", m.Config.Heads, "kv_heads", m.Config.KVHeads,
		// What grouped-query attention saves: the paged cache holds
		// num_key_value_heads heads per layer, not num_attention_heads.
		"kv_bytes_per_token", m.Config.KVBytesPerToken(kvElem))
	if cfg.Backend == BackendCUDA {
		b, err := cuda.NewBackend(m, cuda.Options{
			DType: dtype, GPUMemoryUtilization: cfg.GPUMemoryUtilization, NumBlocks: cfg.NumBlocks,
			LibDir: cuda.LibDirFromEnv(), Getenv: cfg.Getenv, Logger: cfg.Logger, CUDAGraphs: !cfg.EnforceEager,
		})
		if err != nil {
			m.Close()
			return nil, nil, llm.ModelInfo{}, fmt.Errorf("backend cuda: %w", err)
		}
		return withModel{b, m}, tok, withStops(withTokenizerFiles(b.Info(), tokFiles), tok), nil
	}
	weights := "" // float32
	if dtype == "bfloat16" {
		weights = "bfloat16"
	}
	backend, err := cpu.New(m, cpu.Options{Threads: cfg.Threads, KVCacheBytes: cfg.KVCacheBytes, WeightDType: weights})
	if err != nil {
		m.Close()
		return nil, nil, llm.ModelInfo{}, err
	}
	// Derived settings are logged with their source, so that an operator
	// sees what was chosen for them and why.
	threadsWhy := "--threads"
	if cfg.Threads == 0 {
		threadsWhy = "GOMAXPROCS (the CPUs this process may use)"
	}
	kvBytes, kvWhy := backend.KVBudget(cmp.Or(cfg.BlockSize, kv.DefaultBlockSize))
	cfg.Logger.Info("cpu backend", "threads", backend.Threads(), "threads_from", threadsWhy, "kv_cache_bytes", kvBytes, "kv_cache_bytes_from", kvWhy)
	info := withStops(withTokenizerFiles(m.Info(), tokFiles), tok)
	info.Backend = BackendCPU
	return withModel{backend, m}, tok, info, nil
}

// resolveDType is the storage type a backend uses for dtype (vLLM's names
// half and float mean float16 and float32): auto follows the checkpoint's
// torch_dtype where the backend has it (bfloat16), else each backend's
// default (float32 on cpu, float16 on cuda, as vLLM casts a float32
// checkpoint to half on a GPU).
func resolveDType(backend, dtype, torchDType string) string {
	switch dtype {
	case "half":
		return "float16"
	case "float":
		return "float32"
	case "", "auto":
		if torchDType == "bfloat16" {
			return "bfloat16"
		}
		if backend == BackendCUDA {
			return "float16"
		}
		return "float32"
	}
	return dtype
}

// fitVocab checks the tokenizer against the model's vocabulary. A model
// vocabulary padded past the tokenizer's by under 128 ids (nanoGPT pads
// GPT-2's 50257 to 50304) is trimmed to it, so that the padding is never
// sampled. A larger padding of at most 1/64 of the vocabulary (Qwen's
// 151936 rows for its 151669 tokens) is served whole, as Hugging Face and
// vLLM serve it: prompts may name those ids and their logits are computed.
// Anything else is a tokenizer that does not belong to the model.
func fitVocab(cfg Config, m *model.Model, tok llm.Tokenizer, tokSpec string) error {
	tv, mv := tok.VocabSize(), m.Config.VocabSize
	switch {
	case tv == mv:
		return nil
	case tv < mv && mv-tv <= maxVocabPadding && m.TrimVocab(tv) == nil:
		cfg.Logger.Info("the model's vocabulary is padded past its tokenizer's: the extra ids are never produced",
			"model_vocab_size", mv, "tokenizer_vocab_size", tv)
		return nil
	case tv < mv && mv-tv <= mv/64:
		cfg.Logger.Info("the model's vocabulary has rows past its tokenizer's; they decode to nothing",
			"model_vocab_size", mv, "tokenizer_vocab_size", tv)
		return nil
	}
	which := tokSpec
	if cfg.Tokenizer == "" && tokSpec == tokenizer.BuiltinGPT2 && !model.IsBuiltin(m.Name) {
		which = "GPT-2's built-in BPE (the model folder has no tokenizer.json, nor vocab.json with merges.txt)"
	}
	return fmt.Errorf("tokenizer has %d tokens but the model's config.json says vocab_size %d; the tokenizer is %s", tv, mv, which)
}

// withStops adds the tokenizer's end-of-sequence token to the ids that end
// a sequence, when the model's files do not name it already: the stop ids
// are the union of config.json's, generation_config.json's and the
// tokenizer's eos_token.
func withStops(info llm.ModelInfo, tok llm.Tokenizer) llm.ModelInfo {
	eos := tok.EOSTokenID()
	if eos < 0 || eos >= info.VocabSize || eos == info.EOSTokenID || slices.Contains(info.StopTokenIDs, eos) {
		return info
	}
	if info.EOSTokenID < 0 {
		info.EOSTokenID = eos
		return info
	}
	info.StopTokenIDs = append(slices.Clone(info.StopTokenIDs), eos)
	return info
}

// withTokenizerFiles records in info's source the tokenizer files read; a
// model made in memory has no source, and keeps none.
func withTokenizerFiles(info llm.ModelInfo, files []string) llm.ModelInfo {
	if info.Source != nil {
		info.Source.TokenizerFiles = files
	}
	return info
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// maxVocabPadding is the most ids a model's vocabulary may have past its
// tokenizer's and be taken as padding: vocabularies are padded to a
// multiple of 64 (nanoGPT) or 128 (Megatron), so by fewer than 128 ids.
const maxVocabPadding = 127

// setSamplingDefaults applies cfg.GenerationConfig to m.Defaults (which
// Load read from the checkpoint's generation_config.json) and logs the
// defaults in force, as vLLM warns of them: a request without temperature
// then samples at the model's, which surprises a client that expects 1.
func setSamplingDefaults(cfg Config, m *model.Model) error {
	switch g := cfg.GenerationConfig; g {
	case "", "auto":
	case "vllm":
		m.Defaults = llm.SamplingDefaults{}
	default:
		if _, err := os.Stat(filepath.Join(g, model.GenerationConfigFile)); err != nil {
			return fmt.Errorf("generation_config %q: want auto, vllm or a folder holding %s: %w", g, model.GenerationConfigFile, err)
		}
		gc, err := model.ReadGenerationConfig(g)
		if err != nil {
			return fmt.Errorf("generation_config: %w", err)
		}
		d := gc.Defaults
		// A folder's max_new_tokens is a limit on every request, not only
		// the meaning of max_tokens null: vLLM's override_max_tokens.
		d.MaxTokensLimit = d.MaxTokens
		m.Defaults = d
	}
	if !m.Defaults.IsZero() {
		cfg.Logger.Warn("sampling defaults for what a request leaves out come from the model's generation config, as in vLLM; --generation-config vllm uses the API's own",
			"defaults", m.Defaults.String())
	}
	return nil
}

// refuseIgnored returns an error naming the first setting given in cfg
// that its backend would ignore (Setting.Backends says which honour it),
// or the mock's latency model given for another backend.
func refuseIgnored(cfg Config) error {
	backend := cfg.Backend
	if backend == "" {
		backend = BackendCPU
	}
	for _, s := range settings {
		if s.Backends != nil && s.Given(&cfg) && !slices.Contains(s.Backends, backend) {
			return fmt.Errorf("%s (--%s) %v does not apply to the %s backend (only to %s)", s.JSONName(), s.Name, s.Value(&cfg), backend, strings.Join(s.Backends, ", "))
		}
	}
	if cfg.MockLatency != (mock.Latency{}) && backend != BackendMock {
		return fmt.Errorf("mock latency %v does not apply to the %s backend (only to %s)", cfg.MockLatency, backend, BackendMock)
	}
	return nil
}

// withModel closes the model (unmapping its checkpoint) after the backend
// that reads it, when the engine closes the backend.
type withModel struct {
	engine.Backend
	model *model.Model
}

// ReturnsPromptLogits implements engine.PromptLogitsBackend: the wrapper
// can do what the backend it wraps can.
func (w withModel) ReturnsPromptLogits() bool {
	pb, ok := w.Backend.(engine.PromptLogitsBackend)
	return ok && pb.ReturnsPromptLogits()
}

// Close implements io.Closer.
func (w withModel) Close() error {
	var err error
	if c, ok := w.Backend.(interface{ Close() error }); ok {
		err = c.Close()
	}
	if merr := w.model.Close(); err == nil {
		err = merr
	}
	return err
}

// modelTokenizer is --tokenizer when given, else the checkpoint folder's
// tokenizer.json, or its vocab.json and merges.txt, when it has them, else
// GPT-2's built-in BPE; it also returns the tokenizer spec it loaded. name
// is the model asked for (cfg.Model, or DefaultModel when that is empty).
func modelTokenizer(cfg Config, name string, m *model.Model) (llm.Tokenizer, string, []string, error) {
	spec := cfg.Tokenizer
	revision, inherited := cfg.TokenizerRevision, false
	if revision == "" && cfg.Revision != "" && spec != "" && hfhub.IsRepoID(spec) && !exists(spec) && !tokenizer.IsBuiltin(spec) {
		// vLLM's tokenizer_revision defaults to its revision. The built-in
		// GPT-2 BPE is the same at every revision of GPT-2's repository,
		// and --tokenizer gpt2 means it.
		revision, inherited = cfg.Revision, true
	}
	if spec == "" && cfg.TokenizerRevision != "" {
		// The model's own tokenizer at another revision: its id's.
		if m.Source.HubID == "" {
			return nil, "", nil, fmt.Errorf("tokenizer_revision (--tokenizer-revision) %q applies to a tokenizer named by its Hugging Face id, and the model %q is not one: give --tokenizer", cfg.TokenizerRevision, name)
		}
		spec = m.Source.HubID
	}
	if spec == "" {
		// The model's own: a built-in model's built-in tokenizer, or the
		// folder's tokenizer.json (or vocab.json with merges.txt), the
		// file rather than the folder: a folder called gpt2 (or
		// openai-community/gpt2) would name the built-in BPE.
		spec = m.Source.Tokenizer
	}
	if spec == "" {
		spec = tokenizer.BuiltinGPT2
	}
	if model.IsGGUF(spec) && exists(spec) {
		// A GGUF file's own vocabulary (tokenizer.ggml.*).
		tok, err := tokenizer.LoadGGUF(spec)
		if err != nil {
			return nil, "", nil, err
		}
		return tok, spec, []string{spec}, nil
	}
	opts := tokenizer.LoadOptionsFromEnv(cfg.Getenv, cfg.TokenizerDir)
	opts.Revision = revision
	tok, files, err := tokenizer.LoadWithFiles(spec, opts)
	if err != nil {
		if inherited {
			return nil, "", nil, fmt.Errorf("tokenizer: %w\n(--revision %s applies to --tokenizer %s too, as in vLLM; --tokenizer-revision gives the tokenizer its own)", err, cfg.Revision, spec)
		}
		return nil, "", nil, fmt.Errorf("tokenizer: %w", err)
	}
	return tok, spec, files, nil
}

// chatTemplateOf loads the chat template of the model's tokenizer folder
// (tokenizer_config.json's chat_template, or chat_template.jinja), with its
// special tokens; nil when it has none or it does not parse (logged: the
// chat endpoint then answers as for a model without one).
func chatTemplateOf(info llm.ModelInfo, lg *slog.Logger) (llm.ChatTemplate, map[string]any) {
	if info.Source == nil {
		return nil, nil
	}
	for _, f := range info.Source.TokenizerFiles {
		if model.IsGGUF(f) {
			return ggufChatTemplate(f, lg)
		}
	}
	for _, dir := range tokenizerDirs(info) {
		t, special, err := chat.Load(dir, "")
		if err != nil {
			if exists(filepath.Join(dir, "tokenizer_config.json")) || exists(filepath.Join(dir, "chat_template.jinja")) {
				lg.Info("no chat template", "folder", dir, "why", err.Error())
			}
			continue
		}
		lg.Info("chat template loaded", "folder", dir)
		return t, special.Vars()
	}
	return nil, nil
}

// ggufChatTemplate is the chat template of a GGUF file
// (tokenizer.chat_template) with its BOS and EOS tokens; nil when it has
// none or it does not parse (logged).
func ggufChatTemplate(path string, lg *slog.Logger) (llm.ChatTemplate, map[string]any) {
	ct, err := tokenizer.ReadGGUFChatTemplate(path)
	if err == nil && ct.Source == "" {
		return nil, nil
	}
	var t *chat.Template
	if err == nil {
		t, err = chat.Parse(ct.Source)
	}
	if err != nil {
		lg.Info("no chat template", "file", path, "why", err.Error())
		return nil, nil
	}
	lg.Info("chat template loaded", "file", path, "key", "tokenizer.chat_template")
	return t, chat.SpecialTokens{BOS: ct.BOS, EOS: ct.EOS}.Vars()
}
