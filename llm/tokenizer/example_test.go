package tokenizer_test

import (
	"fmt"
	"os"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

func ExampleGPT2() {
	tok, err := tokenizer.GPT2()
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode("Hello, world!<|endoftext|>", true)
	fmt.Println(ids)
	fmt.Println(tok.Decode(ids, true))
	// Output:
	// [15496 11 995 0 50256]
	// Hello, world!
}

func ExampleLoad() {
	// "gpt2" is built in; a path, a model folder or a Hugging Face id in the
	// local cache work the same way. The environment decides where the cache is.
	tok, err := tokenizer.Load("gpt2", tokenizer.LoadOptionsFromEnv(os.Getenv, ""))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tok.VocabSize(), tok.EOSTokenID())
	// Output: 50257 50256
}
