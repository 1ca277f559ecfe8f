package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// FuzzDecodeCompletion feeds arbitrary bodies to the request decoder and to
// the whole handler (on the fake engine): decoding either fails with a 4xx
// OpenAI error or yields a request that satisfies every validation rule, and
// the handler never panics nor answers 5xx. Seeds: testdata/fuzz. Each new
// input is slow to minimize (a handler per run), so fuzz with
//
//	go test -run XXX -fuzz FuzzDecodeCompletion -fuzzminimizetime 1s ./openai
func FuzzDecodeCompletion(f *testing.F) {
	f.Add([]byte(`{"prompt":"a"}`))
	f.Add([]byte(`{"prompt":[[0],[256]],"n":3,"seed":-1,"stream":true}`))
	f.Add([]byte(`{"prompt":"ab","echo":true,"logprobs":2,"max_tokens":0,"stream":true}`))
	f.Add([]byte(`{"prompt":"abc","echo":true,"logprobs":1,"prompt_logprobs":3,"max_tokens":1}`))
	f.Add([]byte(`{"prompt":"ab","logit_bias":{"97":-100,"3":2},"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.2}`))
	f.Add([]byte(`{"prompt":"ab","allowed_token_ids":[97,98],"return_tokens_as_token_ids":true,"logprobs":1,"priority":0}`))
	f.Add([]byte(`{"prompt":[[97.0],[9.8e1]],"max_tokens":2.0,"n":1e0,"stop_token_ids":[3.0],"stop":"<&>"}`))
	f.Add([]byte(`{"prompt":["a","bc"],"max_tokens":null,"min_tokens":3}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeCompletion(body)
		if e != nil {
			if e.status != http.StatusBadRequest || e.Type != typeInvalidRequest || e.Message == "" {
				t.Fatalf("bad rejection %+v", e)
			}
			if _, err := json.Marshal(errorBody{e}); err != nil {
				t.Fatalf("error body does not encode: %v", err)
			}
		} else {
			if (len(req.texts) == 0) == (len(req.tokenLists) == 0) {
				t.Fatalf("want exactly one prompt form: %+v", req)
			}
			for _, s := range req.texts {
				if s == "" {
					t.Fatal("empty text prompt accepted")
				}
			}
			for _, ids := range req.tokenLists {
				if len(ids) == 0 {
					t.Fatal("empty token prompt accepted")
				}
			}
			if req.n < 1 || req.n > MaxN || req.numPrompts()*req.n > MaxChoices {
				t.Fatalf("n out of range: %d x %d", req.numPrompts(), req.n)
			}
			if err := req.params.Validate(); err != nil {
				t.Fatalf("invalid params accepted: %v", err)
			}
			if req.includeUsage && !req.stream {
				t.Fatal("include_usage without stream accepted")
			}
			lp, plp := req.params.Logprobs, req.params.PromptLogprobs
			if (req.echo && lp != nil || req.promptLogprobs) && plp == nil {
				t.Fatalf("echo %v, logprobs %v, prompt_logprobs %v: no prompt logprobs asked of the engine", req.echo, lp, req.promptLogprobs)
			}
			if req.promptLogprobs && req.stream {
				t.Fatal("prompt_logprobs accepted on a stream")
			}
			if req.params.MaxTokens == 0 && !req.echo {
				t.Fatalf("max_tokens 0 accepted without echo: %+v", req)
			}
			var generic map[string]any
			if json.Unmarshal(body, &generic) == nil {
				for _, k := range []string{"prompt", "stop", "stop_token_ids"} {
					if hasNullElement(generic[k]) {
						t.Fatalf("null element in %s accepted (it would read as a zero value)", k)
					}
				}
			}
		}
		rec := serve(t, NewHandler(newFake()), "POST", "/v1/completions", string(body))
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if e != nil && rec.Code != e.status {
			t.Fatalf("handler answered %d, decoder %d", rec.Code, e.status)
		}
	})
}

// hasNullElement reports whether v is a JSON array with a null anywhere
// among its elements or theirs.
func hasNullElement(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, el := range list {
		if el == nil || hasNullElement(el) {
			return true
		}
	}
	return false
}

// shortEngine serves the mock engine with a 64-token context, so that a
// fuzzed request stays small: the handler checks prompts and max_tokens
// against Info's limit.
type shortEngine struct{ *engine.Engine }

func (s shortEngine) Info() llm.ModelInfo {
	i := s.Engine.Info()
	i.MaxModelLen = 64
	return i
}

// FuzzServeCompletion sends each input as a /v1/completions body to the
// handler over the real engine on the mock backend, so that every sampling
// parameter the decoder lets through runs through the engine's sampler,
// masks, penalties, logprobs and stop checks: the answer is a 200 with a
// well-formed completion or stream, or a 4xx with an OpenAI error body,
// never a 5xx (an engine panic would mark it dead and answer 503); and
// once answered, the engine holds no request and no KV block.
//
//	go test -run XXX -fuzz FuzzServeCompletion -fuzzminimizetime 1s ./openai
func FuzzServeCompletion(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"ab","max_tokens":4}`,
		`{"prompt":["ab","c"],"n":3,"max_tokens":5,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"prompt":"abc","echo":true,"logprobs":3,"max_tokens":0}`,
		`{"prompt":[97,98],"prompt_logprobs":2,"max_tokens":3,"temperature":0}`,
		`{"prompt":"ab","allowed_token_ids":[97],"min_tokens":3,"max_tokens":4,"logprobs":1,"stop_token_ids":[97]}`,
		`{"prompt":"ab","bad_words":["a","b c"],"logit_bias":{"98":100},"repetition_penalty":1.5,"frequency_penalty":2,"presence_penalty":-2,"max_tokens":6,"seed":3}`,
		`{"prompt":"ab","stop":["a","bc"],"include_stop_str_in_output":true,"skip_special_tokens":false,"ignore_eos":true,"max_tokens":8,"top_k":3,"top_p":0.5,"min_p":0.1}`,
		`{"prompt":"abcdefgh","truncate_prompt_tokens":2,"echo":true,"return_token_ids":true,"return_tokens_as_token_ids":true,"logprobs":2,"max_tokens":2}`,
	} {
		f.Add([]byte(s))
	}
	eng, err := mock.NewEngine(mock.Config{EOSEvery: 7}, engine.Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 64, NumBlocks: 64, Seed: new(uint64(1))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = eng.Close() })
	h := NewHandler(shortEngine{eng})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := serve(t, h, "POST", "/v1/completions", string(body))
		switch {
		case rec.Code == http.StatusOK:
			checkCompletionBody(t, rec.Header().Get("Content-Type"), rec.Body.String())
		case rec.Code >= 400 && rec.Code < 500:
			var e errJSON
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type != typeInvalidRequest {
				t.Fatalf("status %d with body %s", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := eng.Stats()
			if s.Running == 0 && s.Waiting == 0 && s.KVBlocksUsed == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %q the engine still holds %+v", body, s)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// checkCompletionBody checks a 200 answer: one completion object, or a
// stream of completion chunks ending with [DONE].
func checkCompletionBody(t *testing.T, contentType, body string) {
	t.Helper()
	type completion struct {
		Object  string `json:"object"`
		Choices []struct {
			Index        *int    `json:"index"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		var c completion
		if err := json.Unmarshal([]byte(body), &c); err != nil || c.Object != "text_completion" || len(c.Choices) == 0 {
			t.Fatalf("not a completion: %s", body)
		}
		for _, ch := range c.Choices {
			if ch.Index == nil || ch.FinishReason == nil {
				t.Fatalf("a choice without index or finish_reason: %s", body)
			}
		}
		return
	}
	events := sseEvents(t, body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("a stream that does not end with [DONE]: %s", body)
	}
	for _, ev := range events[:len(events)-1] {
		var c completion
		if err := json.Unmarshal([]byte(ev), &c); err != nil || c.Object != "text_completion" {
			t.Fatalf("not a completion chunk: %s", ev)
		}
	}
}

// FuzzTokenIDs checks tokenIDs, which scans a JSON array of token ids
// itself, against the decoding it replaced (encoding/json into []*int,
// whole numbers such as 1.0 taken, then nulls refused): for every valid
// JSON array both give the same ids, or both refuse it with the same
// message.
func FuzzTokenIDs(f *testing.F) {
	for _, s := range []string{`[]`, `[1,2,3]`, ` [ 1 , -0 , 2.0e0 ] `, `[null]`, `[1,null,"a"]`, `[null,"a"]`, `[1.5]`,
		`[1e19]`, `[9223372036854775807]`, `[-9223372036854775808.0]`, `[[1]]`, `[{}]`, `[true]`, "[1,\n\t2]", `[1E+2,0.1e1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = bytes.TrimSpace(raw)
		if !json.Valid(raw) || len(raw) == 0 || raw[0] != '[' {
			return
		}
		got, gerr := tokenIDs("p", "p", raw)
		want, werr := referenceTokenIDs(raw)
		switch {
		case gerr == nil && werr == nil:
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%s: ids %v, want %v", raw, got, want)
			}
		case gerr == nil || werr == nil:
			t.Fatalf("%s: error %v, want %v", raw, gerr, werr)
		case gerr.Message != werr.Message:
			t.Fatalf("%s: message %q, want %q", raw, gerr.Message, werr.Message)
		}
	})
}

// referenceTokenIDs is the decoding tokenIDs replaced, for FuzzTokenIDs and
// BenchmarkTokenIDs: encoding/json into []*int, whole numbers such as 1.0
// taken, then nulls refused; its field is called p.
func referenceTokenIDs(raw []byte) ([]int, *apiError) {
	var ptrs []*int
	if err := unmarshalWholeNumbers(raw, &ptrs); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return nil, &apiError{Message: "not a type error: " + err.Error()}
		}
		return nil, badRequest("p", "invalid_type", "p: token ids must be integers, got %s", shorten(te.Value))
	}
	return notNull("p", "p", ptrs)
}

// FuzzPythonInt checks pythonInt, which reads a logit_bias key as Python's
// int(str) does, against a reference written from int()'s grammar:
// optional surrounding whitespace, one optional sign, then decimal digits
// (Unicode Nd) with single underscores between digits; the value is that of
// the digits (math/big), and fits says whether an int holds it. An accepted
// key that fits round-trips: its value written in decimal, padded with
// whitespace, with a '+' or with an underscore between its digits, reads as
// the same value.
func FuzzPythonInt(f *testing.F) {
	for _, s := range []string{"5", " -0_5\t", "+1_2_3", "\u0665\uff11", "5__0", "_5", "5_", "+-5", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "\u00a05\u3000", "\x1c5", "1e3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok, fits := pythonInt(s)
		want, wantOK := refPythonInt(s)
		if ok != wantOK {
			t.Fatalf("pythonInt(%q): ok %v, want %v", s, ok, wantOK)
		}
		if !ok {
			if fits || v != 0 {
				t.Fatalf("pythonInt(%q) = %d, %v, %v: refused but fits", s, v, ok, fits)
			}
			return
		}
		if wantFits := want.Cmp(big.NewInt(math.MinInt)) >= 0 && want.Cmp(big.NewInt(math.MaxInt)) <= 0; fits != wantFits {
			t.Fatalf("pythonInt(%q): fits %v, want %v (value %v)", s, fits, wantFits, want)
		}
		if !fits {
			return
		}
		if int64(v) != want.Int64() {
			t.Fatalf("pythonInt(%q) = %d, want %v", s, v, want)
		}
		plain := strconv.Itoa(v)
		digits := strings.TrimPrefix(plain, "-")
		forms := []string{plain, " \t" + plain + "\n", "\u3000" + plain + "\u00a0"}
		if v >= 0 {
			forms = append(forms, "+"+plain, "0"+plain)
		}
		if len(digits) > 1 {
			forms = append(forms, plain[:len(plain)-1]+"_"+plain[len(plain)-1:])
		}
		for _, form := range forms {
			if back, ok, fits := pythonInt(form); !ok || !fits || back != v {
				t.Fatalf("pythonInt(%q) = %d; %q reads as %d, %v, %v", s, v, form, back, ok, fits)
			}
		}
	})
}

// refPythonInt is int(s) for a str, written from its grammar for
// FuzzPythonInt: the value, and whether int() accepts s. Whitespace is
// what unicode.IsSpace calls space (the same set as int()'s, checked
// against CPython 3.11); a digit's value is decimalValue's (its run of ten
// Nd code points; TestPythonInt checks some against CPython).
func refPythonInt(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	if !pyIntGrammar.MatchString(s) {
		return nil, false
	}
	v := new(big.Int)
	for _, r := range s {
		if d, ok := decimalValue(r); ok {
			v.Mul(v, big.NewInt(10)).Add(v, big.NewInt(int64(d)))
		}
	}
	if s[0] == '-' {
		v.Neg(v)
	}
	return v, true
}

var pyIntGrammar = regexp.MustCompile(`^[+-]?\p{Nd}+(?:_\p{Nd}+)*$`)

// FuzzWholeInt64 checks wholeInt64, which reads a JSON number literal
// given to an integer field (10.0, 1e3) as the whole int64 it is, against
// exact arithmetic (big.Rat): it accepts a literal exactly when its value is
// a whole number that fits an int64, and returns that number in plain
// decimal. A literal whose exponent is 10^4 or more in size is checked
// without big.Rat, which would build a huge number: it is whole (0) only
// when its digits are all zeros.
func FuzzWholeInt64(f *testing.F) {
	for _, s := range []string{"10.0", "1e3", "1E+2", "-0.0", "0e999", "1.5", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9.223372036854775808e18", "92233720368547758070e-1", "1e19", "100e-2", "1.0e-0", "0.000000000000000000001e21", "01", "1e", "0e-99999", "1e99999", "-1.0e-0099999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if !json.Valid([]byte(lit)) || lit == "" || strings.Trim(lit, "0123456789.eE+-") != "" {
			return // not a JSON number literal: wholeInt64 never sees one
		}
		if mant, exp, ok := strings.Cut(strings.ToLower(lit), "e"); ok && len(strings.TrimLeft(exp, "+-0")) > 4 {
			// |exponent| >= 10^4, more than the literal has digits: the
			// value is 0 or not a whole int64 (too large, or a fraction).
			if len(lit) >= 10_000 {
				return
			}
			zero := strings.Trim(mant, "-0.") == ""
			if got, ok := wholeInt64(lit); ok != zero || ok && got != "0" {
				t.Fatalf("wholeInt64(%q) = %q, %v; want ok only for a zero", lit, got, ok)
			}
			return
		}
		r, ok := new(big.Rat).SetString(lit)
		if !ok {
			t.Fatalf("big.Rat cannot read the JSON number %q", lit)
		}
		wantOK := r.IsInt() && r.Num().IsInt64()
		got, gotOK := wholeInt64(lit)
		if gotOK != wantOK {
			t.Fatalf("wholeInt64(%q): ok %v, want %v (value %v)", lit, gotOK, wantOK, r.RatString())
		}
		if gotOK && got != r.Num().String() {
			t.Fatalf("wholeInt64(%q) = %q, want %q", lit, got, r.Num().String())
		}
	})
}

// FuzzDecodeChat: any body is either a chat request whose messages are a
// JSON array (what the template gets) or a 400 in the OpenAI shape; never
// a panic.
func FuzzDecodeChat(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"stream":true,"stream_options":{"include_usage":true}}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","content":"3"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}],"continue_final_message":true,"add_generation_prompt":false,"logprobs":true,"top_logprobs":3}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url"}]}],"chat_template_kwargs":{"enable_thinking":false}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeChat(body)
		if e != nil {
			if e.status != http.StatusBadRequest || e.Type != typeInvalidRequest || e.Message == "" {
				t.Fatalf("bad rejection %+v", e)
			}
			return
		}
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(req.messages, &msgs); err != nil || len(msgs) == 0 {
			t.Fatalf("messages %s: %v", req.messages, err)
		}
		if req.tools != nil && !json.Valid(req.tools) {
			t.Fatalf("tools %s", req.tools)
		}
	})
}
