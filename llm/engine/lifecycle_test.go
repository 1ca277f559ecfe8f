package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tinyserve/tinyserve/llm"
	"github.com/tinyserve/tinyserve/llm/engine"
	"github.com/tinyserve/tinyserve/llm/mock"
)

// pausableBackend is a mock backend whose Forward can be held: while
// paused, the next Forward tells the test it has begun and waits until
// resume. The engine's loop is then parked inside a step, so the test
// knows exactly which requests have started.
type pausableBackend struct {
	*mock.Backend
	mu    sync.Mutex
	gate  chan struct{} // non-nil while paused; closed by resume
	began chan struct{} // closed when a Forward reaches the gate
}

func (p *pausableBackend) Forward(b *engine.Batch) ([]engine.SampleRow, error) {
	p.mu.Lock()
	gate, began := p.gate, p.began
	p.gate, p.began = nil, nil // one held step per pause
	p.mu.Unlock()
	if gate != nil {
		close(began)
		<-gate
	}
	return p.Backend.Forward(b)
}

// pause holds the next Forward; wait on the returned channel to know it
// began, and call the returned function to let it go.
func (p *pausableBackend) pause() (began <-chan struct{}, resume func()) {
	gate, b := make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.gate, p.began = gate, b
	p.mu.Unlock()
	return b, func() { close(gate) }
}

// TestHostileCallersLeaveNothingBehind submits many requests to an engine
// whose small pool forces preemption, and has their callers walk away at
// every stage: before their request was ever scheduled (still queued),
// after some events (running, or preempted and queued again), right at the
// final event, or never. Once they are all gone the engine must be back
// where it started: no block held, nothing running or waiting, every
// request counted finished once, no goroutine left, and the whole waiting
// queue free again (exactly MaxPending requests admitted while the loop is
// held, and not one more).
func TestHostileCallersLeaveNothingBehind(t *testing.T) {
	for _, prefix := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-prefix-cache", true: "prefix-cache"}[prefix], func(t *testing.T) {
			const maxPending = 24
			pb := &pausableBackend{Backend: mock.NewBackend(mock.Config{Latency: mock.Latency{PerStep: 100 * time.Microsecond}})}
			e, err := engine.New(pb, mock.NewTokenizer(), mock.Info(), engine.Config{
				MaxNumSeqs: 6, MaxNumBatchedTokens: 32, BlockSize: 4, NumBlocks: 24,
				MaxPending: maxPending, PrefixCaching: prefix, Seed: new(uint64(1)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			before := goleak.IgnoreCurrent()

			rng := rand.New(rand.NewPCG(7, uint64(map[bool]int{false: 1, true: 2}[prefix])))
			var wg sync.WaitGroup
			slots := make(chan struct{}, 16) // callers at once: the queue fills, now and then overflows
			admitted, overloaded := 0, 0
			for i := range 200 {
				// Shared prompt heads give the prefix cache something to share.
				p := append(prompt(i%5, 8), prompt(i, 1+rng.IntN(20))...)
				maxTokens := 1 + rng.IntN(40)
				// -2: cancel before reading; -1: read to the end; k: cancel
				// after k events (k past the end is "right at the end").
				quitAfter := rng.IntN(maxTokens+4) - 2
				slots <- struct{}{}
				ctx, cancel := context.WithCancel(context.Background())
				ch, err := e.Generate(ctx, llm.Request{PromptTokens: p, Params: greedy(maxTokens)})
				for errors.Is(err, llm.ErrOverloaded) {
					overloaded++
					time.Sleep(100 * time.Microsecond) // let the queue move
					ch, err = e.Generate(ctx, llm.Request{PromptTokens: p, Params: greedy(maxTokens)})
				}
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				admitted++
				wg.Go(func() {
					defer func() { <-slots }()
					defer cancel()
					if quitAfter == -2 {
						cancel()
					}
					events := 0
					for ev := range ch {
						events++
						if ev.Finish == llm.FinishError {
							t.Errorf("request failed: %v", ev.Err)
						}
						if quitAfter >= 0 && events == quitAfter {
							cancel()
						}
					}
				})
			}
			wg.Wait()
			waitIdle(t, e)
			s := e.Stats()
			if s.Finished != uint64(admitted) {
				t.Errorf("%d requests admitted, %d finished", admitted, s.Finished)
			}
			if s.Preemptions == 0 {
				t.Errorf("no preemption: the pool is too large for the test to mean anything")
			}
			t.Logf("admitted %d, overloaded %d, preemptions %d, generated %d", admitted, overloaded, s.Preemptions, s.GenerationTokens)
			// Every per-request goroutine is gone while the engine still runs:
			// Close would end them anyway and hide a leak.
			goleak.VerifyNone(t, before)

			// The queue is whole again: with the loop held inside the step of
			// one running request, exactly maxPending more are admitted.
			began, resume := pb.pause()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(1, 4), Params: greedy(1)})
			if err != nil {
				t.Fatal(err)
			}
			<-began
			var chans []<-chan llm.Event
			for i := range maxPending {
				ch, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(i, 4), Params: greedy(1)})
				if err != nil {
					t.Errorf("request %d of a burst of MaxPending after the storm: %v", i, err)
					break
				}
				chans = append(chans, ch)
			}
			if _, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(0, 4), Params: greedy(1)}); !errors.Is(err, llm.ErrOverloaded) {
				t.Errorf("request past MaxPending: %v, want ErrOverloaded", err)
			}
			resume()
			for _, ch := range append(chans, first) {
				if r := collect(t, ch); r.last.Finish != llm.FinishLength {
					t.Errorf("burst request ended %q %v", r.last.Finish, r.last.Err)
				}
			}
			waitIdle(t, e)
		})
	}
}

// TestPreemptedThenAborted: a request preempted by recompute goes back to
// the queue; aborted there, it frees nothing twice and returns no queue
// place it no longer holds, so the queue is exactly whole afterwards.
func TestPreemptedThenAborted(t *testing.T) {
	const maxPending = 3
	pb := &pausableBackend{Backend: mock.NewBackend(mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}})}
	// 4 blocks of 4 tokens: each request alone fills the pool by its end.
	e, err := engine.New(pb, mock.NewTokenizer(), mock.Info(), engine.Config{
		MaxNumSeqs: 2, BlockSize: 4, NumBlocks: 4, MaxPending: maxPending})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(1, 4), Params: greedy(12)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(2, 4), Params: greedy(12)})
	if err != nil {
		t.Fatal(err)
	}
	// Hold the loop as soon as b is back in the queue, so that it cannot be
	// scheduled again before its abort.
	deadline := time.Now().Add(5 * time.Second)
	var began <-chan struct{}
	var resume func()
	for {
		if s := e.Stats(); s.Preemptions > 0 && s.Waiting == 1 {
			began, resume = pb.pause()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no preemption: %+v", e.Stats())
		}
		time.Sleep(100 * time.Microsecond)
	}
	<-began
	cancel()
	resume()
	rb := collect(t, b)
	if rb.last.Finish != "" && rb.last.Finish != llm.FinishAbort {
		t.Errorf("the aborted request ended %q", rb.last.Finish)
	}
	if ra := collect(t, a); ra.last.Finish != llm.FinishLength || len(ra.tokens) != 12 {
		t.Errorf("the request that kept running ended %q after %d tokens", ra.last.Finish, len(ra.tokens))
	}
	waitIdle(t, e)
	if s := e.Stats(); s.Finished != 2 || s.Preemptions != 1 {
		t.Errorf("finished %d, preemptions %d; want 2 and 1", s.Finished, s.Preemptions)
	}

	began, resume = pb.pause()
	first, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(3, 4), Params: greedy(1)})
	if err != nil {
		t.Fatal(err)
	}
	<-began
	chans := []<-chan llm.Event{first}
	for i := range maxPending {
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(i, 4), Params: greedy(1)})
		if err != nil {
			t.Fatalf("request %d of a burst of MaxPending: %v", i, err)
		}
		chans = append(chans, ch)
	}
	if _, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(0, 4), Params: greedy(1)}); !errors.Is(err, llm.ErrOverloaded) {
		t.Errorf("request past MaxPending: %v, want ErrOverloaded", err)
	}
	resume()
	for _, ch := range chans {
		collect(t, ch)
	}
}

// TestCloseEndsEveryRequest: Close with requests running, queued and just
// submitted ends each with an abort event carrying ErrClosed and closes its
// channel, instead of leaving a caller waiting; every goroutine the
// requests started is gone once Close returns.
func TestCloseEndsEveryRequest(t *testing.T) {
	e, err := mock.NewEngine(mock.Config{Latency: mock.Latency{PerStep: time.Millisecond}}, engine.Config{MaxNumSeqs: 2})
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	var chans []<-chan llm.Event
	for i := range 6 {
		ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(i, 4), Params: greedy(1000)})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	<-chans[0] // running; the last four wait
	drained := make(chan error, 1)
	go func() { drained <- e.Drain(context.Background()) }()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range chans {
		r := collect(t, ch)
		if r.last.Finish != llm.FinishAbort || !errors.Is(r.last.Err, llm.ErrClosed) {
			t.Errorf("request %d after Close: %q %v", i, r.last.Finish, r.last.Err)
		}
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Errorf("Drain cut short by Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain still waiting after Close ended every request")
	}
	if s := e.Stats(); s.Running != 0 || s.Waiting != 0 || s.KVBlocksUsed != 0 {
		t.Errorf("stats after Close: %+v", s)
	}
	goleak.VerifyNone(t, before)
}

// TestQueueBoundWithAFrozenClock: whether a request still holds a waiting
// queue place does not depend on the clock. With a Config.Now that returns
// the zero time (a frozen test clock), a running request aborted by its
// caller used to look never scheduled, returned a place it had already
// given back, and the queue then took MaxPending+1 requests.
func TestQueueBoundWithAFrozenClock(t *testing.T) {
	pb := &pausableBackend{Backend: mock.NewBackend(mock.Config{})}
	e, err := engine.New(pb, mock.NewTokenizer(), mock.Info(), engine.Config{
		MaxNumSeqs: 1, MaxPending: 1, Now: func() time.Time { return time.Time{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(1, 4), Params: greedy(1000)})
	if err != nil {
		t.Fatal(err)
	}
	<-a // running: its first token is out
	cancel()
	collect(t, a)
	waitIdle(t, e) // the abort is applied

	began, resume := pb.pause()
	b, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(2, 4), Params: greedy(1)})
	if err != nil {
		t.Fatal(err)
	}
	<-began // b is scheduled, its place free again; the loop is held
	c, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(3, 4), Params: greedy(1)})
	if err != nil {
		resume()
		t.Fatalf("the one queue place: %v", err)
	}
	d, err := e.Generate(context.Background(), llm.Request{PromptTokens: prompt(4, 4), Params: greedy(1)})
	if !errors.Is(err, llm.ErrOverloaded) {
		t.Errorf("a second waiting request with MaxPending 1: %v, want ErrOverloaded", err)
	}
	resume()
	for _, ch := range []<-chan llm.Event{b, c, d} {
		if ch != nil {
			collect(t, ch)
		}
	}
}

// TestCloseRacesGenerate: Close lands while callers are submitting, some
// of them cancelling as they go. Each Generate either fails (ErrClosed once
// Close has begun, or its own cancelled context) or returns a channel that
// closes; a request that reached the engine ends, if it did not run to its
// length, with an abort carrying ErrClosed or with its caller's
// cancellation; every Close returns; no goroutine is left behind.
func TestCloseRacesGenerate(t *testing.T) {
	var refused atomic.Int64
	outcomes := map[llm.FinishReason]*atomic.Int64{"": {}, llm.FinishLength: {}, llm.FinishAbort: {}, llm.FinishStop: {}, llm.FinishError: {}}
	defer func() {
		t.Logf("refused %d, closed without a final event %d, length %d, abort %d",
			refused.Load(), outcomes[""].Load(), outcomes[llm.FinishLength].Load(), outcomes[llm.FinishAbort].Load())
	}()
	for round := range 8 {
		e, err := mock.NewEngine(mock.Config{}, engine.Config{
			MaxNumSeqs: 3, BlockSize: 4, NumBlocks: 12, MaxNumBatchedTokens: 8, PrefixCaching: round%2 == 0, MaxPending: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		before := goleak.IgnoreCurrent()
		rng := rand.New(rand.NewPCG(uint64(round), 3))
		var wg sync.WaitGroup
		start := make(chan struct{})
		progress := make(chan struct{}, 24) // a request's first event
		for i := range 24 {
			cancelAfter := rng.IntN(4) // events read before cancelling; 3: never cancel
			n := 1 + rng.IntN(20)
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ch, err := e.Generate(ctx, llm.Request{PromptTokens: prompt(i%5, 4+i%7), Params: greedy(n)})
				if err != nil {
					if !errors.Is(err, llm.ErrClosed) {
						t.Errorf("Generate racing Close: %v", err)
					}
					refused.Add(1)
					return
				}
				read := 0
				var last llm.Event
				for ev := range ch {
					read++
					if read == 1 {
						progress <- struct{}{}
					}
					if ev.Finish != "" {
						last = ev
					}
					if read == cancelAfter {
						cancel()
					}
				}
				outcomes[last.Finish].Add(1)
				switch {
				case last.Finish == "": // cancelled: the channel may close without a final event
					if ctx.Err() == nil {
						t.Errorf("request %d: channel closed without a final event, not cancelled", i)
					}
				case last.Finish == llm.FinishLength:
					if last.CompletionTokens != n {
						t.Errorf("request %d: length finish after %d of %d tokens", i, last.CompletionTokens, n)
					}
				case last.Finish == llm.FinishAbort:
					if !errors.Is(last.Err, llm.ErrClosed) && !errors.Is(last.Err, context.Canceled) {
						t.Errorf("request %d: abort with %v", i, last.Err)
					}
				default:
					t.Errorf("request %d: finish %q (%v)", i, last.Finish, last.Err)
				}
			})
		}
		closed := make(chan error, 2)
		// Close once a few requests are under way, so that it finds some
		// running, some queued and some still being submitted; twice at
		// once, as two shutdown paths might.
		waitFor, yields := rng.IntN(8), rng.IntN(3)
		ready := make(chan struct{})
		wg.Go(func() {
			<-start
			for range waitFor {
				<-progress
			}
			close(ready)
		})
		for k := range 2 {
			wg.Go(func() {
				<-ready
				for range k * yields {
					runtime.Gosched()
				}
				closed <- e.Close()
			})
		}
		close(start)
		wg.Wait()
		for range 2 {
			if err := <-closed; err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		if s := e.Stats(); s.Running != 0 || s.Waiting != 0 || s.KVBlocksUsed != 0 {
			t.Errorf("round %d: stats after Close: %+v", round, s)
		}
		if err := e.Health(); !errors.Is(err, llm.ErrClosed) {
			t.Errorf("Health after Close: %v", err)
		}
		goleak.VerifyNone(t, before)
	}
}
