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
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/internal/clihint"
	"github.com/tinyserve/tinyserve/llm"
)

func main() {
	tcli.Exit("generate", newApp(os.Stdout, os.Stderr).Run(os.Args))
}

func newApp(stdout, stderr io.Writer) *cli.App {
	flags := slices.Concat(tcli.EngineFlags(false), []cli.Flag{
		&cli.StringSliceFlag{Name: "prompt", Aliases: []string{"p"}, KeepSpace: true, Usage: "prompt text (repeat for a batch, run together)", Value: cli.NewStringSlice("The meaning of life is", "Paged attention lets a server")},
	}, tcli.SamplingFlags(24), []cli.Flag{
		&cli.BoolFlag{Name: "score", Usage: "score each prompt instead: every token's log-probability given the tokens before it, and the prompt's perplexity"},
		&cli.BoolFlag{Name: "chat", Usage: "render the prompts as one conversation (user, assistant, user, ...) with the model's chat template, as /v1/chat/completions does, and print the reply"},
		&cli.StringFlag{Name: "system", Usage: "--chat: the system message"},
		&cli.StringFlag{Name: "chat-template-kwargs", Usage: `--chat: extra template variables as a JSON object, e.g. '{"enable_thinking": false}'`},
		&cli.BoolFlag{Name: "verbose", Usage: "log the engine's start-up"},
	})
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
		Action:                    func(c *cli.Context) error { return generateCommand(c, stdout, stderr) },
	}
}

// generateCommand reads the flags and generates, scores or chats.
func generateCommand(c *cli.Context, stdout, stderr io.Writer) error {
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (prompts are given with --prompt)", c.Args().Slice())
	}
	cfg, err := tcli.ReadConfig(c)
	if err != nil {
		return err
	}
	if c.IsSet("generation-config") {
		// Refused rather than ignored: the sampling below comes from
		// generate's own flags, whatever the model's defaults.
		return fmt.Errorf("--generation-config does not apply to generate: its sampling comes from its own flags (--temperature, --top-k, --top-p, --min-p, --repetition-penalty)")
	}
	// The server's defaults for what a request leaves out are not used
	// here, so the engine must not log them as in force (the mock has
	// none, and refuses the setting).
	if cfg.Backend != tinyserve.BackendMock {
		cfg.GenerationConfig = "vllm"
	}
	cfg.Logger = tcli.StartupLogger(stderr, c.Bool("verbose"))
	ctx, stop := tcli.SignalContext(c.Context)
	defer stop()
	if c.Bool("score") {
		// Scoring generates nothing: the sampling flags do not apply.
		return score(ctx, cfg, c.StringSlice("prompt"), stdout)
	}
	if n := c.Int("max-tokens"); n < 1 {
		return fmt.Errorf("--max-tokens must be at least 1, got %d (--score scores prompts without generating)", n)
	}
	params, err := tcli.SamplingParams(c)
	if err != nil {
		return err
	}
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
	done, err := tinyserve.GenerateBatch(ctx, e, prompts, params)
	if err != nil {
		return err
	}
	for i, p := range prompts {
		fmt.Fprintf(out, "\n--- prompt %d (%d tokens, finish %s)\n%s%s\n", i, done[i].Tokens, done[i].Finish, p, done[i].Text)
	}
	return nil
}
