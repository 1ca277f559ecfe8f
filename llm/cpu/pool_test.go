package cpu

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// countTask records how often each unit ran and checks that every call
// gets one grain in range (or the whole task, when one worker runs it).
type countTask struct {
	t      *testing.T
	counts []atomic.Int32
	grain  int
	slow   int // worker whose units take longer, to force stealing
}

func (c *countTask) run(w, lo, hi int) {
	whole := lo == 0 && hi == len(c.counts) // a task run on the caller alone
	if lo < 0 || hi > len(c.counts) || lo >= hi || (hi-lo > c.grain && !whole) {
		c.t.Errorf("worker %d got units [%d, %d) of %d with grain %d", w, lo, hi, len(c.counts), c.grain)
		return
	}
	for u := lo; u < hi; u++ {
		c.counts[u].Add(1)
	}
	if w == c.slow {
		time.Sleep(50 * time.Microsecond)
	}
}

// TestPoolRunsEveryUnitOnce covers the section split and stealing: every
// unit runs exactly once whatever the worker count, total and grain, also
// when one worker is much slower than the others (its section is stolen).
func TestPoolRunsEveryUnitOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		p := newPool(workers)
		for _, total := range []int{1, 2, 7, 64, 1000} {
			for _, grain := range []int{1, 3, 16} {
				for _, slow := range []int{-1, 0, workers - 1} {
					name := fmt.Sprintf("workers=%d/total=%d/grain=%d/slow=%d", workers, total, grain, slow)
					c := &countTask{t: t, counts: make([]atomic.Int32, total), grain: grain, slow: slow}
					for range 3 { // the pool is reused across tasks
						p.parallel(c, total, grain)
					}
					for u := range c.counts {
						if n := c.counts[u].Load(); n != 3 {
							t.Fatalf("%s: unit %d ran %d times in 3 tasks", name, u, n)
						}
					}
				}
			}
		}
		p.close()
	}
}

// orderTask records, per worker, the units in the order it ran them.
type orderTask struct{ seen [][]int }

func (o *orderTask) run(w, lo, hi int) {
	for u := lo; u < hi; u++ {
		o.seen[w] = append(o.seen[w], u)
	}
}

// TestPoolOwnSectionFirst checks the property the split exists for: the
// units a worker runs from its own contiguous section are one ascending
// run from the section's front (thieves take from the back), so each
// worker reads its share of a matmul's panels as one forward stream. A
// helper woken late may find its section stolen already; that is allowed.
func TestPoolOwnSectionFirst(t *testing.T) {
	const workers, total = 4, 400
	p := newPool(workers)
	defer p.close()
	for range 20 {
		o := &orderTask{seen: make([][]int, workers)}
		p.parallel(o, total, 1)
		ran := 0
		for w, units := range o.seen {
			ran += len(units)
			front, end := w*total/workers, (w+1)*total/workers
			want := front
			for _, u := range units {
				if u < front || u >= end {
					continue
				}
				if u != want {
					t.Fatalf("worker %d ran unit %d of its own section [%d, %d) when unit %d was next", w, u, front, end, want)
				}
				want++
			}
		}
		if ran != total {
			t.Fatalf("%d units ran, want %d", ran, total)
		}
	}
}

// sleepTask sleeps in every unit and records which workers took part.
type sleepTask struct {
	d    time.Duration
	runs []atomic.Int32 // per worker
}

func (s *sleepTask) run(w, lo, hi int) {
	for range hi - lo {
		s.runs[w].Add(1)
		time.Sleep(s.d)
	}
}

// TestPoolHelpersWakeAfterParking covers the slow path of waking: after
// an idle spell longer than spinFor the helpers have parked, and a new
// task must wake them (a long task of sleeping units leaves them every
// chance to join) and still run every unit once.
func TestPoolHelpersWakeAfterParking(t *testing.T) {
	const workers = 3
	p := newPool(workers)
	defer p.close()
	for round := range 3 {
		time.Sleep(4 * spinFor)
		s := &sleepTask{d: time.Millisecond, runs: make([]atomic.Int32, workers)}
		p.parallel(s, 60, 1)
		total := 0
		for w := range s.runs {
			n := int(s.runs[w].Load())
			total += n
			if n == 0 {
				t.Errorf("round %d: worker %d ran none of 60 one-millisecond units after parking", round, w)
			}
		}
		if total != 60 {
			t.Errorf("round %d: %d units ran, want 60", round, total)
		}
	}
}
