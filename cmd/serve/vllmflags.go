package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
	tcli "github.com/tinyserve/tinyserve/internal/cli"
	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/openai"
)

// vllmCategory groups, in --help, the flags kept for launch scripts
// written for `vllm serve`.
const vllmCategory = "vLLM flags (accepted where tinyserve already behaves as they ask)"

// vllmFlags are `vllm serve` flags that launch scripts and benchmark guides
// carry (--disable-log-requests, -tp 1, --trust-remote-code, ...). Each is
// accepted only with a value under which tinyserve does what vLLM would,
// and otherwise refused with the reason, so that a script moved from vLLM
// runs unchanged or says what differs; none is ignored. They have no
// TINYSERVE_ variables: they belong to command lines.
func vllmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "enable-chunked-prefill", Category: vllmCategory, Usage: "chunked prefill (always on)"},
		&cli.BoolFlag{Name: "no-enable-prefix-caching", Category: vllmCategory, Usage: "no prefix caching (tinyserve's default; refused with --enable-prefix-caching)"},
		&cli.BoolFlag{Name: "trust-remote-code", Category: vllmCategory, Usage: "accepted: GPT-2 needs no code from its checkpoint, and none is ever run"},
		&cli.BoolFlag{Name: "disable-log-requests", Category: vllmCategory, Usage: "accepted: prompts and outputs are never logged"},
		&cli.BoolFlag{Name: "enable-log-requests", Category: vllmCategory, Usage: "refused: prompts and outputs are never logged (the access line and --log-level debug's admission line carry request ids)"},
		&cli.BoolFlag{Name: "no-enable-log-requests", Category: vllmCategory, Usage: "accepted: prompts and outputs are never logged"},
		&cli.BoolFlag{Name: "disable-log-stats", Category: vllmCategory, Usage: "accepted: there are no periodic stats lines (GET /metrics has the figures)"},
		&cli.BoolFlag{Name: "disable-uvicorn-access-log", Category: vllmCategory, Usage: "no access lines (msg \"http request\"); tinyserve's other lines stay"},
		&cli.StringFlag{Name: "uvicorn-log-level", Value: "info", Category: vllmCategory, Usage: "the access lines' level, as uvicorn's: info, debug or trace keep them, whatever --log-level says; warning, error or critical drop them (tinyserve's other lines follow --log-level, and so do the access lines without this flag)"},
		&cli.IntFlag{Name: "max-logprobs", Value: llm.MaxLogprobs, Category: vllmCategory, Usage: fmt.Sprint(llm.MaxLogprobs, " (logprobs and prompt_logprobs take at most ", llm.MaxLogprobs, ", vLLM's default)")},
		&cli.StringFlag{Name: "tokenizer-mode", Value: "auto", Category: vllmCategory, Usage: "auto or hf (the tokenizer's tokenizer.json when it has one, else its vocab.json and merges.txt)"},
		&cli.IntFlag{Name: "tensor-parallel-size", Aliases: []string{"tp"}, Value: 1, Category: vllmCategory, Usage: "1 (one model on one device)"},
		&cli.IntFlag{Name: "pipeline-parallel-size", Aliases: []string{"pp"}, Value: 1, Category: vllmCategory, Usage: "1"},
		&cli.IntFlag{Name: "data-parallel-size", Aliases: []string{"dp"}, Value: 1, Category: vllmCategory, Usage: "1"},
		&cli.StringFlag{Name: "kv-cache-dtype", Value: "auto", Category: vllmCategory, Usage: "auto (the KV cache has the activations' type: --dtype's on cuda, float32 on cpu)"},
		&cli.StringFlag{Name: "scheduling-policy", Value: "fcfs", Category: vllmCategory, Usage: "fcfs (first come, first served)"},
	}
}

// checkVLLMFlags returns an error naming the first vLLM flag of c given a
// value tinyserve does not honour, or one that contradicts cfg.
func checkVLLMFlags(c *cli.Context, cfg tinyserve.Config) error {
	switch {
	case c.Bool("no-enable-prefix-caching") && cfg.EnablePrefixCaching:
		return fmt.Errorf("--no-enable-prefix-caching and --enable-prefix-caching contradict each other: give one")
	case c.Bool("enable-log-requests"):
		return fmt.Errorf("--enable-log-requests: tinyserve never logs prompts or outputs (each request's access line carries its id; --log-level debug adds its admission)")
	}
	// A boolean given as --flag=false asks for the opposite of the flag,
	// which tinyserve mostly does not do: it must not pass as the flag.
	for _, f := range []struct {
		name string
		ok   bool // tinyserve does what the false asks
		why  string
	}{
		{"enable-chunked-prefill", false, "prefill is always chunked to the step's token budget (--max-num-batched-tokens)"},
		{"no-enable-prefix-caching", cfg.EnablePrefixCaching, "prefix caching is on only with --enable-prefix-caching"},
		{"disable-log-requests", false, "tinyserve never logs prompts or outputs"},
		{"no-enable-log-requests", false, "tinyserve never logs prompts or outputs"},
		{"disable-log-stats", false, "there are no periodic stats lines (GET /metrics has the figures)"},
		{"disable-uvicorn-access-log", true, ""},
		{"trust-remote-code", true, ""},
		{"enable-log-requests", true, ""},
	} {
		if c.IsSet(f.name) && !c.Bool(f.name) && !f.ok {
			return fmt.Errorf("--%s=false: %s", f.name, f.why)
		}
	}
	for _, name := range []string{"tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size"} {
		if n := c.Int(name); n != 1 {
			return fmt.Errorf("--%s %d: tinyserve runs one model on one device (only 1 is accepted)", name, n)
		}
	}
	if n := c.Int("max-logprobs"); n != llm.MaxLogprobs {
		return fmt.Errorf("--max-logprobs %d: only %d is accepted: logprobs and prompt_logprobs take at most %d (vLLM's default)", n, llm.MaxLogprobs, llm.MaxLogprobs)
	}
	switch v := c.String("uvicorn-log-level"); v {
	case "critical", "error", "warning", "info", "debug", "trace":
	default:
		return fmt.Errorf("--uvicorn-log-level %q: want critical, error, warning, info, debug or trace", v)
	}
	switch v := c.String("tokenizer-mode"); v {
	case "auto", "hf":
	default:
		return fmt.Errorf("--tokenizer-mode %q: only auto and hf are accepted: the tokenizer's tokenizer.json is read when it has one, else its vocab.json and merges.txt", v)
	}
	for _, f := range []struct{ name, want, why string }{
		{"kv-cache-dtype", "auto", "the KV cache has the activations' type (--dtype's on cuda, float32 on cpu)"},
		{"scheduling-policy", "fcfs", "requests are scheduled first come, first served"},
	} {
		if v := c.String(f.name); v != f.want {
			return fmt.Errorf("--%s %q: only %s is accepted: %s", f.name, v, f.want, f.why)
		}
	}
	return nil
}

// accessLoggerFor is the access lines' own logger when --uvicorn-log-level
// is given and keeps them: in vLLM uvicorn's level is apart from vLLM's,
// so "--log-level warn --uvicorn-log-level info" is a quiet server that
// still logs each request. Without the flag (nil) the access lines follow
// --log-level, as tinyserve's other lines.
func accessLoggerFor(c *cli.Context, w io.Writer) (*slog.Logger, error) {
	if !c.IsSet("uvicorn-log-level") || !accessLog(c) {
		return nil, nil
	}
	return tcli.NewLogger(w, c.String("log-format"), "info")
}

// accessLog reports whether the access lines are logged: not with
// --disable-uvicorn-access-log, nor with an --uvicorn-log-level above
// info, which is the level of uvicorn's access lines.
func accessLog(c *cli.Context) bool {
	switch c.String("uvicorn-log-level") {
	case "warning", "error", "critical":
		return false
	}
	return !c.Bool("disable-uvicorn-access-log")
}

// moreNamesKey is the key of cli.App.Metadata under which main passes the
// served names that follow the first (moreServedNames).
const moreNamesKey = "more-served-names"

// moreServedNames takes out of args the words that follow
// "--served-model-name NAME" up to the next flag: vllm serve's
// --served-model-name takes several names, the first the one responses
// carry, and launch scripts give them so. The flag parser would stop at
// the second. The "=" form takes one name, as in vLLM, and a repeated flag
// keeps its last, as vLLM's parser does.
func moreServedNames(args []string) (rest, more []string) {
	rest = make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		rest = append(rest, args[i])
		if i == 0 || (args[i] != "--served-model-name" && args[i] != "-served-model-name") || i+1 >= len(args) {
			continue
		}
		i++
		rest = append(rest, args[i]) // the first name: the flag's value
		more = more[:0]              // a repeated flag replaces the names
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !slices.Contains([]string{"health", "help", "h"}, args[i+1]) {
			i++
			more = append(more, args[i])
		}
	}
	return rest, more
}

// handlerOptions are the handler's options from the flags of c: the access lines (--log-format,
// --disable-uvicorn-access-log, --uvicorn-log-level), the served names
// (--served-model-name NAME NAME...) and the chat parsers.
func handlerOptions(c *cli.Context, cfg tinyserve.Config, stderr io.Writer) ([]openai.Option, error) {
	accessLogger, err := accessLoggerFor(c, stderr)
	if err != nil {
		return nil, err
	}
	opts := []openai.Option{openai.WithAccessLog(accessLog(c)), openai.WithAccessLogger(accessLogger)}
	if more, _ := c.App.Metadata[moreNamesKey].([]string); len(more) > 0 {
		if !c.IsSet("model") {
			// vllm serve reads these words as names too; taking the last
			// for the model would be a guess.
			return nil, fmt.Errorf("--served-model-name took %q as more names of the model, as vllm serve does, and no model is given: give the model first (tinyserve-serve MODEL --served-model-name NAME...) or with --model", more)
		}
		opts = append(opts, openai.WithServedModelNames(append([]string{cfg.ServedModelName}, more...)...))
	}
	chat, err := chatOptions(c)
	return append(opts, chat...), err
}

// apiKeys returns the keys the /v1/ routes require: those of --api-key (or
// TINYSERVE_API_KEY), else VLLM_API_KEY as one key, as vllm serve reads it
// (its --api-key takes precedence over the variable). Without the fallback a
// deployment moved from vLLM with its key in VLLM_API_KEY would serve
// without authentication and not say so.
func apiKeys(flagKeys []string, vllmKey string) []string {
	keys := slices.DeleteFunc(slices.Clone(flagKeys), func(k string) bool { return k == "" })
	if len(keys) == 0 && vllmKey != "" {
		keys = []string{vllmKey}
	}
	return keys
}
