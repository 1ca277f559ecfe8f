package loadgen_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
	"github.com/tinyserve/tinyserve/openai"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
	"github.com/tinyserve/tinyserve/workload"
)

// ExampleRunCondition measures one load condition in-process: a workload
// generated in memory, tinyserve's OpenAI handler on the mock backend
// behind an httptest server, and a closed loop at concurrency 4.
func ExampleRunCondition() {
	// A workload, generated in memory. Its rows become the load client's
	// rows through the prompt-file format both packages read.
	cfg, err := workload.ParseConfig([]byte(`{
	  "name": "demo", "model": "mock", "tokenizer": "gpt2", "seed": 1, "request_count": 12,
	  "buckets": [{"name": "short", "count": 8, "prompt_tokens": 16, "output_tokens": 8},
	              {"name": "long", "count": 4, "prompt_tokens": 64, "output_tokens": 4}]
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
	wrows, err := workload.Generate(cfg, tok)
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, err := loadgen.DecodeRows(bytes.NewReader(workload.MarshalRows(wrows)), 0)
	if err != nil {
		fmt.Println(err)
		return
	}

	// The server under test.
	eng, err := mock.NewEngine(mock.Config{}, engine.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()
	srv := httptest.NewServer(openai.NewHandler(eng))
	defer srv.Close()

	// One condition; nil discards the JSONL records (they are returned too).
	sum, records, err := loadgen.RunCondition(context.Background(), loadgen.LoadOptions{
		URL: srv.URL + "/v1/completions", Model: eng.Info().ID, Concurrency: 4,
		Stream: true, IgnoreEOS: true, Client: srv.Client(),
	}, rows, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d records, %d successful, %d failed, %d output tokens\n",
		len(records), sum.Counts.Successful, sum.Counts.Failed, sum.Counts.OutputTokens)
	fmt.Println("TTFT measured for", sum.TTFTS.Count, "requests")
	// Output:
	// 12 records, 12 successful, 0 failed, 80 output tokens
	// TTFT measured for 12 requests
}
