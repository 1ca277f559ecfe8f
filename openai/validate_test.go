package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tinyserve/tinyserve/llm"
)

type errJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// serve runs one request through h and returns the recorder.
func serve(t *testing.T, h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decodeErr checks that rec carries an OpenAI error body and returns it.
func decodeErr(t *testing.T, rec *httptest.ResponseRecorder) errJSON {
	t.Helper()
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var e errJSON
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "body: %s", rec.Body.String())
	require.NotEmpty(t, e.Error.Message)
	return e
}

// TestValidation holds one row per validation rule of /v1/completions.
func TestValidation(t *testing.T) {
	long := strings.Repeat("x", 60) // 60 prompt + 16 default max_tokens > 64
	many := `["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]`
	tests := []struct {
		name   string
		body   string
		status int
		param  string // "" means null
		code   string
		msg    string // a substring of the message, when it matters
	}{
		{"syntax error", `{"prompt":`, 400, "", "invalid_json", "not valid JSON"},
		{"trailing garbage", `{"prompt":"a"} x`, 400, "", "invalid_json", ""},
		{"array body", `[]`, 400, "", "invalid_json", "JSON object"},
		{"null body", `null`, 400, "", "invalid_json", "JSON object"},
		{"empty body", ``, 400, "", "invalid_json", ""},
		{"unknown fields named", `{"prompt":"a","foo":1,"bar":2}`, 400, "bar", "unknown_field", `"bar", "foo"`},
		{"field name case matters", `{"Prompt":"a"}`, 400, "Prompt", "unknown_field", `"Prompt"`},
		{"vllm extra not supported", `{"prompt":"a","guided_json":{}}`, 400, "guided_json", "unknown_field", ""},
		{"min_p above 1", `{"prompt":"a","min_p":1.5}`, 400, "min_p", "invalid_value", "[0, 1]"},
		{"truncate_prompt_tokens 0", `{"prompt":"a","truncate_prompt_tokens":0}`, 400, "truncate_prompt_tokens", "invalid_value", "at least 1"},
		{"truncate_prompt_tokens -2", `{"prompt":"a","truncate_prompt_tokens":-2}`, 400, "truncate_prompt_tokens", "invalid_value", "at least 1"},
		{"truncate_prompt_tokens over the context", `{"prompt":"a","truncate_prompt_tokens":65}`, 400, "truncate_prompt_tokens", "invalid_value", "greater than max_model_len (64)"},
		{"min_p negative", `{"prompt":"a","min_p":-0.1}`, 400, "min_p", "invalid_value", "[0, 1]"},
		{"min_p wrong type", `{"prompt":"a","min_p":"x"}`, 400, "min_p", "invalid_type", ""},
		{"include_stop_str_in_output wrong type", `{"prompt":"a","include_stop_str_in_output":1}`, 400, "include_stop_str_in_output", "invalid_type", ""},
		{"skip_special_tokens wrong type", `{"prompt":"a","skip_special_tokens":"no"}`, 400, "skip_special_tokens", "invalid_type", ""},
		{"missing prompt", `{}`, 400, "prompt", "missing_required_parameter", ""},
		{"null prompt", `{"prompt":null}`, 400, "prompt", "missing_required_parameter", ""},
		{"empty prompt", `{"prompt":""}`, 400, "prompt", "invalid_value", "empty"},
		{"empty prompt list", `{"prompt":[]}`, 400, "prompt", "invalid_value", "empty"},
		{"empty string in list", `{"prompt":["a",""]}`, 400, "prompt", "invalid_value", "empty"},
		{"empty token list in list", `{"prompt":[[1],[]]}`, 400, "prompt", "invalid_value", "empty"},
		{"mixed prompt list", `{"prompt":["a",1]}`, 400, "prompt", "invalid_type", ""},
		{"mixed nested list", `{"prompt":[[1],2]}`, 400, "prompt", "invalid_type", ""},
		{"prompt object", `{"prompt":{}}`, 400, "prompt", "invalid_type", ""},
		{"prompt number", `{"prompt":5}`, 400, "prompt", "invalid_type", ""},
		{"float token id", `{"prompt":[1.5]}`, 400, "prompt", "invalid_type", ""},
		{"token id above vocab", `{"prompt":[1,257]}`, 400, "prompt", "invalid_value", "257"},
		{"negative token id", `{"prompt":[-1]}`, 400, "prompt", "invalid_value", "-1"},
		{"nested token id above vocab", `{"prompt":[[1],[999]]}`, 400, "prompt", "invalid_value", "999"},
		{"null token id", `{"prompt":[15496,null]}`, 400, "prompt", "invalid_type", "prompt: the element at index 1 must be an integer, not null"},
		{"null nested token id", `{"prompt":[[1],[null]]}`, 400, "prompt", "invalid_type", "prompt[1]: the element at index 0 must be an integer, not null"},
		{"null string prompt", `{"prompt":["a",null]}`, 400, "prompt", "invalid_type", "prompt: the element at index 1 must be a string, not null"},
		{"null first prompt", `{"prompt":[null]}`, 400, "prompt", "invalid_type", "index 0"},
		{"string token id", `{"prompt":[1,"a"]}`, 400, "prompt", "invalid_type", "token ids must be integers, got string"},
		{"model wrong type", `{"prompt":"a","model":5}`, 400, "model", "invalid_type", ""},
		{"unknown model", `{"prompt":"a","model":"gpt-4"}`, 404, "model", "model_not_found", "The model `gpt-4` does not exist."},
		{"max_tokens string", `{"prompt":"a","max_tokens":"16"}`, 400, "max_tokens", "invalid_type", "integer"},
		{"max_tokens float", `{"prompt":"a","max_tokens":1.5}`, 400, "max_tokens", "invalid_type", ""},
		{"max_tokens zero", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", "invalid_value", ""},
		{"max_tokens huge", `{"prompt":"a","max_tokens":1e30}`, 400, "max_tokens", "invalid_type", ""},
		{"whole float with a fraction elsewhere", `{"prompt":"a","max_tokens":4.0,"n":1.5}`, 400, "n", "invalid_type", "got number 1.5"},
		{"whole float beyond int64", `{"prompt":"a","seed":1e19}`, 400, "seed", "invalid_type", "got number 1e19"},
		{"whole float token id beyond the vocabulary", `{"prompt":[2.57e2]}`, 400, "prompt", "invalid_value", "257"},
		{"fractional token id after a whole one", `{"prompt":[[1.0],[2.5]]}`, 400, "prompt", "invalid_type", ""},
		{"temperature negative", `{"prompt":"a","temperature":-1}`, 400, "temperature", "invalid_value", ""},
		{"temperature string", `{"prompt":"a","temperature":"hot"}`, 400, "temperature", "invalid_type", "number"},
		{"temperature overflows", `{"prompt":"a","temperature":1e400}`, 400, "temperature", "invalid_value", "temperature: the number 1e400 is out of range"},
		{"max_tokens overflows", `{"prompt":"a","max_tokens":-99999999999999999999}`, 400, "max_tokens", "invalid_value", "max_tokens: the number -99999999999999999999 is out of range"},
		{"top_p above 1", `{"prompt":"a","top_p":1.5}`, 400, "top_p", "invalid_value", ""},
		{"top_p zero", `{"prompt":"a","top_p":0}`, 400, "top_p", "invalid_value", "(0, 1]"},
		{"top_k below -1", `{"prompt":"a","top_k":-2}`, 400, "top_k", "invalid_value", ""},
		{"min_tokens negative", `{"prompt":"a","min_tokens":-1}`, 400, "min_tokens", "invalid_value", ""},
		{"min_tokens over max_tokens", `{"prompt":"a","min_tokens":5,"max_tokens":4}`, 400, "min_tokens", "invalid_value", ""},
		{"n zero", `{"prompt":"a","n":0}`, 400, "n", "invalid_value", ""},
		{"n too large", `{"prompt":"a","n":129}`, 400, "n", "invalid_value", ""},
		{"n string", `{"prompt":"a","n":"2"}`, 400, "n", "invalid_type", ""},
		{"too many choices", `{"prompt":[` + strings.Repeat(`"a",`, 99) + `"a"],"n":11}`, 400, "n", "invalid_value", "1024"},
		{"seed string", `{"prompt":"a","seed":"1"}`, 400, "seed", "invalid_type", ""},
		{"stop number", `{"prompt":"a","stop":5}`, 400, "stop", "invalid_type", ""},
		{"stop list of numbers", `{"prompt":"a","stop":[5]}`, 400, "stop", "invalid_type", ""},
		{"stop null element", `{"prompt":"a","stop":["a",null]}`, 400, "stop", "invalid_type", "stop: the element at index 1 must be a string, not null"},
		{"stop empty string", `{"prompt":"a","stop":[""]}`, 400, "stop", "invalid_value", ""},
		{"too many stop strings", `{"prompt":"a","stop":` + many + `}`, 400, "stop", "invalid_value", "16"},
		{"stop_token_ids negative", `{"prompt":"a","stop_token_ids":[-1]}`, 400, "stop_token_ids", "invalid_value", ""},
		{"stop_token_ids above vocab", `{"prompt":"a","stop_token_ids":[300]}`, 400, "stop_token_ids", "invalid_value", ""},
		{"stop_token_ids null element", `{"prompt":"a","stop_token_ids":[null]}`, 400, "stop_token_ids", "invalid_type", "stop_token_ids: the element at index 0 must be an integer, not null"},
		{"stop_token_ids strings", `{"prompt":"a","stop_token_ids":["a"]}`, 400, "stop_token_ids", "invalid_type", ""},
		{"ignore_eos string", `{"prompt":"a","ignore_eos":"true"}`, 400, "ignore_eos", "invalid_type", "boolean"},
		{"logprobs too many", `{"prompt":"a","logprobs":21}`, 400, "logprobs", "invalid_value", ""},
		{"logprobs negative", `{"prompt":"a","logprobs":-1}`, 400, "logprobs", "invalid_value", ""},
		{"logprobs bool", `{"prompt":"a","logprobs":true}`, 400, "logprobs", "invalid_type", ""},
		{"echo number", `{"prompt":"a","echo":1}`, 400, "echo", "invalid_type", ""},
		{"prompt_logprobs -1", `{"prompt":"a","prompt_logprobs":-1}`, 400, "prompt_logprobs", "invalid_value", "whole vocabulary"},
		{"prompt_logprobs over 20", `{"prompt":"a","prompt_logprobs":21}`, 400, "prompt_logprobs", "invalid_value", "[0, 20]"},
		{"prompt_logprobs on a stream", `{"prompt":"a","prompt_logprobs":1,"stream":true}`, 400, "prompt_logprobs", "invalid_value", "`prompt_logprobs` are not available when `stream=True`."},
		{"max_tokens 0 with prompt_logprobs, without echo", `{"prompt":"a","max_tokens":0,"prompt_logprobs":1}`, 400, "max_tokens", "invalid_value", "0 only with echo"},
		{"prompt_logprobs negative on a stream", `{"prompt":"a","prompt_logprobs":-2,"stream":true}`, 400, "prompt_logprobs", "invalid_value", "[0, 20]"},
		{"max_tokens 0 without echo", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", "invalid_value", "at least 1"},
		{"echo only with min_tokens", `{"prompt":"a","echo":true,"max_tokens":0,"min_tokens":1}`, 400, "min_tokens", "invalid_value", "at most max_tokens (0)"},
		{"stream string", `{"prompt":"a","stream":"yes"}`, 400, "stream", "invalid_type", ""},
		{"stream_options without stream", `{"prompt":"a","stream_options":{"include_usage":true}}`, 400, "stream_options", "invalid_value", "Stream options can only be defined when `stream=True`."},
		{"stream_options of nulls without stream", `{"prompt":"a","stream_options":{"include_usage":null}}`, 400, "stream_options", "invalid_value", "Stream options can only be defined when `stream=True`."},
		{"stream_options unknown field", `{"prompt":"a","stream":true,"stream_options":{"include_bananas":true}}`, 400, "stream_options.include_bananas", "unknown_field", ""},
		{"stream_options wrong type", `{"prompt":"a","stream":true,"stream_options":{"include_usage":"yes"}}`, 400, "stream_options.include_usage", "invalid_type", ""},
		{"stream_options obfuscation", `{"prompt":"a","stream":true,"stream_options":{"include_obfuscation":true}}`, 400, "stream_options.include_obfuscation", "unsupported_parameter", "only false or null"},
		{"stream_options obfuscation wrong type", `{"prompt":"a","stream":true,"stream_options":{"include_obfuscation":0}}`, 400, "stream_options.include_obfuscation", "invalid_type", ""},
		{"stream_options not object", `{"prompt":"a","stream":true,"stream_options":true}`, 400, "stream_options", "invalid_json", ""},
		{"return_token_ids string", `{"prompt":"a","return_token_ids":"y"}`, 400, "return_token_ids", "invalid_type", ""},
		{"user number", `{"prompt":"a","user":5}`, 400, "user", "invalid_type", ""},
		{"presence_penalty over 2", `{"prompt":"a","presence_penalty":2.5}`, 400, "presence_penalty", "invalid_value", "must be in [-2, 2], got 2.5"},
		{"frequency_penalty under -2", `{"prompt":"a","frequency_penalty":-3}`, 400, "frequency_penalty", "invalid_value", "must be in [-2, 2]"},
		{"repetition_penalty 0", `{"prompt":"a","repetition_penalty":0}`, 400, "repetition_penalty", "invalid_value", "greater than zero"},
		{"repetition_penalty negative", `{"prompt":"a","repetition_penalty":-1}`, 400, "repetition_penalty", "invalid_value", "greater than zero"},
		{"penalty wrong type", `{"prompt":"a","presence_penalty":"0"}`, 400, "presence_penalty", "invalid_type", ""},
		{"best_of", `{"prompt":"a","best_of":3}`, 400, "best_of", "unsupported_parameter", ""},
		{"suffix", `{"prompt":"a","suffix":"z"}`, 400, "suffix", "unsupported_parameter", ""},
		{"logit_bias key not an id", `{"prompt":"a","logit_bias":{"x":10}}`, 400, "logit_bias", "invalid_value", `key "x" is not a token id`},
		// Python's int(), which vLLM reads keys with, refuses these too.
		{"logit_bias key trailing underscore", `{"prompt":"a","logit_bias":{"5_":10}}`, 400, "logit_bias", "invalid_value", `key "5_" is not a token id`},
		{"logit_bias key space after sign", `{"prompt":"a","logit_bias":{"+ 5":10}}`, 400, "logit_bias", "invalid_value", "not a token id"},
		{"logit_bias key decimal point", `{"prompt":"a","logit_bias":{"5.0":10}}`, 400, "logit_bias", "invalid_value", "not a token id"},
		{"logit_bias key empty", `{"prompt":"a","logit_bias":{"":10}}`, 400, "logit_bias", "invalid_value", "not a token id"},
		{"logit_bias key beyond int64", `{"prompt":"a","logit_bias":{"99999999999999999999":10}}`, 400, "logit_bias", "invalid_value", "out of the vocabulary's range"},
		{"logit_bias negative id", `{"prompt":"a","logit_bias":{"-1":10}}`, 400, "logit_bias", "invalid_value", "non-negative"},
		{"logit_bias negative id padded", `{"prompt":"a","logit_bias":{" -01 ":10}}`, 400, "logit_bias", "invalid_value", "non-negative"},
		{"logit_bias id outside the vocabulary", `{"prompt":"a","logit_bias":{"257":10}}`, 400, "logit_bias", "invalid_value", "out of vocabulary range"},
		{"logit_bias over 100", `{"prompt":"a","logit_bias":{"5":101}}`, 400, "logit_bias", "invalid_value", "[-100, 100]"},
		{"logit_bias beyond float64", `{"prompt":"a","logit_bias":{"5":-1e400}}`, 400, "logit_bias", "invalid_value", "must be in [-100, 100], got -1e400"},
		{"logit_bias value null", `{"prompt":"a","logit_bias":{"5":null}}`, 400, "logit_bias", "invalid_type", "must be a number"},
		{"logit_bias value string", `{"prompt":"a","logit_bias":{"5":"1"}}`, 400, "logit_bias", "invalid_type", "must be a number"},
		{"logit_bias array", `{"prompt":"a","logit_bias":[]}`, 400, "logit_bias", "invalid_type", ""},
		{"allowed_token_ids empty", `{"prompt":"a","allowed_token_ids":[]}`, 400, "allowed_token_ids", "invalid_value", "must not be empty"},
		{"allowed_token_ids null element", `{"prompt":"a","allowed_token_ids":[5,null]}`, 400, "allowed_token_ids", "invalid_type", "index 1"},
		{"allowed_token_ids negative", `{"prompt":"a","allowed_token_ids":[-1]}`, 400, "allowed_token_ids", "invalid_value", "non-negative"},
		{"allowed_token_ids outside the vocabulary", `{"prompt":"a","allowed_token_ids":[5,257]}`, 400, "allowed_token_ids", "invalid_value", "out of vocabulary range"},
		{"allowed_token_ids string", `{"prompt":"a","allowed_token_ids":"5"}`, 400, "allowed_token_ids", "invalid_type", ""},
		{"bad_words empty word", `{"prompt":"a","bad_words":["x",""]}`, 400, "bad_words", "invalid_value", "index 1 is empty"},
		{"bad_words whitespace", `{"prompt":"a","bad_words":[" \t"]}`, 400, "bad_words", "invalid_value", "only whitespace"},
		{"bad_words null element", `{"prompt":"a","bad_words":[null]}`, 400, "bad_words", "invalid_type", "index 0"},
		{"bad_words string", `{"prompt":"a","bad_words":"x"}`, 400, "bad_words", "invalid_type", ""},
		{"bad_words too many", `{"prompt":"a","bad_words":[` + manyWords(129) + `]}`, 400, "bad_words", "invalid_value", "at most 128 distinct words"},
		// On the fake's byte tokenizer 100 words of 11 bytes are 100
		// sequences of 11 tokens (the spaced forms are longer, so left
		// out): over the tokens limit only once tokenized.
		{"bad_words over the token limit", `{"prompt":"a","bad_words":[` + manyLongWords(100, 11) + `]}`, 400, "bad_words", "invalid_value", "at most 1024 tokens"},
		{"n with greedy sampling", `{"prompt":"a","n":2,"temperature":0}`, 400, "n", "invalid_value", "n must be 1 when using greedy sampling, got 2."},
		{"priority", `{"prompt":"a","priority":1}`, 400, "priority", "unsupported_parameter", "first come, first served"},
		{"return_tokens_as_token_ids string", `{"prompt":"a","return_tokens_as_token_ids":"yes"}`, 400, "return_tokens_as_token_ids", "invalid_type", ""},
		{"context length", `{"prompt":"` + long + `"}`, 400, "prompt", "context_length_exceeded",
			"This model's maximum context length is 64 tokens. However, you requested 76 tokens (60 in the prompt, 16 in the completion). Please reduce the length of the prompt or completion."},
		{"context length with max_tokens", `{"prompt":[1,2,3,4],"max_tokens":61}`, 400, "prompt", "context_length_exceeded", "(4 in the prompt, 61 in the completion)"},
	}
	f := newFake()
	h := NewHandler(f)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, h, "POST", "/v1/completions", tc.body)
			require.Equal(t, tc.status, rec.Code, "body: %s", rec.Body.String())
			e := decodeErr(t, rec)
			if tc.param == "" {
				assert.Nil(t, e.Error.Param)
			} else if assert.NotNil(t, e.Error.Param) {
				assert.Equal(t, tc.param, *e.Error.Param)
			}
			if assert.NotNil(t, e.Error.Code) {
				assert.Equal(t, tc.code, *e.Error.Code)
			}
			// A 404 too: OpenAI's type for an unknown model is
			// invalid_request_error (code model_not_found).
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			assert.Contains(t, e.Error.Message, tc.msg)
		})
	}
	assert.Empty(t, f.requests(), "no invalid request may reach the engine")
	// The server stays healthy after all of that.
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	assert.Equal(t, 200, rec.Code, rec.Body.String())
}

// manyWords is n distinct JSON strings, comma-separated.
func manyWords(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf(`"w%d"`, i)
	}
	return strings.Join(w, ",")
}

// manyLongWords is n distinct JSON strings of at least size bytes.
func manyLongWords(n, size int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf(`"%0*d"`, size, i)
	}
	return strings.Join(w, ",")
}

// TestAcceptedDefaults checks that unsupported standard fields pass at their
// default values, and that defaults apply when fields are null (max_tokens
// apart, see TestMaxTokensNull).
func TestAcceptedDefaults(t *testing.T) {
	tests := []struct {
		name string
		body string
		max  int
	}{
		// vLLM's: null is as many as fit the fake's 64-token context.
		{"null max_tokens fills the context", `{"prompt":"a","max_tokens":null}`, 63},
		{"absent max_tokens means 16", `{"prompt":"a"}`, 16},
		{"penalties at defaults", `{"prompt":"a","max_tokens":2,"presence_penalty":0,"frequency_penalty":0,"repetition_penalty":1}`, 2},
		{"null penalties", `{"prompt":"a","max_tokens":2,"presence_penalty":null,"frequency_penalty":null,"repetition_penalty":null}`, 2},
		{"best_of equal to n", `{"prompt":"a","max_tokens":2,"best_of":1}`, 2},
		{"empty suffix and logit_bias", `{"prompt":"a","max_tokens":2,"suffix":"","logit_bias":{}}`, 2},
		{"null suffix and logit_bias", `{"prompt":"a","max_tokens":2,"suffix":null,"logit_bias":null}`, 2},
		{"stream_options null without stream", `{"prompt":"a","max_tokens":2,"stream_options":null}`, 2},
		// vLLM's check is Python's truthiness: an empty dict passes.
		{"stream_options empty without stream", `{"prompt":"a","max_tokens":2,"stream_options":{ }}`, 2},
		// The OpenAI SDKs type completions' stream_options with the chat
		// ones, include_obfuscation included.
		{"stream_options without obfuscation", `{"prompt":"a","max_tokens":2,"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}}`, 2},
		{"stream_options obfuscation null", `{"prompt":"a","max_tokens":2,"stream":true,"stream_options":{"include_obfuscation":null}}`, 2},
		{"served model name", `{"prompt":"a","max_tokens":2,"model":"fake"}`, 2},
		{"user and stop string", `{"prompt":"a","max_tokens":2,"user":"u1","stop":"zz","stop_token_ids":[256]}`, 2},
		{"priority 0, null allowed_token_ids", `{"prompt":"a","max_tokens":2,"priority":0,"allowed_token_ids":null,"return_tokens_as_token_ids":false}`, 2},
		{"null and empty bad_words", `{"prompt":"a","max_tokens":2,"bad_words":null}`, 2},
		{"empty bad_words", `{"prompt":"a","max_tokens":2,"bad_words":[]}`, 2},
		{"repeated bad_words count once", `{"prompt":"a","max_tokens":2,"bad_words":[` + strings.Repeat(`"x",`, 200) + `"x"]}`, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			rec := serve(t, NewHandler(f), "POST", "/v1/completions", tc.body)
			require.Equal(t, 200, rec.Code, rec.Body.String())
			reqs := f.requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, tc.max, reqs[0].Params.MaxTokens)
			assert.Equal(t, 1.0, reqs[0].Params.Temperature, "vLLM's default temperature")
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	h := NewHandler(newFake(), WithMaxBodyBytes(100))
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"`+strings.Repeat("a", 200)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Equal(t, typeInvalidRequest, decodeErr(t, rec).Error.Type)
}

// TestPenaltiesAndBiasReachTheEngine: presence, frequency and repetition
// penalties and the logit bias pass to the engine as given.
func TestPenaltiesAndBiasReachTheEngine(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"presence_penalty":-2,"frequency_penalty":0.5,"repetition_penalty":1.3}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	p := f.requests()[0].Params
	assert.Equal(t, -2.0, p.PresencePenalty)
	assert.Equal(t, 0.5, p.FrequencyPenalty)
	assert.Equal(t, 1.3, p.RepetitionPenalty)

	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"logit_bias":{"98":-100,"0":2.5}}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, map[int]float64{98: -100, 0: 2.5}, f.requests()[1].Params.LogitBias)
}

// TestGreedyN: n > 1 is refused with temperature 0, whether the request or
// the model's defaults set it, as vLLM refuses it; a temperature above 0,
// however small (vLLM samples it at 0.01), and top_k 1 are not refused.
func TestGreedyN(t *testing.T) {
	for _, body := range []string{
		`{"prompt":"a","max_tokens":2,"n":1,"temperature":0}`,
		`{"prompt":"a","max_tokens":2,"n":2,"temperature":1e-6}`,
		`{"prompt":"a","max_tokens":2,"n":2,"top_k":1}`,
	} {
		rec := serve(t, NewHandler(newFake()), "POST", "/v1/completions", body)
		assert.Equal(t, 200, rec.Code, "%s: %s", body, rec.Body.String())
	}
	f := newFake()
	zero := 0.0
	f.info.Defaults = llm.SamplingDefaults{Temperature: &zero}
	h := NewHandler(f)
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"n":2}`)
	require.Equal(t, 400, rec.Code, rec.Body.String())
	assert.Equal(t, "n must be 1 when using greedy sampling, got 2.", decodeErr(t, rec).Error.Message)
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"n":2,"temperature":0.5}`)
	assert.Equal(t, 200, rec.Code, rec.Body.String())
	require.Len(t, f.requests(), 2, "only the request that set its temperature reached the engine")
}

// TestTinyTemperatureIsRaised: a temperature above 0 and below 0.01, the
// request's or the model's, reaches the engine as 0.01, as vLLM raises it;
// 0 stays greedy and 0.01 and above pass as given.
func TestTinyTemperatureIsRaised(t *testing.T) {
	tests := []struct {
		body string
		want float64
	}{
		{`{"prompt":"a","max_tokens":2,"temperature":0}`, 0},
		{`{"prompt":"a","max_tokens":2,"temperature":1e-6}`, 0.01},
		{`{"prompt":"a","max_tokens":2,"temperature":0.005}`, 0.01},
		{`{"prompt":"a","max_tokens":2,"temperature":0.01}`, 0.01},
		{`{"prompt":"a","max_tokens":2,"temperature":0.02}`, 0.02},
	}
	for _, tc := range tests {
		f := newFake()
		rec := serve(t, NewHandler(f), "POST", "/v1/completions", tc.body)
		require.Equal(t, 200, rec.Code, rec.Body.String())
		assert.Equal(t, tc.want, f.requests()[0].Params.Temperature, tc.body)
	}
	f := newFake()
	tiny := 1e-4
	f.info.Defaults = llm.SamplingDefaults{Temperature: &tiny}
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, 0.01, f.requests()[0].Params.Temperature, "the model's default is raised too")
}

// TestSeedMinusOneIsNoSeed: vLLM reads seed -1 as no seed, so each choice
// is sampled afresh (the engine's own seeds); other negative seeds are seeds.
func TestSeedMinusOneIsNoSeed(t *testing.T) {
	f := newFake()
	h := NewHandler(f)
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"n":2,"seed":-1}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"n":2,"seed":-2}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	reqs := f.requests()
	require.Len(t, reqs, 4)
	assert.Nil(t, reqs[0].Params.Seed)
	assert.Nil(t, reqs[1].Params.Seed)
	if assert.NotNil(t, reqs[2].Params.Seed) && assert.NotNil(t, reqs[3].Params.Seed) {
		assert.Equal(t, []int64{-2, -1}, []int64{*reqs[2].Params.Seed, *reqs[3].Params.Seed}, "seed -2's second choice has seed -1, a seed")
	}
}

// TestLogitBiasKeysAsPythonInt: vLLM turns each logit_bias key into a token
// id with Python's int(), so keys with whitespace, a sign, leading zeros or
// underscores between digits name the token they spell; keys naming the
// same token keep the value of the one written last, as vLLM's dict does.
func TestLogitBiasKeysAsPythonInt(t *testing.T) {
	tests := []struct {
		name string
		bias string
		want map[int]float64
	}{
		{"spelled variously", `{"05":1," 6":2,"+7":3,"1_0":4,"\t11\n":5,"0_0_12":6}`,
			map[int]float64{5: 1, 6: 2, 7: 3, 10: 4, 11: 5, 12: 6}},
		{"Unicode space and digits", `{"\u00a0\u0661\u0663\u3000":1,"\uff11\uff14":2}`, map[int]float64{13: 1, 14: 2}},
		{"the later of two spellings wins", `{"5":1,"05":2}`, map[int]float64{5: 2}},
		{"the later of two spellings wins, reversed", `{"05":2,"5":1}`, map[int]float64{5: 1}},
		// {"5":1,"05":2,"5":3} is the dict {"5":3,"05":2} to Python: the
		// repeated key keeps its first place, so "05" comes last.
		{"a repeated key keeps its first place", `{"5":1,"05":2,"5":3}`, map[int]float64{5: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"logit_bias":`+tc.bias+`}`)
			require.Equal(t, 200, rec.Code, rec.Body.String())
			assert.Equal(t, tc.want, f.requests()[0].Params.LogitBias)
		})
	}
}

// TestPythonInt checks pythonInt against what CPython's int(str) answers
// (each row's expectation was read from Python 3.11).
func TestPythonInt(t *testing.T) {
	tests := []struct {
		in       string
		want     int
		ok, fits bool
	}{
		{"5", 5, true, true},
		{"05", 5, true, true},
		{"+5", 5, true, true},
		{"-5", -5, true, true},
		{"-0", 0, true, true},
		{" 5", 5, true, true},
		{"5 ", 5, true, true},
		{"\t\n\v\f\r 5 \r\n", 5, true, true},
		{"\u00855\u00a0", 5, true, true},
		{"\u20285\u3000", 5, true, true},
		{"1_0", 10, true, true},
		{"0_5", 5, true, true},
		{"1_2_3", 123, true, true},
		{"00000000000000000000000000007", 7, true, true},
		{"\u0665", 5, true, true},               // ARABIC-INDIC DIGIT FIVE
		{"\uff11\uff15", 15, true, true},        // FULLWIDTH DIGITS
		{"\U0001d7ce\U0001d7e1", 9, true, true}, // MATHEMATICAL BOLD ZERO, DOUBLE-STRUCK NINE
		{"1_\u0662", 12, true, true},
		{"9223372036854775807", 9223372036854775807, true, true},
		{"9223372036854775808", 0, true, false},
		{"-9223372036854775808", math.MinInt, true, true},
		{"-9223372036854775809", 0, true, false},
		{"-99999999999999999999", 0, true, false},
		{"", 0, false, false},
		{" ", 0, false, false},
		{"+", 0, false, false},
		{"-", 0, false, false},
		{"_5", 0, false, false},
		{"5_", 0, false, false},
		{"5__0", 0, false, false},
		{"+_5", 0, false, false},
		{"+ 5", 0, false, false},
		{"+-5", 0, false, false},
		{"5 5", 0, false, false},
		{"5.0", 0, false, false},
		{"1e3", 0, false, false},
		{"0x5", 0, false, false},
		{"\x1c5", 0, false, false},   // str.isspace, but not stripped by int()
		{"\u200b5", 0, false, false}, // ZERO WIDTH SPACE is not whitespace
		{"x", 0, false, false},
	}
	for _, tc := range tests {
		in := tc.in
		v, ok, fits := pythonInt(in)
		assert.Equal(t, tc.ok, ok, "%q ok", in)
		assert.Equal(t, tc.fits, fits, "%q fits", in)
		if tc.ok && tc.fits {
			assert.Equal(t, tc.want, v, "%q", in)
		}
	}
}

// TestWholeFloatsAreIntegers: integer fields and token ids given as whole
// numbers in decimal or exponent form (10.0, 1e1), as a Python client that
// computes them in floats sends them, are taken as the integers they are,
// as vLLM's pydantic models take them; the request is otherwise the same.
func TestWholeFloatsAreIntegers(t *testing.T) {
	f := newFake()
	h := NewHandler(f)
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":[72.0,1.05e2],"max_tokens":4.0,"n":2.0,"seed":-3.0,"logprobs":1e0,`+
		`"stop_token_ids":[5e1],"min_tokens":1.0,"temperature":1,"top_k":2.0,"stop":"x<&>"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":[72,105],"max_tokens":4,"n":2,"seed":-3,"logprobs":1,`+
		`"stop_token_ids":[50],"min_tokens":1,"temperature":1,"top_k":2,"stop":"x<&>"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	reqs := f.requests()
	require.Len(t, reqs, 4)
	for i := range 2 {
		got, want := reqs[i], reqs[i+2]
		got.ID, want.ID = "", ""
		assert.Equal(t, want, got, "choice %d", i)
	}
	assert.Equal(t, []int{72, 105}, reqs[0].PromptTokens)
	assert.Equal(t, 4, reqs[0].Params.MaxTokens)
	assert.Equal(t, []string{"x<&>"}, reqs[0].Params.Stop, "strings survive the rewrite")

	rec = serve(t, h, "POST", "/tokenize", `{"prompt":"hi"}`)
	require.Equal(t, 200, rec.Code)
	rec = serve(t, h, "POST", "/detokenize", `{"tokens":[104.0,1.05e2]}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), `"prompt":"hi"`)
}

// TestWholeFloatsChangeNothingElse: a body with max_tokens 4.0 is
// answered as its twin with 4 in every other respect: the same field's
// error first, in the body's order, when several are wrong; a duplicate
// key's earlier value refused as it is there; strings as written.
func TestWholeFloatsChangeNothingElse(t *testing.T) {
	for _, rest := range []string{
		`"temperature":"hot","n":"x"`,
		`"top_k":1e400,"seed":1e19`,
		`"n":1.5,"n":2`,
		`"stop":["1.0","\"2.0\"","\u00e9\\3.0"],"user":"1e3 \ud83d\ude00"`,
	} {
		whole, e1 := decodeCompletion([]byte(`{"prompt":"a","max_tokens":4.0,` + rest + `}`))
		plain, e2 := decodeCompletion([]byte(`{"prompt":"a","max_tokens":4,` + rest + `}`))
		assert.Equal(t, e2, e1, rest)
		assert.Equal(t, plain, whole, rest)
	}
}

// TestWholeNumbersHugeExponents: the retry that takes 10.0 for 10 reads
// every number of the body; numbers whose exact value is huge (1e999999 is
// a million-digit integer) or a million digits long are refused with the
// error of the field they stand in, and one that is exactly 1 however it
// is written is taken. What they cost is BenchmarkDecodeWholeNumbers's
// to measure (exact arithmetic took 20 s for each of the first two bodies).
func TestWholeNumbersHugeExponents(t *testing.T) {
	many := strings.Repeat(",1e999999,-1e-999999", 500)
	for _, tc := range []struct{ body, param, got string }{
		{`{"prompt":[1.0` + many + `]}`, "prompt", "got number 1e999999"},
		{`{"prompt":"a","max_tokens":4.0,"stop_token_ids":[1` + many + `]}`, "stop_token_ids", "got number 1e999999"},
		{`{"prompt":"a","max_tokens":1` + strings.Repeat("0", 1<<20) + `.0}`, "max_tokens", "expected an integer"},
		{`{"prompt":"a","max_tokens":0.` + strings.Repeat("0", 1<<20) + `1e1048576}`, "max_tokens", "expected an integer"},
	} {
		_, e := decodeCompletion([]byte(tc.body))
		require.NotNil(t, e)
		assert.Equal(t, tc.param, e.Param)
		assert.Contains(t, e.Message, tc.got)
	}
	// Exactly 1, however it is written.
	req, e := decodeCompletion([]byte(`{"prompt":"a","max_tokens":0.` + strings.Repeat("0", 1<<20) + `1e1048577}`))
	require.Nil(t, e)
	assert.Equal(t, 1, req.params.MaxTokens)
}

// TestVLLMExtrasReachTheEngine: min_p, include_stop_str_in_output and
// skip_special_tokens pass to the engine; absent, they are off, and
// skip_special_tokens defaults to true as in vLLM.
func TestVLLMExtrasReachTheEngine(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	p := f.requests()[0].Params
	assert.Zero(t, p.MinP)
	assert.False(t, p.IncludeStopStrInOutput)
	assert.False(t, p.KeepSpecialTokens)

	rec = serve(t, NewHandler(f), "POST", "/v1/completions",
		`{"prompt":"a","max_tokens":2,"min_p":0.05,"include_stop_str_in_output":true,"skip_special_tokens":false}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	p = f.requests()[1].Params
	assert.Equal(t, 0.05, p.MinP)
	assert.True(t, p.IncludeStopStrInOutput)
	assert.True(t, p.KeepSpecialTokens)

	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"skip_special_tokens":true,"min_p":null}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.False(t, f.requests()[2].Params.KeepSpecialTokens)
}

// TestAllowedTokenIDsReachTheEngine: vLLM's allowed_token_ids pass to the
// engine as given; absent, every token is allowed.
func TestAllowedTokenIDsReachTheEngine(t *testing.T) {
	f := newFake()
	rec := serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2,"allowed_token_ids":[98,0,98]}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, []int{98, 0, 98}, f.requests()[0].Params.AllowedTokenIDs)
	rec = serve(t, NewHandler(f), "POST", "/v1/completions", `{"prompt":"a","max_tokens":2}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Nil(t, f.requests()[1].Params.AllowedTokenIDs)
}

// TestTruncatePromptTokens: vLLM's truncate_prompt_tokens keeps each
// prompt's last k tokens, text or token ids; usage counts what was kept,
// echo shows it, and -1 means max_model_len.
func TestTruncatePromptTokens(t *testing.T) {
	f := newFake()
	h := NewHandler(f)
	rec := serve(t, h, "POST", "/v1/completions", `{"prompt":["abcdef","xy"],"max_tokens":1,"truncate_prompt_tokens":3,"echo":true}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	rec2 := serve(t, h, "POST", "/v1/completions", `{"prompt":[1,2,3,4,5],"max_tokens":1,"truncate_prompt_tokens":3}`)
	require.Equal(t, 200, rec2.Code, rec2.Body.String())
	reqs := f.requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, []int{'d', 'e', 'f'}, reqs[0].PromptTokens)
	assert.Equal(t, []int{'x', 'y'}, reqs[1].PromptTokens, "a shorter prompt is kept whole")
	assert.Equal(t, []int{3, 4, 5}, reqs[2].PromptTokens)
	var resp struct {
		Choices []struct{ Text string }
		Usage   usage
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	assert.Equal(t, "defa", resp.Choices[0].Text, "echo shows the kept prompt")
	assert.Equal(t, "xya", resp.Choices[1].Text)
	assert.Equal(t, 3+2, resp.Usage.PromptTokens)

	long := strings.Repeat("z", 70) // over max_model_len 64
	rec = serve(t, h, "POST", "/v1/completions", `{"prompt":"`+long+`","max_tokens":0,"echo":true,"truncate_prompt_tokens":-1}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Len(t, f.requests()[3].PromptTokens, 64)
}

// TestLongValuesAreShortenedInErrors: a number of a thousand digits that an
// integer field refuses is quoted in the error, and so in the server's log
// line, by its first bytes only.
func TestLongValuesAreShortenedInErrors(t *testing.T) {
	h := NewHandler(newFake())
	for _, lit := range []string{"1." + strings.Repeat("0", 1000) + "1", "1" + strings.Repeat("0", 1000)} {
		rec := serve(t, h, "POST", "/v1/completions", `{"prompt":"a","max_tokens":`+lit+`}`)
		require.Equal(t, 400, rec.Code)
		msg := decodeErr(t, rec).Error.Message
		assert.Less(t, len(msg), 150, msg)
		assert.Contains(t, msg, "number "+lit[:40])
		assert.Contains(t, msg, "...")
	}
}

// TestModelSamplingDefaults: the fields a request leaves out (or sends as
// null) take the model's defaults (its generation_config.json, in
// ModelInfo.Defaults), as vLLM's --generation-config auto does; the fields
// it sets keep their values, and the rest keep the API's defaults.
func TestModelSamplingDefaults(t *testing.T) {
	f := newFake()
	temp, topP, minP, rep, topK := 0.7, 0.9, 0.05, 1.2, 40
	f.info.Defaults = llm.SamplingDefaults{Temperature: &temp, TopP: &topP, TopK: &topK, MinP: &minP, RepetitionPenalty: &rep}
	h := NewHandler(f)
	for _, body := range []string{
		`{"prompt":"a"}`,
		`{"prompt":"a","temperature":null,"top_p":null,"top_k":null,"min_p":null,"repetition_penalty":null}`,
		`{"prompt":"a","temperature":0.2,"top_k":5}`,
		`{"prompt":"a","temperature":1,"top_p":1,"top_k":-1,"min_p":0,"repetition_penalty":1}`,
	} {
		rec := serve(t, h, "POST", "/v1/completions", body)
		require.Equal(t, 200, rec.Code, rec.Body.String())
	}
	reqs := f.requests()
	require.Len(t, reqs, 4)
	type got struct {
		temp, topP, minP, rep float64
		topK                  int
	}
	view := func(p llm.SamplingParams) got { return got{p.Temperature, p.TopP, p.MinP, p.RepetitionPenalty, p.TopK} }
	assert.Equal(t, got{0.7, 0.9, 0.05, 1.2, 40}, view(reqs[0].Params), "all left out")
	assert.Equal(t, got{0.7, 0.9, 0.05, 1.2, 40}, view(reqs[1].Params), "all null")
	assert.Equal(t, got{0.2, 0.9, 0.05, 1.2, 5}, view(reqs[2].Params), "two set")
	assert.Equal(t, got{1, 1, 0, 1, -1}, view(reqs[3].Params), "all set to the API's defaults")
	assert.Equal(t, 16, reqs[0].Params.MaxTokens, "max_tokens keeps the API's default")

	// Without model defaults, a request that leaves them out gets the API's.
	g := newFake()
	require.Equal(t, 200, serve(t, NewHandler(g), "POST", "/v1/completions", `{"prompt":"a"}`).Code)
	assert.Equal(t, got{1, 1, 0, 0, 0}, view(g.requests()[0].Params))
}

// TestMaxTokensNull: "max_tokens": null is vLLM's "as many as fit": the
// model's max_new_tokens (ModelInfo.Defaults.MaxTokens) where it has one,
// else all the context each prompt leaves; left out, max_tokens is 16
// whatever the model says. A --generation-config folder's limit
// (MaxTokensLimit) caps every request, after the context check of what
// the request asked for. Each case's prompt bytes are its tokens (the
// fake's tokenizer), and the fake's context is 64.
func TestMaxTokensNull(t *testing.T) {
	ten, twelve := 10, 12
	long := strings.Repeat("x", 60)
	cases := []struct {
		name     string
		defaults llm.SamplingDefaults
		body     string
		want     []int // the max_tokens of each engine request
		err      string
	}{
		{"left out", llm.SamplingDefaults{}, `{"prompt":"abcd"}`, []int{16}, ""},
		{"null fills the context", llm.SamplingDefaults{}, `{"prompt":"abcd","max_tokens":null}`, []int{60}, ""},
		{"null per prompt", llm.SamplingDefaults{}, `{"prompt":["ab","abcdef"],"max_tokens":null,"n":2}`, []int{62, 62, 58, 58}, ""},
		{"null with echo", llm.SamplingDefaults{}, `{"prompt":"abcd","max_tokens":null,"echo":true}`, []int{60}, ""},
		{"null, the model's max_new_tokens", llm.SamplingDefaults{MaxTokens: &ten}, `{"prompt":"abcd","max_tokens":null}`, []int{10}, ""},
		{"null, less context left than max_new_tokens", llm.SamplingDefaults{MaxTokens: &ten}, `{"prompt":"` + long + `","max_tokens":null}`, []int{4}, ""},
		{"max_new_tokens leaves the default alone", llm.SamplingDefaults{MaxTokens: &ten}, `{"prompt":"abcd"}`, []int{16}, ""},
		{"max_new_tokens leaves a request's own alone", llm.SamplingDefaults{MaxTokens: &ten}, `{"prompt":"abcd","max_tokens":40}`, []int{40}, ""},
		{"a folder's limit caps a request's own", llm.SamplingDefaults{MaxTokens: &twelve, MaxTokensLimit: &twelve}, `{"prompt":"abcd","max_tokens":40}`, []int{12}, ""},
		{"a folder's limit caps the default", llm.SamplingDefaults{MaxTokensLimit: &ten}, `{"prompt":"abcd"}`, []int{10}, ""},
		{"below the limit", llm.SamplingDefaults{MaxTokensLimit: &ten}, `{"prompt":"abcd","max_tokens":5}`, []int{5}, ""},
		{"the context is checked before the limit", llm.SamplingDefaults{MaxTokensLimit: &ten}, `{"prompt":"abcd","max_tokens":61}`, nil,
			"you requested 65 tokens (4 in the prompt, 61 in the completion)"},
		{"null with no context left", llm.SamplingDefaults{}, `{"prompt":"` + long + `abcd","max_tokens":null}`, nil,
			"you requested 65 tokens (64 in the prompt, 1 in the completion)"},
		{"min_tokens above what null gives", llm.SamplingDefaults{MaxTokens: &ten}, `{"prompt":"abcd","max_tokens":null,"min_tokens":11}`, nil,
			"min_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			f.info.Defaults = c.defaults
			rec := serve(t, NewHandler(f), "POST", "/v1/completions", c.body)
			if c.err != "" {
				require.Equal(t, 400, rec.Code, rec.Body.String())
				assert.Contains(t, decodeErr(t, rec).Error.Message, c.err)
				assert.Empty(t, f.requests())
				return
			}
			require.Equal(t, 200, rec.Code, rec.Body.String())
			var got []int
			for _, r := range f.requests() {
				got = append(got, r.Params.MaxTokens)
			}
			assert.Equal(t, c.want, got)
		})
	}
}
