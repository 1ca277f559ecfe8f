package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve/llm/chat/reasoning"
	"github.com/tinyserve/tinyserve/llm/chat/toolcall"
	"github.com/tinyserve/tinyserve/openai"
)

// chatCategory groups the chat endpoint's flags in --help; they are vLLM's.
const chatCategory = "Chat (vLLM's flags)"

func chatFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tool-call-parser", Category: chatCategory,
			Usage: "parse the tool calls the model writes into tool_calls: " + strings.Join(toolcall.Names, " or ") + " (Qwen2.5/Qwen3: hermes; Llama 3.1+: llama3_json)"},
		&cli.BoolFlag{Name: "enable-auto-tool-choice", Category: chatCategory,
			Usage: "accept tool_choice \"auto\" (the default of a request with tools); needs --tool-call-parser"},
		&cli.StringFlag{Name: "reasoning-parser", Category: chatCategory,
			Usage: "put the model's <think>…</think> text in reasoning_content: " + strings.Join(reasoning.Names, " or ")},
	}
}

// chatOptions turns the chat flags into handler options, refusing an
// unknown parser name, and --enable-auto-tool-choice without a parser, as
// vLLM refuses them at start-up.
func chatOptions(c *cli.Context) ([]openai.Option, error) {
	var opts []openai.Option
	if name := c.String("tool-call-parser"); name != "" {
		p, err := toolcall.New(name)
		if err != nil {
			return nil, fmt.Errorf("--tool-call-parser: %w", err)
		}
		opts = append(opts, openai.WithToolCallParser(p, c.Bool("enable-auto-tool-choice")))
	} else if c.Bool("enable-auto-tool-choice") {
		return nil, fmt.Errorf("--enable-auto-tool-choice needs --tool-call-parser (%s)", strings.Join(toolcall.Names, " or "))
	}
	if name := c.String("reasoning-parser"); name != "" {
		p, err := reasoning.New(name)
		if err != nil {
			return nil, fmt.Errorf("--reasoning-parser: %w", err)
		}
		opts = append(opts, openai.WithReasoningParser(p))
	}
	return opts, nil
}
