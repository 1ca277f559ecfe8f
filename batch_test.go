package tinyserve

import (
	"context"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// TestGenerateBatch: more prompts than the engine's waiting queue holds
// all complete, in prompt order, without an overload error: RunBatch waits
// for room instead of failing.
func TestGenerateBatch(t *testing.T) {
	e, err := mock.NewEngine(mock.Config{}, engine.Config{MaxNumSeqs: 1, MaxPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	got, err := GenerateBatch(context.Background(), e, prompts, llm.SamplingParams{MaxTokens: 3, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(prompts) {
		t.Fatalf("%d completions for %d prompts", len(got), len(prompts))
	}
	for i, c := range got {
		if c.Tokens != 3 || c.Finish != llm.FinishLength || c.Text == "" {
			t.Errorf("prompt %d: %+v", i, c)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GenerateBatch(ctx, e, prompts, llm.SamplingParams{MaxTokens: 3}); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("cancelled: %v", err)
	}
}
