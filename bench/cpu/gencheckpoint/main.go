// Command gencheckpoint writes a built-in tinyserve model (random weights)
// as a Hugging Face checkpoint folder, config.json plus one
// model.safetensors (float32 by default; -dtype bfloat16 for the stored
// type of qwen2.5-0.5b-random), so that every engine in a benchmark reads
// the same weights from disk.
//
//	go run ./bench/cpu/gencheckpoint -model gpt2-124m-random -out /tmp/gpt2-124m-random
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

func main() {
	name := flag.String("model", model.Builtin124M, fmt.Sprintf("built-in model to write %v", model.BuiltinNames()))
	dtype := flag.String("dtype", "float32", "stored type of the weights: float32, float16 or bfloat16")
	out := flag.String("out", "", "checkpoint folder to write (created if needed)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gencheckpoint: -out is required")
		os.Exit(2)
	}
	dt, ok := map[string]tensor.DType{"float32": tensor.F32, "float16": tensor.F16, "bfloat16": tensor.BF16}[*dtype]
	if !ok {
		fmt.Fprintf(os.Stderr, "gencheckpoint: -dtype %q: want float32, float16 or bfloat16\n", *dtype)
		os.Exit(2)
	}
	m, err := model.Builtin(*name)
	if err == nil {
		err = m.WriteCheckpoint(*out, dt)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencheckpoint:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%d parameters, random weights, %s) to %s\n", *name, m.NumParams(), *dtype, *out)
}
