package engine_test

import (
	"errors"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// tableBackend is a stateless model whose every step returns the same
// logits row: the simplest backend a user would write, with logits kept in
// a table rather than computed into a fresh buffer each step.
type tableBackend struct {
	row  []float32
	rows []engine.SampleRow
}

func (b *tableBackend) MaxKVBlocks(int) (int, error) { return 64, nil }
func (b *tableBackend) AllocateKV(int, int) error    { return nil }
func (b *tableBackend) Forward(batch *engine.Batch) ([]engine.SampleRow, error) {
	b.rows = b.rows[:0]
	for _, s := range batch.Seqs {
		if s.Sample {
			b.rows = append(b.rows, engine.SampleRow{Logits: b.row, Argmax: mock.EOSTokenID})
		}
	}
	return b.rows, nil
}

// TestMaskingLeavesBackendLogitsAlone checks that min_tokens, which keeps
// EOS from being chosen, does so without writing into the backend's logits:
// a backend that returns rows from a table must not find EOS at -Inf in it
// for every later request.
func TestMaskingLeavesBackendLogitsAlone(t *testing.T) {
	row := make([]float32, mock.NewTokenizer().VocabSize())
	row['x'] = 1
	row[mock.EOSTokenID] = 2 // the greedy choice
	be := &tableBackend{row: row}
	info := llm.ModelInfo{ID: "table", MaxModelLen: 64, VocabSize: len(row), EOSTokenID: mock.EOSTokenID}
	e, err := engine.New(be, mock.NewTokenizer(), info, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	r := run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 8, MinTokens: 3}})
	if got := string(rune(r.tokens[0])); len(r.tokens) != 4 || got != "x" || r.last.Finish != llm.FinishStop {
		t.Errorf("min_tokens 3: tokens %v, finish %q; want x x x EOS, stop", r.tokens, r.last.Finish)
	}
	if row[mock.EOSTokenID] != 2 {
		t.Fatalf("the backend's logits row was written: EOS logit %v", row[mock.EOSTokenID])
	}
	// The next request, which needs the logits row (logprobs), still ends
	// at once on EOS.
	n := 0
	r = run(t, e, llm.Request{PromptTokens: []int{'a'}, Params: llm.SamplingParams{MaxTokens: 8, Logprobs: &n}})
	if len(r.tokens) != 1 || r.tokens[0] != mock.EOSTokenID {
		t.Errorf("after a min_tokens request: tokens %v, want EOS at once", r.tokens)
	}
}

func TestGenerateNilContext(t *testing.T) {
	e := newEngine(t, mock.Config{}, engine.Config{})
	//lint:ignore SA1012 a nil context is what is tested
	ch, err := e.Generate(nil, llm.Request{PromptTokens: []int{1}, Params: greedy(2)})
	if !errors.Is(err, llm.ErrInvalidRequest) || ch != nil {
		t.Fatalf("Generate(nil ctx): %v, %v; want ErrInvalidRequest and no channel", ch, err)
	}
	// The engine is unaffected.
	if r := run(t, e, llm.Request{PromptTokens: []int{1}, Params: greedy(2)}); len(r.tokens) != 2 {
		t.Errorf("after a nil context: %d tokens", len(r.tokens))
	}
}
