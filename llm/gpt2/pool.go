package gpt2

import (
	"sync"
	"sync/atomic"
)

// task is one parallel operation, split into numbered units. run handles
// units [lo, hi) on worker w (0 <= w < workers), which indexes per-worker
// scratch space. Tasks are long-lived structs owned by the backend and
// passed by pointer, so starting one allocates nothing.
type task interface {
	run(w, lo, hi int)
}

// pool is a fixed set of goroutines, created once per backend, that share
// the units of one task at a time. Units are handed out in grains through an
// atomic counter, so uneven units (attention rows of different lengths)
// balance themselves. The calling goroutine works too, as worker 0.
type pool struct {
	workers int
	wake    []chan struct{} // one per helper goroutine (workers-1)
	done    chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup

	cur   task
	total int
	grain int
	next  atomic.Int64
}

func newPool(workers int) *pool {
	p := &pool{workers: workers, done: make(chan struct{}, workers), quit: make(chan struct{})}
	for i := 1; i < workers; i++ {
		ch := make(chan struct{}, 1)
		p.wake = append(p.wake, ch)
		p.wg.Go(func() {
			for {
				select {
				case <-ch:
					p.work(i)
					p.done <- struct{}{}
				case <-p.quit:
					return
				}
			}
		})
	}
	return p
}

// parallel runs t over units [0, total) in grains of grain units and
// returns when all are done. Work too small to share runs on the caller.
func (p *pool) parallel(t task, total, grain int) {
	if total <= 0 {
		return
	}
	grain = max(grain, 1)
	if p.workers == 1 || total <= grain {
		t.run(0, 0, total)
		return
	}
	p.cur, p.total, p.grain = t, total, grain
	p.next.Store(0)
	helpers := min(len(p.wake), (total+grain-1)/grain-1)
	for i := range helpers {
		p.wake[i] <- struct{}{}
	}
	p.work(0)
	for range helpers {
		<-p.done
	}
	p.cur = nil
}

func (p *pool) work(w int) {
	for {
		lo := int(p.next.Add(int64(p.grain))) - p.grain
		if lo >= p.total {
			return
		}
		p.cur.run(w, lo, min(lo+p.grain, p.total))
	}
}

// close stops the helper goroutines and waits for them to exit.
func (p *pool) close() {
	close(p.quit)
	p.wg.Wait()
}
