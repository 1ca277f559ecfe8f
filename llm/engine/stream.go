package engine

import (
	"context"
	"sync"

	"github.com/tinyserve/tinyserve/llm"
)

// stream carries one request's events from the loop to the caller without
// ever blocking the loop: push appends to a queue, and a goroutine per
// request forwards the queue into the caller's channel.
type stream struct {
	ctx    context.Context
	out    chan llm.Event
	mu     sync.Mutex
	queue  []llm.Event
	notify chan struct{}
}

func newStream(ctx context.Context) *stream {
	return &stream{ctx: ctx, out: make(chan llm.Event), notify: make(chan struct{}, 1)}
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
