package llm

import (
	"context"
	"fmt"
	"strings"
)

// ModelInfo describes the model an engine serves.
type ModelInfo struct {
	// ID is the model's name (tiny-gpt2, a checkpoint folder's base name),
	// or the name it is served under when one was given.
	ID string
	// Root is the model's own name when ID is a served name that was given
	// (tinyserve.Config.ServedModelName; the same as ID when the given name
	// is the model's own), and empty otherwise; /v1/models reports it as
	// root, where vLLM reports the model it loaded.
	Root string
	// MaxModelLen is the context length in tokens: prompt plus completion.
	MaxModelLen int
	// VocabSize is the number of token ids the model accepts and produces.
	VocabSize int
	// EOSTokenID is the end-of-sequence token, or -1 when there is none.
	// Zero is token 0, not "none".
	EOSTokenID int
	// StopTokenIDs are the other ids that end a sequence as EOS does unless
	// a request sets ignore_eos (a generation_config.json's eos_token_id
	// list: Qwen2.5-Instruct's <|endoftext|> besides <|im_end|>, Llama
	// 3.1's <|eom_id|> and <|eot_id|>). As in vLLM, they join each
	// request's stop_token_ids, and a choice they end reports the id as its
	// stop reason.
	StopTokenIDs []int
	// RandomWeights is true for built-in models with generated weights, whose
	// text is meaningless; say so wherever the model is described.
	RandomWeights bool
	// Backend names the backend running the model (cpu, cuda, mock).
	Backend string
	// Defaults are the model's own sampling defaults (a checkpoint's
	// generation_config.json), which a server uses for the fields a request
	// leaves out, as vLLM does.
	Defaults SamplingDefaults
	// Source says which files the model was loaded from; nil for models
	// made in memory (the built-in and mock models).
	Source *ModelSource
}

// ModelSource identifies a loaded checkpoint, so that a benchmark can
// record exactly which weights it measured.
type ModelSource struct {
	// Dir is the checkpoint folder.
	Dir string
	// HubID and Revision name the Hugging Face repository and the commit
	// of the snapshot when Dir was found in the local hub cache; both are
	// empty for a folder named by its path.
	HubID, Revision string
	// Files are the files of Dir that were read, relative to it and
	// sorted: config.json, generation_config.json, the weights and their
	// index.
	Files []string
	// TokenizerFiles are the paths of the tokenizer's files that were
	// read (tokenizer.json, or vocab.json and merges.txt, and the configs
	// beside them), in Dir or elsewhere; none for a built-in tokenizer.
	TokenizerFiles []string
}

// SamplingDefaults are a model's recommended sampling settings, used in
// place of the API's defaults for what a request leaves out. A nil field
// leaves the API's default (temperature 1, top_p 1, no top_k, no min_p,
// repetition_penalty 1, max_tokens as the request says).
type SamplingDefaults struct {
	Temperature       *float64
	TopP              *float64
	TopK              *int
	MinP              *float64
	RepetitionPenalty *float64
	// MaxTokens is the model's max_new_tokens: what a completions request
	// sending "max_tokens": null gets in place of all the context its
	// prompt leaves, as vLLM reads it. A request that leaves max_tokens out
	// gets the API's 16 all the same.
	MaxTokens *int
	// MaxTokensLimit caps every request's max_tokens, whatever it asked
	// for: vLLM sets it from the max_new_tokens of a generation config
	// given as a folder (--generation-config DIR), not from the model's own.
	MaxTokensLimit *int
}

// Apply sets in p every sampling field d sets; MaxTokens and
// MaxTokensLimit depend on the prompt's length, so the server applies them.
func (d SamplingDefaults) Apply(p *SamplingParams) {
	if d.Temperature != nil {
		p.Temperature = *d.Temperature
	}
	if d.TopP != nil {
		p.TopP = *d.TopP
	}
	if d.TopK != nil {
		p.TopK = *d.TopK
	}
	if d.MinP != nil {
		p.MinP = *d.MinP
	}
	if d.RepetitionPenalty != nil {
		p.RepetitionPenalty = *d.RepetitionPenalty
	}
}

// IsZero reports whether d sets nothing.
func (d SamplingDefaults) IsZero() bool {
	return d.Temperature == nil && d.TopP == nil && d.TopK == nil && d.MinP == nil && d.RepetitionPenalty == nil &&
		d.MaxTokens == nil && d.MaxTokensLimit == nil
}

// String lists what d sets, as "temperature=0.7 top_k=40", for logs.
func (d SamplingDefaults) String() string {
	var parts []string
	add := func(name string, v any) { parts = append(parts, fmt.Sprintf("%s=%v", name, v)) }
	if d.Temperature != nil {
		add("temperature", *d.Temperature)
	}
	if d.TopP != nil {
		add("top_p", *d.TopP)
	}
	if d.TopK != nil {
		add("top_k", *d.TopK)
	}
	if d.MinP != nil {
		add("min_p", *d.MinP)
	}
	if d.RepetitionPenalty != nil {
		add("repetition_penalty", *d.RepetitionPenalty)
	}
	if d.MaxTokens != nil {
		add("max_tokens", *d.MaxTokens)
	}
	if d.MaxTokensLimit != nil {
		add("max_tokens_limit", *d.MaxTokensLimit)
	}
	return strings.Join(parts, " ")
}

// Stats is a snapshot of an engine's state, for metrics and tests.
type Stats struct {
	Running          int     // requests with tokens in the running batch
	Waiting          int     // requests admitted but not running (incl. preempted)
	KVBlocksTotal    int     // blocks in the pool
	KVBlocksUsed     int     // blocks held by requests
	KVUsage          float64 // KVBlocksUsed / KVBlocksTotal, in [0, 1]
	Preemptions      uint64  // requests preempted since start
	PromptTokens     uint64  // prompt tokens of requests admitted since start
	GenerationTokens uint64  // tokens generated since start
	Steps            uint64  // engine steps run since start
	Finished         uint64  // requests finished since start, any reason
	// With prefix caching: prompt tokens of requests looked up in the
	// prefix cache when first admitted (not when re-admitted after
	// preemption), and those found there (vLLM's prefix_cache_queries and
	// prefix_cache_hits).
	PrefixCacheQueries uint64
	PrefixCacheHits    uint64
	// StepTokens counts the engine steps by their tokens as vLLM's
	// vllm:iteration_tokens_total counts them: the whole prompt of each
	// request whose prefill completed in the step (cached or chunked, it
	// counts once, there), plus the tokens sampled. Its sum is therefore
	// about PromptTokens + GenerationTokens.
	StepTokens StepTokenCounts
}

// stepTokenBounds are the upper bounds of StepTokenCounts' buckets,
// vLLM's for vllm:iteration_tokens_total.
var stepTokenBounds = [...]int{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}

// StepTokenBounds returns the upper bounds of StepTokenCounts.Counts'
// buckets, in order.
func StepTokenBounds() []int { return append([]int(nil), stepTokenBounds[:]...) }

// StepTokenCounts is a histogram of tokens per engine step.
type StepTokenCounts struct {
	// Counts[i] is the number of steps with more tokens than bound i-1 and
	// at most bound i (StepTokenBounds); the last entry counts the steps
	// above every bound.
	Counts [len(stepTokenBounds) + 1]uint64
	// Sum is the tokens of every step counted.
	Sum uint64
}

// Observe counts one step of n tokens.
func (c *StepTokenCounts) Observe(n int) {
	i := 0
	for i < len(stepTokenBounds) && n > stepTokenBounds[i] {
		i++
	}
	c.Counts[i]++
	c.Sum += uint64(n)
}

// Engine is what the OpenAI server serves: it accepts requests and streams
// their events. Implementations are safe for concurrent use.
type Engine interface {
	// Generate submits req and returns its events. It fails at once, with a
	// typed error (ErrInvalidRequest, ErrContextLength, ErrOverloaded,
	// ErrDraining, ErrEngineDead, ErrClosed), when the request is not
	// admitted. Otherwise the channel yields events until one with Finish set,
	// then closes. Cancelling ctx aborts the request and frees its resources;
	// the channel then closes, possibly without a final event. The caller must
	// read until the channel closes or cancel ctx. With ctx already done,
	// Generate may fail with ctx's error instead (tinyserve's engine does).
	// The channel may be buffered (tinyserve's engine's is): a caller that
	// falls behind then finds len(ch) events already waiting, which it can
	// take without blocking (the OpenAI server merges them into one chunk).
	Generate(ctx context.Context, req Request) (<-chan Event, error)
	// Info describes the served model.
	Info() ModelInfo
	// Tokenizer is the model's tokenizer.
	Tokenizer() Tokenizer
	// Health is nil while the engine accepts requests; otherwise it says why
	// not (ErrDraining, ErrEngineDead wrapping the cause, ErrClosed).
	Health() error
	// Stats returns a snapshot of the engine's counters.
	Stats() Stats
	// Drain stops admitting requests (Generate returns ErrDraining) and waits
	// until every accepted request has finished, or ctx ends.
	Drain(ctx context.Context) error
	// Close stops the engine: running requests end with an abort event, and
	// Close returns when the engine's goroutine has exited. It does not wait
	// for callers to read their channels: each must still be read until it
	// closes (or its ctx cancelled), or the goroutine delivering to it stays
	// blocked.
	Close() error
}
