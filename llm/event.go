package llm

import "time"

// FinishReason says why a request ended. The empty value means it is still
// running.
type FinishReason string

// Finish reasons, as the OpenAI API spells them, plus abort and error.
const (
	FinishStop   FinishReason = "stop"   // EOS, a stop token id or a stop string
	FinishLength FinishReason = "length" // max_tokens reached
	FinishAbort  FinishReason = "abort"  // the engine closed (a cancelling caller's channel just closes)
	FinishError  FinishReason = "error"  // the backend failed; see Event.Err
)

// TopLogprob is one alternative token and its log-probability.
type TopLogprob struct {
	ID      int
	Logprob float32
}

// TokenLogprob is the log-probability of one token (generated, or of the
// prompt) and the most likely alternatives at its position, most likely
// first. Log-probabilities are of the model's distribution before
// temperature, top-k and top-p, as in vLLM.
type TokenLogprob struct {
	ID      int
	Logprob float32
	// Rank is the token's place among all tokens by logit, 1 for the most
	// likely: as in vLLM, the number of tokens whose logit is at least its
	// own (so a tie ranks each at the last place it shares).
	Rank int
	Top  []TopLogprob
}

// Timestamps are the moments of a request's life, stamped by the engine. A
// zero time means the moment has not happened (yet).
type Timestamps struct {
	Arrival        time.Time // Generate was called
	FirstScheduled time.Time // the scheduler first gave the request tokens to run
	FirstToken     time.Time // the first token was sampled
	Finish         time.Time // the request ended
}

// Event is what a running request yields: zero or more new tokens with their
// text, and, on the last event, why it finished. Events of one request arrive
// in order; the last one has Finish set and the channel closes after it.
// Its slices may share memory with the engine's state of the request
// (tinyserve's engine hands out views of the request's generated ids, which
// it reads again for bad_words): read them, or copy them before changing
// them. They never change after the event is sent.
type Event struct {
	// TokenIDs are the tokens generated since the previous event. A stop token
	// id, and tokens whose text was cut by a stop string, are included: they
	// were generated and count in CompletionTokens.
	TokenIDs []int
	// Text is the new text since the previous event. It never ends with half
	// a UTF-8 character and never contains (part of) a stop string that fired,
	// unless the request set IncludeStopStrInOutput.
	Text string
	// Logprobs has one entry per token in TokenIDs when the request asked
	// for log-probabilities.
	Logprobs []TokenLogprob
	// PromptLogprobs is set on the request's first event when it asked for
	// SamplingParams.PromptLogprobs: entry i is prompt token i+1 given the
	// tokens before it (the first prompt token has none), so it holds one
	// entry fewer than the prompt.
	PromptLogprobs []TokenLogprob
	// Finish is set on the last event only.
	Finish FinishReason
	// StopString is the stop string that ended the request, if one did.
	StopString string
	// StopTokenID is the stop token id that ended the request (a member of
	// StopTokenIDs, not EOS), or -1.
	StopTokenID int
	// PromptTokens is the number of prompt tokens.
	PromptTokens int
	// CachedPromptTokens is how many of the prompt tokens were not computed
	// because the prefix cache held their KV (vLLM's num_cached_tokens);
	// known once the request is first scheduled (so on every event that
	// carries a token), zero before that and without prefix caching.
	CachedPromptTokens int
	// CompletionTokens is the number of tokens generated so far, including
	// this event's.
	CompletionTokens int
	// Time is when the event was produced.
	Time time.Time
	// Times holds the request's timestamps known so far. It is set on the
	// event of the first token and on the last event (where every moment
	// that happened is set), and zero on the events in between, which have
	// nothing new to say.
	Times Timestamps
	// Err is set when Finish is FinishError (and may explain FinishAbort).
	Err error
}
