package llm

import (
	"fmt"
	"math"
)

// MaxStopStrings bounds the number of stop strings one request may carry, so
// that the per-token stop check stays cheap.
const MaxStopStrings = 16

// MaxBadWords and MaxBadWordTokens bound a request's BadWords: the
// sequences, and their token ids in all (vLLM's limits), so that the
// per-token check stays cheap.
const (
	MaxBadWords      = 128
	MaxBadWordTokens = 1024
)

// MaxLogprobs is the largest number of top alternatives a request may ask for
// (vLLM's default max_logprobs is 20).
const MaxLogprobs = 20

// SamplingParams says how tokens are chosen and when generation stops. Only
// MaxTokens needs setting: with every other field zero it is greedy
// decoding of MaxTokens tokens (the zero value runs the prompt and
// generates nothing); field docs say what zero means.
// Following vLLM, n (several choices per prompt) is not a sampling parameter:
// the server submits one [Request] per choice.
type SamplingParams struct {
	// MaxTokens is the most tokens to generate. Zero runs the prompt only:
	// the request ends (FinishLength) after its prefill, which is what
	// scoring a text with PromptLogprobs needs.
	MaxTokens int
	// MinTokens is the number of tokens generated before EOS, stop token ids or
	// stop strings may end the request. Zero means no minimum.
	MinTokens int
	// Temperature scales the logits before sampling. Zero means greedy
	// (argmax, ties to the lowest id).
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probabilities sum
	// to at least TopP. Zero or 1 disables it.
	TopP float64
	// TopK keeps the K most likely tokens. Zero or -1 disables it. It keeps
	// exactly K: among tokens tied with the K-th most likely logit the
	// lowest ids stay, as greedy's ties go (vLLM keeps every token tied
	// with the K-th; with float32 logits such ties are rare).
	TopK int
	// MinP drops every token whose probability is below MinP times that of
	// the most likely token (vLLM's min_p); top-k and top-p then choose
	// among the rest. Zero disables it; it must be in [0, 1].
	MinP float64
	// Seed, when set, makes sampling reproducible for this request whatever
	// else is in the batch. Nil means the engine picks a seed.
	Seed *int64
	// Stop ends generation when the generated text contains one of these
	// strings; the stop string is not included in the output text unless
	// IncludeStopStrInOutput is set.
	Stop []string
	// StopTokenIDs end generation when one of these tokens is generated. The
	// token counts as generated but its text is not emitted, unless
	// IncludeStopStrInOutput is set.
	StopTokenIDs []int
	// IncludeStopStrInOutput keeps what ended the request at the end of the
	// text: the stop string, or the text of the stop token id or EOS (which
	// has text only with KeepSpecialTokens), as vLLM's
	// include_stop_str_in_output does.
	IncludeStopStrInOutput bool
	// KeepSpecialTokens writes the text of special tokens (<|endoftext|>)
	// into the output; by default they produce none (vLLM's
	// skip_special_tokens, which defaults to true).
	KeepSpecialTokens bool
	// IgnoreEOS keeps generating after the end-of-sequence token.
	IgnoreEOS bool
	// PresencePenalty is subtracted from the logit of every token that was
	// generated at least once, and FrequencyPenalty once per time it was
	// generated (OpenAI's and vLLM's; prompt tokens do not count). Each is
	// in [-2, 2]; zero is off.
	PresencePenalty  float64
	FrequencyPenalty float64
	// RepetitionPenalty divides the positive logits and multiplies the
	// negative ones of every token in the prompt or generated so far
	// (Hugging Face's and vLLM's repetition_penalty: above 1 discourages
	// repeats). Zero or 1 is off; otherwise it must be positive.
	RepetitionPenalty float64
	// LogitBias adds its value to the logit of its token id before the
	// penalties and sampling (OpenAI's logit_bias): -100 all but bans a
	// token, 100 all but forces it. Values are in [-100, 100].
	LogitBias map[int]float64
	// AllowedTokenIDs, when not empty, are the only tokens that may be
	// generated (vLLM's allowed_token_ids): every other logit is set to
	// -Inf before the penalties and sampling. Like the other adjustments
	// it changes what is sampled, not the log-probabilities reported.
	AllowedTokenIDs []int
	// BadWords are token sequences that may not be generated (vLLM's
	// bad_words, tokenized): whenever the output so far ends with all but
	// the last token of a sequence, that last token's logit is set to -Inf
	// (a one-token sequence is always banned). Only generated tokens count,
	// as in vLLM; the prompt does not.
	BadWords [][]int
	// Logprobs, when set to N, returns the log-probability of each chosen token
	// and of the N most likely alternatives (0 means the chosen token only).
	// Nil means no log-probabilities.
	Logprobs *int
	// PromptLogprobs, when set to N, returns the log-probability of every
	// prompt token after the first, given the tokens before it, and the N
	// most likely tokens at its position (0 means the prompt token only):
	// vLLM's prompt_logprobs, which evaluation harnesses read to score a
	// text. They arrive on the request's first event. Nil means none; not
	// every backend computes them (the engine then rejects the request).
	PromptLogprobs *int
}

// ParamError is a validation error that names the offending field, so that
// the server can report it as the OpenAI error's param.
type ParamError struct {
	// Param is the field name as the OpenAI API spells it (max_tokens, top_p).
	Param string
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *ParamError) Error() string { return e.Param + ": " + e.Msg }

// Is lets errors.Is(err, ErrInvalidRequest) match every ParamError.
func (e *ParamError) Is(target error) bool { return target == ErrInvalidRequest }

func paramErr(param, format string, args ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first invalid field, as a *ParamError.
func (p *SamplingParams) Validate() error {
	switch {
	case p.MaxTokens < 0:
		return paramErr("max_tokens", "must not be negative, got %d", p.MaxTokens)
	case p.MinTokens < 0:
		return paramErr("min_tokens", "must be non-negative, got %d", p.MinTokens)
	case p.MinTokens > p.MaxTokens:
		return paramErr("min_tokens", "must be at most max_tokens (%d), got %d", p.MaxTokens, p.MinTokens)
	case math.IsNaN(p.Temperature) || p.Temperature < 0 || p.Temperature > 100:
		return paramErr("temperature", "must be in [0, 100], got %v", p.Temperature)
	case math.IsNaN(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return paramErr("top_p", "must be in (0, 1], got %v", p.TopP)
	case p.TopK < -1:
		return paramErr("top_k", "must be -1 or 0 (disabled) or a positive number, got %d", p.TopK)
	case math.IsNaN(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return paramErr("min_p", "must be in [0, 1], got %v", p.MinP)
	case math.IsNaN(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return paramErr("presence_penalty", "must be in [-2, 2], got %v", p.PresencePenalty)
	case math.IsNaN(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return paramErr("frequency_penalty", "must be in [-2, 2], got %v", p.FrequencyPenalty)
	case math.IsNaN(p.RepetitionPenalty) || math.IsInf(p.RepetitionPenalty, 0) || p.RepetitionPenalty < 0:
		return paramErr("repetition_penalty", "must be greater than zero, got %v", p.RepetitionPenalty)
	case len(p.Stop) > MaxStopStrings:
		return paramErr("stop", "at most %d stop strings, got %d", MaxStopStrings, len(p.Stop))
	}
	for _, s := range p.Stop {
		if s == "" {
			return paramErr("stop", "stop strings must not be empty")
		}
	}
	for _, id := range p.StopTokenIDs {
		if id < 0 {
			return paramErr("stop_token_ids", "token ids must be non-negative, got %d", id)
		}
	}
	for _, id := range p.AllowedTokenIDs {
		if id < 0 {
			return paramErr("allowed_token_ids", "token ids must be non-negative, got %d", id)
		}
	}
	if err := p.validateBadWords(); err != nil {
		return err
	}
	for id, b := range p.LogitBias {
		if id < 0 {
			return paramErr("logit_bias", "token ids must be non-negative, got %d", id)
		}
		if math.IsNaN(b) || b < -100 || b > 100 {
			return paramErr("logit_bias", "the bias of token %d must be in [-100, 100], got %v", id, b)
		}
	}
	if p.Logprobs != nil && (*p.Logprobs < 0 || *p.Logprobs > MaxLogprobs) {
		return paramErr("logprobs", "must be in [0, %d], got %d", MaxLogprobs, *p.Logprobs)
	}
	if p.PromptLogprobs != nil && (*p.PromptLogprobs < 0 || *p.PromptLogprobs > MaxLogprobs) {
		return paramErr("prompt_logprobs", "must be in [0, %d], got %d", MaxLogprobs, *p.PromptLogprobs)
	}
	return nil
}

func (p *SamplingParams) validateBadWords() error {
	if len(p.BadWords) > MaxBadWords {
		return paramErr("bad_words", "at most %d token sequences, got %d", MaxBadWords, len(p.BadWords))
	}
	total := 0
	for i, seq := range p.BadWords {
		if len(seq) == 0 {
			return paramErr("bad_words", "sequence %d is empty", i)
		}
		for _, id := range seq {
			if id < 0 {
				return paramErr("bad_words", "token ids must be non-negative, got %d", id)
			}
		}
		total += len(seq)
	}
	if total > MaxBadWordTokens {
		return paramErr("bad_words", "at most %d tokens in all, got %d", MaxBadWordTokens, total)
	}
	return nil
}

// GreedyTemperature is the temperature below which sampling is greedy, as
// vLLM's _SAMPLING_EPS: dividing logits by a smaller one (a denormal, say)
// would overflow to infinities and pick a token no distribution chose.
const GreedyTemperature = 1e-5

// MinRequestTemperature is vLLM's _MAX_TEMP (vllm/sampling_params.py): a
// request's temperature above 0 but below it is raised to it, since
// dividing the logits by less risks infinities.
const MinRequestTemperature = 1e-2

// RaiseTinyTemperature raises a temperature in (0, MinRequestTemperature)
// to MinRequestTemperature, as vLLM's SamplingParams.__post_init__ does
// (with a warning) before it decides whether sampling is greedy: such a
// request samples at 0.01 in vLLM, where the engine would sample sharper,
// or below GreedyTemperature take the argmax. The server and cmd/generate
// apply it so that their temperatures mean what vLLM's do; the engine
// itself takes a temperature as given.
func (p *SamplingParams) RaiseTinyTemperature() {
	if p.Temperature > 0 && p.Temperature < MinRequestTemperature {
		p.Temperature = MinRequestTemperature
	}
}

// Greedy reports whether the params choose the most likely token every step.
func (p *SamplingParams) Greedy() bool {
	return p.Temperature < GreedyTemperature || p.TopK == 1
}

// Request is one sequence to generate: a prompt already tokenized and how to
// continue it.
type Request struct {
	// ID names the request in logs and events. The engine does not require it
	// to be unique, but the server makes it so.
	ID string
	// PromptTokens are the prompt's token ids. Must not be empty.
	PromptTokens []int
	// Params says how to sample and when to stop.
	Params SamplingParams
}

// Validate checks the prompt against the vocabulary size and the params.
// vocabSize <= 0 skips the range check.
func (r *Request) Validate(vocabSize int) error {
	if len(r.PromptTokens) == 0 {
		return paramErr("prompt", "prompt must not be empty")
	}
	if vocabSize > 0 {
		for _, id := range r.PromptTokens {
			if id < 0 || id >= vocabSize {
				return paramErr("prompt", "token id %d is out of vocabulary range [0, %d)", id, vocabSize)
			}
		}
		for _, id := range r.Params.StopTokenIDs {
			if id >= vocabSize {
				return paramErr("stop_token_ids", "token id %d is out of vocabulary range [0, %d)", id, vocabSize)
			}
		}
		for id := range r.Params.LogitBias {
			if id >= vocabSize {
				return paramErr("logit_bias", "token id %d is out of vocabulary range [0, %d)", id, vocabSize)
			}
		}
		for _, id := range r.Params.AllowedTokenIDs {
			if id >= vocabSize {
				return paramErr("allowed_token_ids", "token id %d is out of vocabulary range [0, %d)", id, vocabSize)
			}
		}
		for _, seq := range r.Params.BadWords {
			for _, id := range seq {
				if id >= vocabSize {
					return paramErr("bad_words", "token id %d is out of vocabulary range [0, %d)", id, vocabSize)
				}
			}
		}
	}
	return r.Params.Validate()
}
