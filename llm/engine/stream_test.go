package engine_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// TestEventsWaitInTheChannel: the events the engine made while the caller
// was not reading wait in the request's channel, so a caller that falls
// behind sees with len how many it can take at once without blocking (the
// OpenAI server merges them into one chunk). synctest.Wait returns once the
// loop is idle and the request's goroutine has delivered all it could.
func TestEventsWaitInTheChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := mock.NewEngine(mock.Config{}, engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		const n = 8
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{'a', 'b'}, Params: greedy(n)})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := len(ch); got != n {
			t.Fatalf("%d events waiting in the channel, want all %d", got, n)
		}
		var tokens int
		for i := range n {
			ev := <-ch
			tokens += len(ev.TokenIDs)
			if (ev.Finish != "") != (i == n-1) {
				t.Fatalf("event %d: finish %q", i, ev.Finish)
			}
		}
		if _, ok := <-ch; ok || tokens != n {
			t.Fatalf("after %d tokens the channel is open (%v), want closed after %d", tokens, ok, n)
		}
	})
}
