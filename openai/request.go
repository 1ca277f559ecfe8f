package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/tinyserve/tinyserve/llm"
)

// Defaults of /v1/completions, as vLLM and the OpenAI API have them.
const (
	defaultMaxTokens   = 16
	defaultTemperature = 1.0
	defaultTopP        = 1.0
)

// completionRequest is a decoded, validated /v1/completions body. Prompts
// are not yet tokenized: that needs the engine's tokenizer, and decoding is
// kept pure so it can be fuzzed alone.
type completionRequest struct {
	model string
	// Exactly one of texts and tokenLists is set: the prompts as strings, or
	// as token ids. Each entry is one prompt.
	texts      []string
	tokenLists [][]int
	// addSpecial is vLLM's add_special_tokens (true unless the request
	// says false): text prompts get the tokenizer's template tokens, such
	// as Llama 3's <|begin_of_text|>. Token-id prompts are taken as given.
	addSpecial   bool
	params       llm.SamplingParams
	n            int
	echo         bool
	stream       bool
	includeUsage bool
	// continuousUsage puts the choice's usage so far on every chunk
	// (vLLM's stream_options.continuous_usage_stats).
	continuousUsage bool
	// truncate keeps each prompt's last truncate tokens (vLLM's
	// truncate_prompt_tokens); 0 keeps them all, -1 means max_model_len.
	truncate       int
	returnTokenIDs bool
	// tokensAsIDs shows tokens in the logprobs object as "token_id:<id>"
	// (vLLM's return_tokens_as_token_ids).
	tokensAsIDs bool
	// badWords are vLLM's bad_words, tokenized into params.BadWords once
	// the tokenizer is at hand (badWordIDs).
	badWords []string
	// promptLogprobs is vLLM's prompt_logprobs field: each choice then
	// carries vLLM's prompt_logprobs list (not streamed).
	promptLogprobs bool
	user           string
	// leftOut is the sampling fields the request did not set, which the
	// model's defaults may fill (withModelDefaults).
	leftOut leftOutFields
	// maxTokensNull is set for "max_tokens": null, which vLLM reads as
	// "as many as fit": the model's max_new_tokens, else all the context
	// each prompt leaves (maxTokensFor). Until then params.MaxTokens holds
	// math.MaxInt, so that checks against it (min_tokens) pass.
	maxTokensNull bool
}

// leftOutFields says which defaultable sampling fields a request left out.
type leftOutFields struct {
	temperature, topP, topK, minP, repetitionPenalty bool
}

// withModelDefaults gives the sampling fields the request left out the
// model's defaults (its generation_config.json), where it has them, as
// vLLM does; the fields the request set stay as set.
func (c *completionRequest) withModelDefaults(d llm.SamplingDefaults) {
	if !c.leftOut.temperature {
		d.Temperature = nil
	}
	if !c.leftOut.topP {
		d.TopP = nil
	}
	if !c.leftOut.topK {
		d.TopK = nil
	}
	if !c.leftOut.minP {
		d.MinP = nil
	}
	if !c.leftOut.repetitionPenalty {
		d.RepetitionPenalty = nil
	}
	d.Apply(&c.params)
}

// raiseTinyTemperature raises a temperature in (0, 0.01) to 0.01, as
// vLLM does. It runs once the model's defaults are in, as vLLM's does.
func (c *completionRequest) raiseTinyTemperature() { c.params.RaiseTinyTemperature() }

// checkGreedyN refuses n > 1 with greedy sampling, as vLLM does
// (SamplingParams._verify_greedy_sampling in vllm/sampling_params.py): the
// choices would all be the same text. It runs once the model's defaults are
// in, since vLLM checks the temperature a request runs with. vLLM raises a
// temperature in (0, 0.01) to 0.01 before it checks, so only 0 is greedy
// here; top_k 1, greedy too in tinyserve, is not refused, as vLLM does not.
func (c *completionRequest) checkGreedyN() *apiError {
	if c.n > 1 && c.params.Temperature == 0 {
		return badRequest("n", "invalid_value", "n must be 1 when using greedy sampling, got %d.", c.n)
	}
	return nil
}

func (c *completionRequest) numPrompts() int { return len(c.texts) + len(c.tokenLists) }

// rawCompletionRequest is the JSON shape. Pointers tell "absent or null"
// from a zero value; RawMessage fields take more than one JSON type.
type rawCompletionRequest struct {
	Model             *string         `json:"model"`
	Prompt            json.RawMessage `json:"prompt"`
	MaxTokens         *int            `json:"max_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	Seed              *int64          `json:"seed"`
	N                 *int            `json:"n"`
	Stop              json.RawMessage `json:"stop"`
	StopTokenIDs      []*int          `json:"stop_token_ids"`
	IgnoreEOS         *bool           `json:"ignore_eos"`
	MinTokens         *int            `json:"min_tokens"`
	Logprobs          *int            `json:"logprobs"`
	PromptLogprobs    *int            `json:"prompt_logprobs"`
	Echo              *bool           `json:"echo"`
	Stream            *bool           `json:"stream"`
	StreamOptions     json.RawMessage `json:"stream_options"`
	ReturnTokenIDs    *bool           `json:"return_token_ids"`
	User              *string         `json:"user"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	BestOf            *int            `json:"best_of"`
	Suffix            *string         `json:"suffix"`
	LogitBias         json.RawMessage `json:"logit_bias"`
	// vLLM's extra sampling parameters.
	MinP                   *float64  `json:"min_p"`
	TruncatePromptTokens   *int      `json:"truncate_prompt_tokens"`
	IncludeStopStrInOutput *bool     `json:"include_stop_str_in_output"`
	SkipSpecialTokens      *bool     `json:"skip_special_tokens"`
	AllowedTokenIDs        []*int    `json:"allowed_token_ids"`
	BadWords               []*string `json:"bad_words"`
	ReturnTokensAsTokenIDs *bool     `json:"return_tokens_as_token_ids"`
	Priority               *int      `json:"priority"`
	AddSpecialTokens       *bool     `json:"add_special_tokens"`
}

// knownCompletionField lists the JSON names of rawCompletionRequest. It is
// checked by exact name because encoding/json matches names without regard
// to case, which would let "Max_Tokens" through.
func knownCompletionField(name string) bool {
	switch name {
	case "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "n",
		"stop", "stop_token_ids", "ignore_eos", "min_tokens", "logprobs", "echo", "stream",
		"stream_options", "return_token_ids", "user", "presence_penalty", "frequency_penalty",
		"repetition_penalty", "best_of", "suffix", "logit_bias", "prompt_logprobs",
		"min_p", "include_stop_str_in_output", "skip_special_tokens", "truncate_prompt_tokens",
		"allowed_token_ids", "return_tokens_as_token_ids", "priority", "bad_words", "add_special_tokens":
		return true
	}
	return false
}

// decodeCompletion decodes and validates everything in a /v1/completions
// body that does not need the tokenizer.
func decodeCompletion(body []byte) (*completionRequest, *apiError) {
	var raw rawCompletionRequest
	fields, e := decodeStrictFields(body, knownCompletionField, &raw)
	if e != nil {
		return nil, e
	}
	texts, tokenLists, e := parsePrompt(raw.Prompt)
	if e != nil {
		return nil, e
	}
	return decodeSampling(&raw, fields, texts, tokenLists)
}

// decodeSampling validates the fields completions and chat completions
// share (raw, with fields the body's members as sent) for the given
// prompts.
func decodeSampling(raw *rawCompletionRequest, fields map[string]json.RawMessage, texts []string, tokenLists [][]int) (*completionRequest, *apiError) {
	var e *apiError
	c := &completionRequest{n: 1, texts: texts, tokenLists: tokenLists}
	if raw.Model != nil {
		c.model = *raw.Model
	}
	if raw.User != nil {
		c.user = *raw.User
	}
	c.addSpecial = raw.AddSpecialTokens == nil || *raw.AddSpecialTokens
	if e := checkUnsupported(raw); e != nil {
		return nil, e
	}
	if raw.N != nil {
		c.n = *raw.N
		if c.n < 1 || c.n > MaxN {
			return nil, badRequest("n", "invalid_value", "n must be in [1, %d], got %d", MaxN, c.n)
		}
	}
	if c.numPrompts()*c.n > MaxChoices {
		return nil, badRequest("n", "invalid_value", "prompts times n must be at most %d, got %d", MaxChoices, c.numPrompts()*c.n)
	}
	c.echo = raw.Echo != nil && *raw.Echo
	c.stream = raw.Stream != nil && *raw.Stream
	c.returnTokenIDs = raw.ReturnTokenIDs != nil && *raw.ReturnTokenIDs
	c.tokensAsIDs = raw.ReturnTokensAsTokenIDs != nil && *raw.ReturnTokensAsTokenIDs
	if e := c.decodeStreamOptions(raw.StreamOptions); e != nil {
		return nil, e
	}

	p := &c.params
	p.MaxTokens = defaultMaxTokens
	if raw.MaxTokens != nil {
		p.MaxTokens = *raw.MaxTokens
	} else if v, sent := fields["max_tokens"]; sent && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		// Left out, max_tokens is 16 (vLLM's and OpenAI's default); null
		// is vLLM's "as many as fit".
		c.maxTokensNull = true
		p.MaxTokens = math.MaxInt
	}
	p.Temperature = defaultTemperature
	if raw.Temperature != nil {
		p.Temperature = *raw.Temperature
	}
	c.leftOut = leftOutFields{
		temperature:       raw.Temperature == nil,
		topP:              raw.TopP == nil,
		topK:              raw.TopK == nil,
		minP:              raw.MinP == nil,
		repetitionPenalty: raw.RepetitionPenalty == nil,
	}
	p.TopP = defaultTopP
	if raw.TopP != nil {
		p.TopP = *raw.TopP
		if p.TopP == 0 {
			// The engine reads 0 as "off"; a client sending 0 means the
			// opposite, so refuse it as vLLM does.
			return nil, badRequest("top_p", "invalid_value", "top_p must be in (0, 1], got 0")
		}
	}
	if raw.TopK != nil {
		p.TopK = *raw.TopK
	}
	if raw.MinTokens != nil {
		p.MinTokens = *raw.MinTokens
	}
	if raw.MinP != nil {
		p.MinP = *raw.MinP
	}
	if raw.TruncatePromptTokens != nil {
		if c.truncate = *raw.TruncatePromptTokens; c.truncate < -1 || c.truncate == 0 {
			return nil, badRequest("truncate_prompt_tokens", "invalid_value", "truncate_prompt_tokens must be -1 (max_model_len) or at least 1, got %d", c.truncate)
		}
	}
	p.IncludeStopStrInOutput = raw.IncludeStopStrInOutput != nil && *raw.IncludeStopStrInOutput
	p.KeepSpecialTokens = raw.SkipSpecialTokens != nil && !*raw.SkipSpecialTokens
	if raw.PresencePenalty != nil {
		p.PresencePenalty = *raw.PresencePenalty
	}
	if raw.FrequencyPenalty != nil {
		p.FrequencyPenalty = *raw.FrequencyPenalty
	}
	if raw.RepetitionPenalty != nil {
		p.RepetitionPenalty = *raw.RepetitionPenalty
		if p.RepetitionPenalty == 0 {
			// The engine reads 0 as "off"; vLLM refuses it.
			return nil, badRequest("repetition_penalty", "invalid_value", "repetition_penalty must be greater than zero, got 0")
		}
	}
	if p.LogitBias, e = parseLogitBias(raw.LogitBias); e != nil {
		return nil, e
	}
	if raw.Seed != nil && *raw.Seed != -1 {
		// vLLM reads seed -1 as no seed (SamplingParams.__post_init__), the
		// "random" that clients such as llama.cpp's write it for; taken as
		// a seed, it would make every such request give the same text.
		p.Seed = raw.Seed
	}
	p.IgnoreEOS = raw.IgnoreEOS != nil && *raw.IgnoreEOS
	if p.StopTokenIDs, e = notNull("stop_token_ids", "stop_token_ids", raw.StopTokenIDs); e != nil {
		return nil, e
	}
	if c.badWords, e = notNull("bad_words", "bad_words", raw.BadWords); e != nil {
		return nil, e
	}
	for i, w := range c.badWords {
		if strings.TrimLeftFunc(w, unicode.IsSpace) == "" {
			return nil, badRequest("bad_words", "invalid_value", "bad_words: the element at index %d is empty or only whitespace", i)
		}
	}
	// Repeats are dropped, as vLLM does; each word makes at least one
	// token sequence, so more words than MaxBadWords can never pass the
	// engine's limits (checked on the sequences once tokenized).
	c.badWords = uniqueStrings(c.badWords)
	if len(c.badWords) > llm.MaxBadWords {
		return nil, badRequest("bad_words", "invalid_value", "bad_words: at most %d distinct words, got %d", llm.MaxBadWords, len(c.badWords))
	}
	if raw.AllowedTokenIDs != nil {
		if p.AllowedTokenIDs, e = notNull("allowed_token_ids", "allowed_token_ids", raw.AllowedTokenIDs); e != nil {
			return nil, e
		}
		if len(p.AllowedTokenIDs) == 0 {
			// An empty list would allow nothing: vLLM refuses it too.
			return nil, badRequest("allowed_token_ids", "invalid_value", "allowed_token_ids must not be empty (leave it out or null to allow every token)")
		}
	}
	p.Logprobs = raw.Logprobs
	if p.Stop, e = parseStop(raw.Stop); e != nil {
		return nil, e
	}
	if e := c.decodeScoring(raw); e != nil {
		return nil, e
	}
	if err := p.Validate(); err != nil {
		return nil, engineError(err)
	}
	return c, nil
}

// decodeScoring decides what of the prompt the engine scores: vLLM's
// prompt_logprobs field, or echo with logprobs (the echoed prompt then comes
// with its own log-probabilities, as vLLM answers it). max_tokens 0, which
// OpenAI accepts with echo only, runs the prompt alone.
func (c *completionRequest) decodeScoring(raw *rawCompletionRequest) *apiError {
	p := &c.params
	if p.MaxTokens == 0 && !c.echo {
		return badRequest("max_tokens", "invalid_value", "max_tokens must be at least 1, got 0 (0 only with echo)")
	}
	if raw.PromptLogprobs != nil {
		switch n := *raw.PromptLogprobs; {
		case n == -1:
			return badRequest("prompt_logprobs", "invalid_value", "prompt_logprobs -1 (the whole vocabulary) is not supported: at most %d", llm.MaxLogprobs)
		case n < 0:
			return badRequest("prompt_logprobs", "invalid_value", "prompt_logprobs must be in [0, %d], got %d", llm.MaxLogprobs, n)
		case c.stream && n > 0:
			return badRequest("prompt_logprobs", "invalid_value", "`prompt_logprobs` are not available when `stream=True`.")
		}
		if !c.stream { // a stream carries no prompt_logprobs list: nothing to compute
			c.promptLogprobs = true
			p.PromptLogprobs = raw.PromptLogprobs
		}
	}
	if c.echo && p.Logprobs != nil && p.PromptLogprobs == nil {
		// As many alternatives per position as logprobs asks: what scoring
		// tools (an evaluation harness's loglikelihood) read.
		p.PromptLogprobs = p.Logprobs
	}
	return nil
}

// checkUnsupported accepts the standard OpenAI fields tinyserve does not
// implement only at their default values, so a client never silently gets
// something other than what it asked for.
func checkUnsupported(raw *rawCompletionRequest) *apiError {
	unsupported := func(param string, got any, def string) *apiError {
		return badRequest(param, "unsupported_parameter", "%s is not supported by tinyserve: only %s is accepted, got %v", param, def, got)
	}
	switch {
	case raw.Suffix != nil && *raw.Suffix != "":
		return unsupported("suffix", fmt.Sprintf("%q", *raw.Suffix), `null or ""`)
	case raw.Priority != nil && *raw.Priority != 0:
		// vLLM takes priority only under --scheduling-policy priority;
		// tinyserve schedules first come, first served.
		return unsupported("priority", *raw.Priority, "0 or null (tinyserve schedules first come, first served)")
	}
	if raw.BestOf != nil {
		n := 1
		if raw.N != nil {
			n = *raw.N
		}
		if *raw.BestOf != n {
			return unsupported("best_of", *raw.BestOf, "null or the value of n")
		}
	}
	return nil
}

// parseLogitBias reads OpenAI's logit_bias, an object from token ids (as
// strings) to biases; null or absent is none. A key is read as vLLM reads
// it, with Python's int() (pythonInt): " 5", "05", "+5" and "0_5" are all
// token 5. Keys that name the same id are kept as vLLM's dict comprehension
// keeps them: the value of the one written last wins, except that a key
// written twice character for character stays where it first appeared
// (a Python dict keeps a repeated key's first place and its last value).
func parseLogitBias(raw json.RawMessage) (map[int]float64, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	notObject := badRequest("logit_bias", "invalid_type", "logit_bias: expected an object, got %s", jsonKind(raw))
	if raw[0] != '{' {
		return nil, notObject
	}
	type entry struct {
		key string
		val json.RawMessage
	}
	var entries []entry
	at := map[string]int{} // a key's place in entries
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the '{'
		return nil, notObject
	}
	for dec.More() {
		tok, err := dec.Token()
		k, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, notObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, notObject
		}
		if i, seen := at[k]; seen {
			entries[i].val = v
			continue
		}
		at[k] = len(entries)
		entries = append(entries, entry{k, v})
	}
	if len(entries) == 0 {
		return nil, nil
	}
	out := make(map[int]float64, len(entries))
	for _, e := range entries {
		id, ok, fits := pythonInt(e.key)
		switch {
		case !ok:
			return nil, badRequest("logit_bias", "invalid_value", "logit_bias: key %q is not a token id", shorten(e.key))
		case !fits:
			return nil, badRequest("logit_bias", "invalid_value", "logit_bias: key %q is out of the vocabulary's range", shorten(e.key))
		}
		var b *float64
		if err := json.Unmarshal(e.val, &b); err != nil || b == nil {
			if jsonKind(e.val) == "a number" {
				// A number beyond float64 (1e400) fails to decode: it is
				// out of range, not of the wrong type.
				return nil, badRequest("logit_bias", "invalid_value", "logit_bias: the bias of token %d must be in [-100, 100], got %s", id, bytes.TrimSpace(e.val))
			}
			return nil, badRequest("logit_bias", "invalid_type", "logit_bias: the bias of token %d must be a number, got %s", id, jsonKind(e.val))
		}
		out[id] = *b
	}
	return out, nil
}

func (c *completionRequest) decodeStreamOptions(raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if !c.stream {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil && fields != nil && len(fields) == 0 {
			// vLLM refuses stream_options only when they are truthy,
			// as Python sees a dict: an empty one passes.
			return nil
		}
		// vLLM's wording.
		return badRequest("stream_options", "invalid_value", "Stream options can only be defined when `stream=True`.")
	}
	// include_obfuscation is OpenAI's (the SDKs' completions parameters
	// share the chat stream options): true asks for random padding on each
	// event against length side channels. tinyserve never pads, so false
	// and null are accepted and true is refused rather than ignored.
	var so struct {
		IncludeUsage         *bool `json:"include_usage"`
		ContinuousUsageStats *bool `json:"continuous_usage_stats"`
		IncludeObfuscation   *bool `json:"include_obfuscation"`
	}
	known := func(k string) bool {
		return k == "include_usage" || k == "continuous_usage_stats" || k == "include_obfuscation"
	}
	if e := decodeStrict(raw, known, &so); e != nil {
		if e.Param == "" {
			e.Param = "stream_options"
		} else {
			e.Param = "stream_options." + e.Param
		}
		e.Message = "stream_options: " + e.Message
		return e
	}
	if so.IncludeObfuscation != nil && *so.IncludeObfuscation {
		return badRequest("stream_options.include_obfuscation", "unsupported_parameter",
			"stream_options.include_obfuscation is not supported by tinyserve: only false or null is accepted, got true (tinyserve does not pad stream events)")
	}
	c.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	// vLLM's: usage on every chunk too, only together with include_usage.
	c.continuousUsage = c.includeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
	return nil
}

const promptShapes = "a string, an array of strings, an array of token ids, or an array of arrays of token ids"
