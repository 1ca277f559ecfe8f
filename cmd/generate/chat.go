package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/tinyserve/tinyserve"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// chatMessage is one turn of the conversation --chat renders.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// conversation makes the --chat conversation: the system message when
// given, then the prompts as alternating user and assistant turns, the
// first a user's, so that an odd number of prompts ends on the user and
// the model answers it.
func conversation(system string, prompts []string) ([]chatMessage, error) {
	if len(prompts)%2 == 0 {
		return nil, fmt.Errorf("--chat takes an odd number of --prompt turns (user, assistant, user, ...), so that the model answers the last; got %d", len(prompts))
	}
	var msgs []chatMessage
	if system != "" {
		msgs = append(msgs, chatMessage{"system", system})
	}
	for i, p := range prompts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, chatMessage{role, p})
	}
	return msgs, nil
}

// chat renders msgs with the model's chat template, as the server's
// /v1/chat/completions does (add_generation_prompt true, the template's
// special tokens, kwargs as chat_template_kwargs, no special tokens added
// by the tokenizer), prints the rendered prompt and generates the reply.
func chat(ctx context.Context, cfg tinyserve.Config, msgs []chatMessage, kwargs map[string]any, params llm.SamplingParams, out io.Writer) error {
	e, err := open(ctx, cfg, []string{""}, out)
	if err != nil {
		return err
	}
	defer e.Close()
	var tmpl llm.ChatTemplate
	var base map[string]any
	if ct, ok := e.(llm.ChatTemplater); ok {
		tmpl, base = ct.ChatTemplate()
	}
	if tmpl == nil {
		return errors.New("the model has no chat template (its tokenizer_config.json has none): give one with --chat-template")
	}
	vars := maps.Clone(kwargs)
	if vars == nil {
		vars = map[string]any{}
	}
	maps.Copy(vars, base)
	vars["add_generation_prompt"] = true
	raw, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	text, err := tmpl.Render(raw, nil, vars)
	if err != nil {
		return fmt.Errorf("the chat template could not render the conversation: %w", err)
	}
	req := llm.Request{ID: "chat", PromptTokens: tokenizer.EncodePrompt(e.Tokenizer(), text, false), Params: params}
	var reply string
	var finish llm.FinishReason
	var tokens int
	err = tinyserve.RunBatch(ctx, e, []llm.Request{req}, func(_ int, ev llm.Event) {
		reply += ev.Text
		if ev.Finish != "" {
			finish, tokens, err = ev.Finish, ev.CompletionTokens, ev.Err
		}
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n--- rendered prompt (%d tokens)\n%s\n--- reply (%d tokens, finish %s)\n%s\n", len(req.PromptTokens), text, tokens, finish, reply)
	return nil
}
