// Command offline runs tinyserve's engine in-process on the deterministic
// mock backend and prints a few completions: the smallest complete use of
// the engine API (engine.New via mock.NewEngine, Generate, events).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "offline:", err)
		os.Exit(1)
	}
}

func run() error {
	e, err := mock.NewEngine(mock.Config{}, engine.Config{MaxNumBatchedTokens: 16})
	if err != nil {
		return err
	}
	defer e.Close()
	tok := e.Tokenizer()
	prompts := []string{"Once upon a time", "The scheduler admits", "KV blocks are"}
	chans := make([]<-chan llm.Event, len(prompts))
	for i, p := range prompts {
		chans[i], err = e.Generate(context.Background(), llm.Request{
			ID:           fmt.Sprint(i),
			PromptTokens: tok.Encode(p, false),
			Params:       llm.SamplingParams{MaxTokens: 20, IgnoreEOS: true},
		})
		if err != nil {
			return err
		}
	}
	for i, ch := range chans {
		text, finish := "", llm.FinishReason("")
		for ev := range ch {
			text += ev.Text
			finish = ev.Finish
		}
		fmt.Printf("%q -> %q (%s)\n", prompts[i], text, finish)
	}
	s := e.Stats()
	fmt.Printf("steps %d, prompt tokens %d, generated %d\n", s.Steps, s.PromptTokens, s.GenerationTokens)
	return nil
}
