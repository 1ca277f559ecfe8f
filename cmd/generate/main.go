// Command generate prints completions from tinyserve's engine, in-process:
// the built-in GPT-2 (random weights), a Hugging Face GPT-2 checkpoint
// folder, or the mock backend. It takes the same engine flags as
// tinyserve-serve.
//
//	go run ./cmd/generate --prompt "Hello, my name is" --max-tokens 24
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

func main() {
	if err := newApp(os.Stdout, os.Stderr).Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	flags := append(tcli.EngineFlags(false),
		&cli.StringSliceFlag{Name: "prompt", Aliases: []string{"p"}, KeepSpace: true, Usage: "prompt text (repeat for a batch, run together)", Value: cli.NewStringSlice("The meaning of life is", "Paged attention lets a server")},
		&cli.IntFlag{Name: "max-tokens", Value: 24, Usage: "tokens to generate per prompt"},
		&cli.Float64Flag{Name: "temperature", Usage: "sampling temperature (0: greedy; above 0 and below 0.01 runs as 0.01, as a request's)"},
		&cli.IntFlag{Name: "top-k", Usage: "top-k filter (0: off)"},
		&cli.Float64Flag{Name: "top-p", Usage: "top-p filter (0 or 1: off)"},
		&cli.Float64Flag{Name: "min-p", Usage: "min-p filter: drop tokens less likely than this times the most likely one (0: off)"},
		&cli.Int64Flag{Name: "seed", Usage: "per-request sampling seed, as a request's seed (0 is a seed too; -1 or left out: none)"},
		&cli.Float64Flag{Name: "presence-penalty", Usage: "subtracted from tokens already generated, in [-2, 2]"},
		&cli.Float64Flag{Name: "frequency-penalty", Usage: "subtracted per time a token was generated, in [-2, 2]"},
		&cli.Float64Flag{Name: "repetition-penalty", Value: 1, Usage: "divides positive (multiplies negative) logits of prompt and generated tokens; 1: off"},
		&cli.BoolFlag{Name: "ignore-eos", Usage: "keep generating after the end-of-text token"},
		&cli.BoolFlag{Name: "score", Usage: "score each prompt instead: every token's log-probability given the tokens before it, and the prompt's perplexity"},
		&cli.BoolFlag{Name: "chat", Usage: "render the prompts as one conversation (user, assistant, user, ...) with the model's chat template, as /v1/chat/completions does, and print the reply"},
		&cli.StringFlag{Name: "system", Usage: "--chat: the system message"},
		&cli.StringFlag{Name: "chat-template-kwargs", Usage: `--chat: extra template variables as a JSON object, e.g. '{"enable_thinking": false}'`},
		&cli.BoolFlag{Name: "verbose", Usage: "log the engine's start-up"},
	)
	return &cli.App{
		OnUsageError: clihint.OnUsageError, // one line naming the nearest flag, not the whole help
		// Prompts are prose: a comma inside one must not split it in two
		// (urfave/cli splits slice flags on commas unless told not to).
		DisableSliceFlagSeparator: true,
		Name:                      "generate",
		Usage:                     "print completions from the tinyserve engine, in-process",
		Flags:                     flags,
		Writer:                    stdout,
		ErrWriter:                 stderr,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("unexpected arguments %q (prompts are given with --prompt)", c.Args().Slice())
			}
			cfg, err := tcli.ReadConfig(c)
			if err != nil {
				return err
			}
			if c.IsSet("generation-config") {
				// Refused rather than ignored: the sampling below comes
				// from generate's own flags, whatever the model's defaults.
				return fmt.Errorf("--generation-config does not apply to generate: its sampling comes from its own flags (--temperature, --top-k, --top-p, --min-p, --repetition-penalty)")
			}
			// The server's defaults for what a request leaves out are not
			// used here, so the engine must not log them as in force (the
			// mock has none, and refuses the setting).
			if cfg.Backend != tinyserve.BackendMock {
				cfg.GenerationConfig = "vllm"
			}
			level := slog.LevelWarn
			if c.Bool("verbose") {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
			if c.Bool("score") {
				// Scoring generates nothing: the sampling flags do not apply.
				ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
				defer stop()
				return score(ctx, cfg, c.StringSlice("prompt"), stdout)
			}
			params := llm.SamplingParams{
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
			if params.MaxTokens < 1 {
				return fmt.Errorf("--max-tokens must be at least 1, got %d (--score scores prompts without generating)", params.MaxTokens)
			}
			if c.IsSet("repetition-penalty") && params.RepetitionPenalty == 0 {
				return errors.New("--repetition-penalty must be greater than zero (1 is off)")
			}
			if err := params.Validate(); err != nil {
				return err
			}
			if c.IsSet("seed") {
				// 0 is a seed, as a request's "seed": 0 is.
				params.Seed = new(c.Int64("seed"))
			}
			asRequest(&params)
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if c.Bool("chat") {
				prompts := c.StringSlice("prompt")
				if !c.IsSet("prompt") {
					prompts = []string{"Hello! What can you do?"}
				}
				msgs, err := conversation(c.String("system"), prompts)
				if err != nil {
					return err
				}
				var kwargs map[string]any
				if k := c.String("chat-template-kwargs"); k != "" {
					if err := json.Unmarshal([]byte(k), &kwargs); err != nil || kwargs == nil {
						return fmt.Errorf("--chat-template-kwargs: want a JSON object, got %q", k)
					}
				}
				return chat(ctx, cfg, msgs, kwargs, params, stdout)
			}
			if c.IsSet("system") || c.IsSet("chat-template-kwargs") {
				return errors.New("--system and --chat-template-kwargs need --chat")
			}
			return generate(ctx, cfg, c.StringSlice("prompt"), params, stdout)
		},
	}
}

// open starts the engine for prompts and prints which model runs.
func open(ctx context.Context, cfg tinyserve.Config, prompts []string, out io.Writer) (llm.Engine, error) {
	if len(prompts) == 0 {
		return nil, errors.New("no --prompt given")
	}
	e, err := tinyserve.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	info := e.Info()
	note := ""
	if info.RandomWeights {
		note = " (random weights: the text is meaningless)"
	}
	fmt.Fprintf(out, "model %s on %s%s\n", info.ID, info.Backend, note)
	return e, nil
}

// generate runs every prompt at once (so they batch) and prints each
// completion in prompt order.
func generate(ctx context.Context, cfg tinyserve.Config, prompts []string, params llm.SamplingParams, out io.Writer) error {
	e, err := open(ctx, cfg, prompts, out)
	if err != nil {
		return err
	}
	defer e.Close()

	type result struct {
		text   string
		finish llm.FinishReason
		tokens int
		err    error
	}
	results := make([]result, len(prompts))
	reqs := make([]llm.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = llm.Request{ID: fmt.Sprintf("prompt-%d", i), PromptTokens: tokenizer.EncodePrompt(e.Tokenizer(), p, true), Params: params}
	}
	err = runAll(ctx, e, reqs, func(i int, ev llm.Event) {
		r := &results[i]
		r.text += ev.Text
		if ev.Finish != "" {
			r.finish, r.tokens, r.err = ev.Finish, ev.CompletionTokens, ev.Err
		}
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, p := range prompts {
		r := results[i]
		if r.err != nil {
			return fmt.Errorf("prompt %d: %w", i, r.err)
		}
		fmt.Fprintf(out, "\n--- prompt %d (%d tokens, finish %s)\n%s%s\n", i, r.tokens, r.finish, p, r.text)
	}
	return nil
}

// runAll submits reqs in order and passes each event of request i to
// collect(i, ev), from one goroutine per request, returning when every
// stream has ended. The engine refuses a request while its waiting queue is
// full (--max-pending); the prompts are all known up front, so instead of
// failing, runAll waits until a request already in produces an event and
// tries again. The engine frees a request's place in the queue before that
// request's first event, so no wake-up is missed, and nothing spins.
func runAll(ctx context.Context, e llm.Engine, reqs []llm.Request, collect func(i int, ev llm.Event)) error {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range ch {
				collect(i, ev)
				select {
				case progress <- struct{}{}:
				default: // a wake-up is already waiting
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// asRequest applies what the server does to a completions request's
// fields, so that the flags mean what those fields mean: a seed of -1 is no
// seed, and a temperature in (0, 0.01) runs as 0.01, as vLLM reads them.
func asRequest(p *llm.SamplingParams) {
	if p.Seed != nil && *p.Seed == -1 {
		p.Seed = nil
	}
	p.RaiseTinyTemperature()
}
