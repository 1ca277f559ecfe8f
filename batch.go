package tinyserve

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// Completion is what one prompt of GenerateBatch produced.
type Completion struct {
	Text   string           // the generated text
	Finish llm.FinishReason // why generation stopped
	Tokens int              // completion tokens generated
}

// GenerateBatch runs every prompt through e at once, so that they batch,
// as vLLM's offline LLM.generate does, and returns each completion in
// prompt order. Prompts are encoded with e's tokenizer, special tokens
// written in them read as such (tokenizer.EncodePrompt). A request's error
// event is returned, naming its prompt.
func GenerateBatch(ctx context.Context, e llm.Engine, prompts []string, params llm.SamplingParams) ([]Completion, error) {
	reqs := make([]llm.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = llm.Request{ID: fmt.Sprintf("prompt-%d", i), PromptTokens: tokenizer.EncodePrompt(e.Tokenizer(), p, true), Params: params}
	}
	out := make([]Completion, len(prompts))
	errs := make([]error, len(prompts))
	err := RunBatch(ctx, e, reqs, func(i int, ev llm.Event) {
		c := &out[i]
		c.Text += ev.Text
		if ev.Finish != "" {
			c.Finish, c.Tokens, errs[i] = ev.Finish, ev.CompletionTokens, ev.Err
		}
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
	}
	return out, nil
}

// RunBatch submits reqs to e in order and passes each event of request i
// to collect(i, ev), from one goroutine per request, returning when every
// stream has ended. The engine refuses a request while its waiting queue is
// full (--max-pending); the requests of a batch are all known up front, so
// instead of failing, RunBatch waits until a request already in produces an
// event and tries again. The engine frees a request's place in the queue
// before that request's first event, so no wake-up is missed, and nothing
// spins. When it returns an error, the requests already in may still be
// running (closing e ends them), and collect may still be called.
func RunBatch(ctx context.Context, e llm.Engine, reqs []llm.Request, collect func(i int, ev llm.Event)) error {
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i, r := range reqs {
		ch, err := e.Generate(ctx, r)
		for errors.Is(err, llm.ErrOverloaded) {
			select {
			case <-progress:
				ch, err = e.Generate(ctx, r)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			return fmt.Errorf("prompt %d: %w", i, err)
		}
		wg.Go(func() {
			for ev := range ch {
				collect(i, ev)
				select {
				case progress <- struct{}{}:
				default: // a wake-up is already waiting
				}
			}
		})
	}
	wg.Wait()
	return nil
}
