package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// task is one parallel operation, split into numbered units. run handles
// units [lo, hi) on worker w (0 <= w < workers), which indexes per-worker
// scratch space. Tasks are long-lived structs owned by the backend and
// passed by pointer, so starting one allocates nothing.
type task interface {
	run(w, lo, hi int)
}

// pool is a fixed set of goroutines, created once per backend, that share
// the units of one task at a time. The calling goroutine works too, as
// worker 0.
//
// Sections: the units are split into one contiguous section per worker. A
// worker takes grains from the front of its own section and, once that is
// empty, steals grains from the back of the others'. Units are laid out in
// memory order (a matmul's column panels, stored one after another), so
// each worker reads one long forward stream that the hardware prefetchers
// follow, instead of a new stream per grain as with a single shared
// counter; stealing from the back keeps the owner's stream intact while
// still balancing uneven units and workers slowed by other load.
//
// Waking: a decode step is about 60 tasks of 20–200 µs each, and waking a
// parked goroutine's thread costs more than that on a VM (60–100 µs was
// measured on a 2-vCPU cloud VM: the caller had finished the whole task
// alone by the time the helper ran). So helpers spin on the task word for
// up to spinFor after each task and park only when no task comes, and the
// caller never waits for a helper that has not joined: it closes the task
// once every unit is taken and waits only for the helpers inside it. On
// that VM (Zen 5, 2 vCPUs), in runs interleaved with the parking pool, the
// 124M decode step went from 16–18 ms to 12.3–12.5 at batch 1, from 23–24
// to 17–18 at batch 8, and from 11–13 to 7.3–7.5 with bfloat16 weights.
type pool struct {
	workers int
	helpers []*helper
	quit    chan struct{}
	wg      sync.WaitGroup

	// state is the current task: its generation in the high 32 bits, a
	// closed flag, its number of active workers, and the number of helpers
	// inside it in the low 16 bits. Helpers join with a compare-and-swap on
	// the whole word, so a helper can never join a task that has closed or
	// been replaced.
	state atomic.Uint64

	// The current task, written by the caller before it publishes a new
	// generation and read by helpers only after they have joined it.
	cur      task
	grain    int
	sections []section // the first active of them
	active   int
}

const (
	stateClosed      = 1 << 31
	stateActiveShift = 16
	stateCount       = 1<<stateActiveShift - 1
)

// spinFor is how long an idle helper polls for the next task before it
// parks: longer than the gaps between a step's tasks (layer norms, KV
// writes, the engine's sampling between steps), short enough that an idle
// engine gives its cores back at once.
const spinFor = 500 * time.Microsecond

// helper is one helper goroutine's parking place.
type helper struct {
	parked atomic.Bool   // set by the helper just before it blocks on wake
	wake   chan struct{} // one token: "a task has started"
}

// section is one worker's share of a task's units: the ones in [lo, hi)
// not yet taken, packed into one word so that the owner (from the front)
// and thieves (from the back) claim grains with a single compare-and-swap.
// Each sits on its own cache line so that owners do not contend.
type section struct {
	span atomic.Uint64 // lo | hi<<32
	_    [56]byte
}

func newPool(workers int) *pool {
	p := &pool{workers: workers, quit: make(chan struct{}), sections: make([]section, workers)}
	p.state.Store(stateClosed) // generation 0, closed: nothing to join
	for i := 1; i < workers; i++ {
		h := &helper{wake: make(chan struct{}, 1)}
		p.helpers = append(p.helpers, h)
		p.wg.Go(func() { p.helperLoop(i, h) })
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
	grains := (total + grain - 1) / grain
	if p.workers == 1 || grains == 1 {
		t.run(0, 0, total)
		return
	}
	active := min(p.workers, grains)
	for i := range active {
		// Section i holds grains [i·grains/active, (i+1)·grains/active).
		lo, hi := i*grains/active*grain, min((i+1)*grains/active*grain, total)
		p.sections[i].span.Store(uint64(lo) | uint64(hi)<<32)
	}
	p.cur, p.grain, p.active = t, grain, active
	gen := p.state.Load()>>32 + 1
	p.state.Store(gen<<32 | uint64(active)<<stateActiveShift) // open, nobody inside
	for _, h := range p.helpers[:active-1] {
		if h.parked.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	p.work(0)
	// Every unit is taken: close the task to latecomers, then wait for the
	// helpers inside it to finish their last grains.
	for {
		s := p.state.Load()
		if s&stateClosed == 0 && !p.state.CompareAndSwap(s, s|stateClosed) {
			continue
		}
		if s&stateCount == 0 {
			break
		}
		runtime.Gosched()
	}
	p.cur = nil
}

// helperLoop is helper i's life: join each task it sees, spin between
// tasks, park when none comes for spinFor.
func (p *pool) helperLoop(i int, h *helper) {
	var done uint64 // the last generation this helper looked at
	for {
		s, ok := p.next(h, done)
		if !ok {
			return
		}
		done = s >> 32
		if p.join(i, s) {
			p.work(i)
			p.state.Add(^uint64(0)) // leave: count − 1
		}
	}
}

// join enters helper i into the task whose state was s, and reports false
// if the task does not need it or has closed (or been replaced) meanwhile.
// Another helper joining at the same moment only means trying again.
func (p *pool) join(i int, s uint64) bool {
	gen := s >> 32
	for {
		active := int(s&(stateClosed-1)) >> stateActiveShift
		if s>>32 != gen || s&stateClosed != 0 || i >= active {
			return false
		}
		if p.state.CompareAndSwap(s, s+1) {
			return true
		}
		s = p.state.Load()
	}
}

// next waits for a task state of a generation after done and returns it,
// spinning first and then parking; it returns false when the pool closes.
func (p *pool) next(h *helper, done uint64) (uint64, bool) {
	start := time.Now()
	for spins := 0; ; spins++ {
		if s := p.state.Load(); s>>32 != done {
			return s, true
		}
		if spins%256 == 255 {
			if time.Since(start) > spinFor {
				break
			}
			// Let the caller run should it share this P (GOMAXPROCS
			// below the worker count, or other busy goroutines).
			runtime.Gosched()
		}
	}
	for {
		h.parked.Store(true)
		// A task may have started between the last look and parked being
		// set; if so take it back, unless the caller already did (then its
		// wake token is on the way and must be consumed).
		if s := p.state.Load(); s>>32 != done {
			if !h.parked.CompareAndSwap(true, false) {
				<-h.wake
			}
			return s, true
		}
		select {
		case <-h.wake:
		case <-p.quit:
			return 0, false
		}
		if s := p.state.Load(); s>>32 != done {
			return s, true
		}
	}
}

// work runs worker w's own section front to back, then steals from the
// back of the other sections until every unit is taken.
func (p *pool) work(w int) {
	for lo, hi, ok := p.take(w, true); ok; lo, hi, ok = p.take(w, true) {
		p.cur.run(w, lo, hi)
	}
	for o := 1; o < p.active; o++ {
		v := (w + o) % p.active
		for lo, hi, ok := p.take(v, false); ok; lo, hi, ok = p.take(v, false) {
			p.cur.run(w, lo, hi)
		}
	}
}

// take claims one grain of section s, from its front or its back, and
// reports false when the section is empty.
func (p *pool) take(s int, front bool) (lo, hi int, ok bool) {
	span := &p.sections[s].span
	for {
		v := span.Load()
		a, b := int(v&0xffffffff), int(v>>32)
		if a >= b {
			return 0, 0, false
		}
		var next uint64
		if front {
			lo, hi = a, min(a+p.grain, b)
			next = uint64(hi) | uint64(b)<<32
		} else {
			lo, hi = max(b-p.grain, a), b
			next = uint64(a) | uint64(lo)<<32
		}
		if span.CompareAndSwap(v, next) {
			return lo, hi, true
		}
	}
}

// close stops the helper goroutines and waits for them to exit.
func (p *pool) close() {
	close(p.quit)
	p.wg.Wait()
}
