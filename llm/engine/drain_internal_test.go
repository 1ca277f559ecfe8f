package engine

import (
	"context"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// heldBackend holds every Forward until release is closed.
type heldBackend struct {
	timedBackend
	release chan struct{}
}

func (b *heldBackend) Forward(batch *Batch) ([]SampleRow, error) {
	<-b.release
	return b.timedBackend.Forward(batch)
}

// TestDrainGivingUpLeavesNoWaiter: a Drain whose context ends before the
// engine is idle takes its wake-up channel back, so a caller that polls
// Drain with short deadlines during a long drain does not pile up one
// channel per call until the engine is finally idle.
func TestDrainGivingUpLeavesNoWaiter(t *testing.T) {
	b := &heldBackend{release: make(chan struct{})}
	e, err := New(b, nullTokenizer{}, llm.ModelInfo{VocabSize: 257, MaxModelLen: 64, EOSTokenID: 256}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{1, 2, 3}, Params: llm.SamplingParams{MaxTokens: 2, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 {
		if err := e.Drain(done); err != context.Canceled {
			t.Fatalf("Drain with an ended context while a request runs: %v", err)
		}
	}
	e.mu.Lock()
	waiters := len(e.idleWait)
	e.mu.Unlock()
	if waiters != 0 {
		t.Errorf("%d Drain calls that gave up still wait to be woken", waiters)
	}
	close(b.release)
	for range ch {
	}
	if err := e.Drain(context.Background()); err != nil {
		t.Errorf("Drain once idle: %v", err)
	}
}
