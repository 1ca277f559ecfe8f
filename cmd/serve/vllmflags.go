package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/tinyserve/tinyserve"
)

// vllmCategory groups, in --help, the flags kept for launch scripts
// written for `vllm serve`.
const vllmCategory = "vLLM flags (accepted where tinyserve already behaves as they ask)"

// vllmFlags are `vllm serve` flags that launch scripts and benchmark guides
// carry (--disable-log-requests, -tp 1, --enforce-eager, ...). Each is
// accepted only with a value under which tinyserve does what vLLM would,
// and otherwise refused with the reason, so that a script moved from vLLM
// runs unchanged or says what differs; none is ignored. They have no
// TINYSERVE_ variables: they belong to command lines.
func vllmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "enforce-eager", Category: vllmCategory, Usage: "no CUDA graphs (tinyserve's default; refused with --cuda-graphs)"},
		&cli.BoolFlag{Name: "enable-chunked-prefill", Category: vllmCategory, Usage: "chunked prefill (always on)"},
		&cli.BoolFlag{Name: "no-enable-prefix-caching", Category: vllmCategory, Usage: "no prefix caching (tinyserve's default; refused with --enable-prefix-caching)"},
		&cli.BoolFlag{Name: "trust-remote-code", Category: vllmCategory, Usage: "accepted: GPT-2 needs no code from its checkpoint, and none is ever run"},
		&cli.BoolFlag{Name: "disable-log-requests", Category: vllmCategory, Usage: "accepted: prompts and outputs are never logged"},
		&cli.BoolFlag{Name: "enable-log-requests", Category: vllmCategory, Usage: "refused: prompts and outputs are never logged (the access line and --log-level debug's admission line carry request ids)"},
		&cli.BoolFlag{Name: "disable-log-stats", Category: vllmCategory, Usage: "accepted: there are no periodic stats lines (GET /metrics has the figures)"},
		&cli.IntFlag{Name: "tensor-parallel-size", Aliases: []string{"tp"}, Value: 1, Category: vllmCategory, Usage: "1 (one model on one device)"},
		&cli.IntFlag{Name: "pipeline-parallel-size", Aliases: []string{"pp"}, Value: 1, Category: vllmCategory, Usage: "1"},
		&cli.IntFlag{Name: "data-parallel-size", Aliases: []string{"dp"}, Value: 1, Category: vllmCategory, Usage: "1"},
		&cli.StringFlag{Name: "kv-cache-dtype", Value: "auto", Category: vllmCategory, Usage: "auto (the KV cache has --dtype's type)"},
		&cli.StringFlag{Name: "load-format", Value: "auto", Category: vllmCategory, Usage: "auto (safetensors, else pytorch_model.bin, as vLLM's auto)"},
		&cli.StringFlag{Name: "scheduling-policy", Value: "fcfs", Category: vllmCategory, Usage: "fcfs (first come, first served)"},
	}
}

// checkVLLMFlags returns an error naming the first vLLM flag of c given a
// value tinyserve does not honour, or one that contradicts cfg.
func checkVLLMFlags(c *cli.Context, cfg tinyserve.Config) error {
	switch {
	case c.Bool("enforce-eager") && cfg.CUDAGraphs:
		return fmt.Errorf("--enforce-eager and --cuda-graphs contradict each other: give one")
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
		{"enforce-eager", cfg.CUDAGraphs, "CUDA graphs are used only with --cuda-graphs"},
		{"enable-chunked-prefill", false, "prefill is always chunked to the step's token budget (--max-num-batched-tokens)"},
		{"no-enable-prefix-caching", cfg.EnablePrefixCaching, "prefix caching is on only with --enable-prefix-caching"},
		{"disable-log-requests", false, "tinyserve never logs prompts or outputs"},
		{"disable-log-stats", false, "there are no periodic stats lines (GET /metrics has the figures)"},
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
	for _, f := range []struct{ name, want, why string }{
		{"kv-cache-dtype", "auto", "the KV cache has the weights' type (--dtype)"},
		{"load-format", "auto", "weights are read from safetensors, else pytorch_model.bin, as vLLM's auto reads them"},
		{"scheduling-policy", "fcfs", "requests are scheduled first come, first served"},
	} {
		if v := c.String(f.name); v != f.want {
			return fmt.Errorf("--%s %q: only %s is accepted: %s", f.name, v, f.want, f.why)
		}
	}
	return nil
}
