package openai

import (
	"encoding/json"
	"net/http"
	"testing"
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
