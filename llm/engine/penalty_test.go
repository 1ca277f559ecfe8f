package engine

import (
	"slices"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// TestPenaltyArithmetic checks one row by hand, in vLLM's order:
// repetition over prompt and output tokens (positive logits divided,
// negative and zero ones multiplied), then frequency per output occurrence
// and presence once per output token. Prompt-only tokens get no frequency
// or presence penalty.
func TestPenaltyArithmetic(t *testing.T) {
	params := llm.SamplingParams{MaxTokens: 8, RepetitionPenalty: 2, FrequencyPenalty: 0.5, PresencePenalty: 0.25}
	q := &request{req: llm.Request{PromptTokens: []int{0, 0, 3}, Params: params}}
	q.params = &q.req.Params
	pen := newPenalty(q)
	pen.note(1)
	pen.note(1)
	pen.note(2)
	logits := []float32{2, -1, 0.5, 0, 4}
	pen.apply(logits, params.RepetitionPenalty, params.FrequencyPenalty, params.PresencePenalty)
	want := []float32{
		2 / 2.0,            // prompt: repetition only
		-1*2 - 0.5*2 - .25, // output twice: -2, then -1 (frequency), then -0.25 (presence)
		0.5/2 - 0.5 - .25,  // output once
		0,                  // prompt, zero: multiplied, still 0
		4,                  // never seen
	}
	if !slices.Equal(logits, want) {
		t.Errorf("penalized %v, want %v", logits, want)
	}

	// Without penalties a request keeps no record; frequency alone needs
	// no prompt set.
	q.req.Params = llm.SamplingParams{MaxTokens: 1, RepetitionPenalty: 1}
	if newPenalty(q) != nil {
		t.Error("repetition_penalty 1 alone made a penalty record")
	}
	q.req.Params = llm.SamplingParams{MaxTokens: 1, FrequencyPenalty: 1}
	if p := newPenalty(q); p == nil || p.prompt != nil {
		t.Errorf("frequency alone: %+v", p)
	}
}
