package cli

import (
	"errors"

	ucli "github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve/llm"
)

// SamplingFlags are a completions request's sampling fields spelled as
// flags, for a command that generates in-process (cmd/generate); read them
// with SamplingParams. --max-tokens defaults to maxTokens.
func SamplingFlags(maxTokens int) []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "max-tokens", Value: maxTokens, Usage: "tokens to generate per prompt"},
		&ucli.Float64Flag{Name: "temperature", Usage: "sampling temperature (0: greedy; above 0 and below 0.01 runs as 0.01, as a request's)"},
		&ucli.IntFlag{Name: "top-k", Usage: "top-k filter (0: off)"},
		&ucli.Float64Flag{Name: "top-p", Usage: "top-p filter (0 or 1: off)"},
		&ucli.Float64Flag{Name: "min-p", Usage: "min-p filter: drop tokens less likely than this times the most likely one (0: off)"},
		&ucli.Int64Flag{Name: "seed", Usage: "per-request sampling seed, as a request's seed (0 is a seed too; -1 or left out: none)"},
		&ucli.Float64Flag{Name: "presence-penalty", Usage: "subtracted from tokens already generated, in [-2, 2]"},
		&ucli.Float64Flag{Name: "frequency-penalty", Usage: "subtracted per time a token was generated, in [-2, 2]"},
		&ucli.Float64Flag{Name: "repetition-penalty", Value: 1, Usage: "divides positive (multiplies negative) logits of prompt and generated tokens; 1: off"},
		&ucli.BoolFlag{Name: "ignore-eos", Usage: "keep generating after the end-of-text token"},
	}
}

// SamplingParams reads SamplingFlags from c, refusing what a request's
// fields would be refused for (llm.SamplingParams.Validate), and then
// reads them as the server reads a request's (AsRequest).
func SamplingParams(c *ucli.Context) (llm.SamplingParams, error) {
	p := llm.SamplingParams{
		MaxTokens:   c.Int("max-tokens"),
		Temperature: c.Float64("temperature"),
		TopK:        c.Int("top-k"),
		TopP:        c.Float64("top-p"),
		MinP:        c.Float64("min-p"),
		IgnoreEOS:   c.Bool("ignore-eos"),

		PresencePenalty:   c.Float64("presence-penalty"),
		FrequencyPenalty:  c.Float64("frequency-penalty"),
		RepetitionPenalty: c.Float64("repetition-penalty"),
	}
	if c.IsSet("repetition-penalty") && p.RepetitionPenalty == 0 {
		return llm.SamplingParams{}, errors.New("--repetition-penalty must be greater than zero (1 is off)")
	}
	if err := p.Validate(); err != nil {
		return llm.SamplingParams{}, err
	}
	if c.IsSet("seed") {
		// 0 is a seed, as a request's "seed": 0 is.
		p.Seed = new(c.Int64("seed"))
	}
	AsRequest(&p)
	return p, nil
}

// AsRequest applies what the server does to a completions request's
// fields, so that the flags mean what those fields mean: a seed of -1 is no
// seed, and a temperature in (0, 0.01) runs as 0.01, as vLLM reads them.
func AsRequest(p *llm.SamplingParams) {
	if p.Seed != nil && *p.Seed == -1 {
		p.Seed = nil
	}
	p.RaiseTinyTemperature()
}
