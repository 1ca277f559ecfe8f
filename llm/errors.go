package llm

import (
	"errors"
	"fmt"
)

// Sentinel errors. Each says whether the request was admitted and whether a
// retry can succeed; callers match them with errors.Is.
var (
	// ErrInvalidRequest: the request itself is wrong (bad params, empty or
	// out-of-vocabulary prompt). Not admitted; retrying the same request fails
	// again. Every *ParamError matches it.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrContextLength: prompt plus max_tokens exceed the model's context
	// length. Not admitted; see *ContextLengthError for the figures.
	ErrContextLength = errors.New("context length exceeded")
	// ErrTooLargeForCache: the request could never fit in the whole KV block
	// pool. Not admitted; retrying fails again unless the server is resized.
	ErrTooLargeForCache = errors.New("request does not fit in the KV cache")
	// ErrOverloaded: the waiting queue is full. Not admitted; safe to retry
	// later (HTTP 429 with Retry-After).
	ErrOverloaded = errors.New("engine overloaded: waiting queue is full")
	// ErrDraining: the engine is shutting down and admits nothing new. Not
	// admitted; retry on another replica (HTTP 503).
	ErrDraining = errors.New("engine is draining")
	// ErrEngineDead: a backend failure stopped the engine. Not admitted, or,
	// in an error event, the request was lost; retry on another replica.
	ErrEngineDead = errors.New("engine is dead")
	// ErrClosed: the engine was closed. Requests still running end with an
	// abort event.
	ErrClosed = errors.New("engine is closed")
)

// ContextLengthError carries the figures of a context-length rejection so
// the server can word it as vLLM does.
type ContextLengthError struct {
	MaxModelLen  int // the model's context length in tokens
	PromptTokens int // tokens in the prompt
	MaxTokens    int // tokens requested for the completion
	// PromptTruncated is true when tokenizing stopped once the prompt was
	// sure not to fit: it has more than PromptTokens tokens.
	PromptTruncated bool
}

// Error implements error, using vLLM's wording.
func (e *ContextLengthError) Error() string {
	if e.PromptTruncated {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your prompt has more than %d tokens (tokenizing stopped there). Please reduce the length of the prompt.",
			e.MaxModelLen, e.PromptTokens)
	}
	// The sum in uint64: both counts are non-negative ints, and a client may
	// ask for max_tokens near the largest int.
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d in the completion). Please reduce the length of the prompt or completion.",
		e.MaxModelLen, uint64(e.PromptTokens)+uint64(e.MaxTokens), e.PromptTokens, e.MaxTokens)
}

// Is makes errors.Is(err, ErrContextLength) true.
func (e *ContextLengthError) Is(target error) bool { return target == ErrContextLength }

// CheckContextLength returns a *ContextLengthError when prompt plus max_tokens
// exceed maxModelLen. It compares without adding the two, which a max_tokens
// near the largest int would overflow into a small sum that passes.
func CheckContextLength(maxModelLen, promptTokens, maxTokens int) error {
	if promptTokens > maxModelLen || maxTokens > maxModelLen-promptTokens {
		return &ContextLengthError{MaxModelLen: maxModelLen, PromptTokens: promptTokens, MaxTokens: maxTokens}
	}
	return nil
}
