package engine

import (
	"context"
	"sync"

	"github.com/tinyserve/tinyserve/llm"
)

// streamBuffer is how many events a request's channel holds. Events the
// loop made while the caller was busy wait there, so a caller that falls
// behind sees (len of the channel) what is already queued and can take it
// at once without blocking: the OpenAI server merges them into one chunk,
// as vLLM's RequestOutputCollector (vllm/v1/engine/output_processor.py)
// merges the outputs its consumer has not yet taken. More wait in the
// stream's queue; 16 events are a few KiB per request.
const streamBuffer = 16

// stream carries one request's events from the loop to the caller without
// ever blocking the loop: push appends to a queue, and a goroutine per
// request forwards the queue into the caller's buffered channel.
type stream struct {
	ctx    context.Context
	out    chan llm.Event
	mu     sync.Mutex
	queue  []llm.Event
	notify chan struct{}
}

func newStream(ctx context.Context) *stream {
	return &stream{ctx: ctx, out: make(chan llm.Event, streamBuffer), notify: make(chan struct{}, 1)}
}

// push is called by the loop; it never blocks.
func (s *stream) push(ev llm.Event) {
	s.mu.Lock()
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// forward delivers queued events until the final one, or until the
// caller's context ends, in which case abort is called once.
func (s *stream) forward(abort func()) {
	defer close(s.out)
	var batch []llm.Event
	for {
		select {
		case <-s.notify:
		case <-s.ctx.Done():
			abort()
			return
		}
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		for _, ev := range batch {
			select {
			case s.out <- ev:
			case <-s.ctx.Done():
				if ev.Finish == "" {
					abort()
				}
				return
			}
			if ev.Finish != "" {
				return
			}
		}
	}
}
