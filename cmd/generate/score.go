package main

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// score prints, for each prompt, every token's log-probability given the
// tokens before it (the engine's prompt log-probabilities), the model's
// most likely token at that position, and the prompt's total
// log-likelihood and perplexity. The first token is not scored: nothing
// predicts it.
func score(ctx context.Context, cfg tinyserve.Config, prompts []string, out io.Writer) error {
	e, err := open(ctx, cfg, prompts, out)
	if err != nil {
		return err
	}
	defer e.Close()
	tok := e.Tokenizer()
	one := 1
	// All prompts go in at once (as many as the engine takes), so that they
	// batch; the results are printed in prompt order.
	reqs := make([]llm.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = llm.Request{ID: fmt.Sprintf("score-%d", i), PromptTokens: tokenizer.EncodePrompt(tok, p, true),
			Params: llm.SamplingParams{MaxTokens: 0, PromptLogprobs: &one}} // score only
	}
	logprobs := make([][]llm.TokenLogprob, len(prompts))
	errs := make([]error, len(prompts))
	err = tinyserve.RunBatch(ctx, e, reqs, func(i int, ev llm.Event) {
		if ev.PromptLogprobs != nil {
			logprobs[i] = ev.PromptLogprobs
		}
		if ev.Err != nil {
			errs[i] = ev.Err
		}
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, req := range reqs {
		ids, lps := req.PromptTokens, logprobs[i]
		if errs[i] != nil {
			return fmt.Errorf("prompt %d: %w", i, errs[i])
		}
		if len(lps) != len(ids)-1 {
			return fmt.Errorf("prompt %d: %d log-probabilities for %d tokens", i, len(lps), len(ids))
		}
		sum := 0.0
		for _, lp := range lps {
			sum += float64(lp.Logprob)
		}
		fmt.Fprintf(out, "\n--- prompt %d: %d tokens, %d scored, log-likelihood %.4f, perplexity %s\n",
			i, len(ids), len(lps), sum, perplexity(sum, len(lps)))
		fmt.Fprintf(out, "%5s  %-20s %10s  %s\n", "pos", "token", "logprob", "most likely")
		fmt.Fprintf(out, "%5d  %-20q %10s\n", 0, tok.Decode(ids[:1], false), "-")
		for k, lp := range lps {
			best := ""
			if len(lp.Top) > 0 {
				best = fmt.Sprintf("%q %.4f", tok.Decode([]int{lp.Top[0].ID}, false), lp.Top[0].Logprob)
			}
			fmt.Fprintf(out, "%5d  %-20q %10.4f  %s\n", k+1, tok.Decode([]int{lp.ID}, false), lp.Logprob, best)
		}
	}
	return nil
}

// perplexity is exp of the mean negative log-likelihood, or "-" when no
// token was scored.
func perplexity(sum float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.4g", math.Exp(-sum/float64(n)))
}
