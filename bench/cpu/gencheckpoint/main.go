// Command gencheckpoint writes a built-in tinyserve model (random weights)
// as a Hugging Face checkpoint folder, config.json plus a float32
// model.safetensors, so that every engine in a benchmark reads the same
// weights from disk.
//
//	go run ./bench/cpu/gencheckpoint -model gpt2-124m-random -out /tmp/gpt2-124m-random
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tinyserve/tinyserve/llm/gpt2"
)

func main() {
	model := flag.String("model", gpt2.Builtin124M, "built-in model to write ("+gpt2.BuiltinTiny+" or "+gpt2.Builtin124M+")")
	out := flag.String("out", "", "checkpoint folder to write (created if needed)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gencheckpoint: -out is required")
		os.Exit(2)
	}
	m, err := gpt2.Builtin(*model)
	if err == nil {
		err = m.WriteCheckpoint(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencheckpoint:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%d parameters, random weights) to %s\n", *model, m.NumParams(), *out)
}
