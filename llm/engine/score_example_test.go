package engine_test

import (
	"context"
	"fmt"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// A scoring request: MaxTokens 0 with PromptLogprobs runs the prompt,
// generates nothing, and its one event carries the log-probability of each
// prompt token after the first, with the most likely tokens at its
// position. The mock model's own continuation of "ab" scores highest.
func Example_scorePrompt() {
	e, err := mock.NewEngine(mock.Config{}, engine.Config{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	prompt := []int{'a', 'b'}
	prompt = append(prompt, mock.Expected(mock.Config{}, prompt, 2)...) // the model's own guesses
	one := 1
	events, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt,
		Params: llm.SamplingParams{MaxTokens: 0, PromptLogprobs: &one}})
	if err != nil {
		panic(err)
	}
	for ev := range events {
		fmt.Printf("finish %s, %d tokens generated\n", ev.Finish, ev.CompletionTokens)
		for i, lp := range ev.PromptLogprobs {
			fmt.Printf("token %d: most likely here: %v\n", i+1, lp.Top[0].ID == lp.ID)
		}
	}
	// Output:
	// finish length, 0 tokens generated
	// token 1: most likely here: false
	// token 2: most likely here: true
	// token 3: most likely here: true
}
