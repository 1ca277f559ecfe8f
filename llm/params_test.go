package llm

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestRaiseTinyTemperature(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{0, 0}, {1e-9, MinRequestTemperature}, {0.005, MinRequestTemperature},
		{MinRequestTemperature, MinRequestTemperature}, {0.7, 0.7},
	} {
		p := SamplingParams{Temperature: tc.in}
		p.RaiseTinyTemperature()
		if p.Temperature != tc.want {
			t.Errorf("RaiseTinyTemperature(%v) = %v, want %v", tc.in, p.Temperature, tc.want)
		}
	}
}

func TestParamsValidate(t *testing.T) {
	neg := -1
	cases := []struct {
		p     SamplingParams
		param string
	}{
		{SamplingParams{MaxTokens: -1}, "max_tokens"},
		{SamplingParams{MaxTokens: 0}, ""}, // runs the prompt only
		{SamplingParams{MaxTokens: 2, MinTokens: 3}, "min_tokens"},
		{SamplingParams{MaxTokens: 1, Temperature: -1}, "temperature"},
		{SamplingParams{MaxTokens: 1, TopP: 1.5}, "top_p"},
		{SamplingParams{MaxTokens: 1, TopK: -2}, "top_k"},
		{SamplingParams{MaxTokens: 1, Stop: []string{""}}, "stop"},
		{SamplingParams{MaxTokens: 1, StopTokenIDs: []int{-3}}, "stop_token_ids"},
		{SamplingParams{MaxTokens: 1, Logprobs: &neg}, "logprobs"},
		{SamplingParams{MaxTokens: 1, PromptLogprobs: &neg}, "prompt_logprobs"},
		{SamplingParams{MaxTokens: 1, PresencePenalty: 2.01}, "presence_penalty"},
		{SamplingParams{MaxTokens: 1, FrequencyPenalty: math.NaN()}, "frequency_penalty"},
		{SamplingParams{MaxTokens: 1, RepetitionPenalty: -0.5}, "repetition_penalty"},
		{SamplingParams{MaxTokens: 1, RepetitionPenalty: math.Inf(1)}, "repetition_penalty"},
		{SamplingParams{MaxTokens: 1, LogitBias: map[int]float64{3: -100.5}}, "logit_bias"},
		{SamplingParams{MaxTokens: 1, LogitBias: map[int]float64{-1: 1}}, "logit_bias"},
		{SamplingParams{MaxTokens: 1, PresencePenalty: -2, FrequencyPenalty: 2, RepetitionPenalty: 0.5, LogitBias: map[int]float64{3: 100}}, ""},
		{SamplingParams{MaxTokens: 1}, ""},
	}
	for _, c := range cases {
		err := c.p.Validate()
		pe, _ := err.(*ParamError)
		switch {
		case c.param == "" && err != nil:
			t.Errorf("%+v: unexpected %v", c.p, err)
		case c.param != "" && (pe == nil || pe.Param != c.param):
			t.Errorf("%+v: error %v, want one naming %s", c.p, err, c.param)
		}
	}
	r := Request{PromptTokens: []int{5, 10}, Params: SamplingParams{MaxTokens: 1}}
	if err := r.Validate(10); err == nil {
		t.Error("token 10 accepted with a vocabulary of 10")
	}
	ce := CheckContextLength(100, 60, 50)
	if ce == nil || ce.Error() != "This model's maximum context length is 100 tokens. However, you requested 110 tokens (60 in the prompt, 50 in the completion). Please reduce the length of the prompt or completion." {
		t.Errorf("context error: %v", ce)
	}
	// A max_tokens near the largest int must not overflow into a small sum.
	ce = CheckContextLength(100, 60, math.MaxInt)
	if ce == nil || !strings.Contains(ce.Error(), fmt.Sprintf("requested %d tokens", uint64(math.MaxInt)+60)) {
		t.Errorf("max_tokens = MaxInt: %v", ce)
	}
	if err := CheckContextLength(100, 60, 40); err != nil {
		t.Errorf("exactly the context length: %v", err)
	}
	if err := CheckContextLength(100, 101, 1); err == nil {
		t.Error("a prompt longer than the context passed")
	}
}
