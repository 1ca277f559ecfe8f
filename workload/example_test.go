package workload_test

import (
	"fmt"

	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/workload"
)

func ExampleGenerate() {
	cfg, err := workload.ParseConfig([]byte(`{
	  "name": "demo", "model": "gpt2", "tokenizer": "gpt2", "seed": 1, "request_count": 2,
	  "buckets": [{"name": "demo", "count": 2, "prompt_tokens": 40, "output_tokens": 8}]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := tokenizer.GPT2()
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, err := workload.Generate(cfg, tok)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rows {
		fmt.Println(r.ID, r.PromptTokens, r.Prompt[:30])
	}
	// Output:
	// demo_000000 40 demo request 000000. Analyze h
	// demo_000001 40 demo request 000001. Analyze h
}
