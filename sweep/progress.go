package sweep

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/tinyserve/tinyserve/sweep/analysis"
	"github.com/tinyserve/tinyserve/sweep/loadgen"
)

// Progress reports a sweep's progress: on a terminal, one redrawn line
// with a bar of runs done, the current run's requests and an ETA; otherwise
// plain log lines at run boundaries, so logs stay readable in CI. A nil
// *Progress reports nothing. It is safe for concurrent use.
type Progress struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu        sync.Mutex
	total     int
	done      int
	durations []time.Duration
	cur       analysis.RunSpec
	curStart  time.Time
	reqTotal  int
	reqDone   int
	lastDraw  time.Time
	drawn     bool
}

// NewProgress returns a Progress writing to w; tty selects the redrawn bar.
// now is the clock (time.Now outside tests).
func NewProgress(w io.Writer, tty bool, now func() time.Time) *Progress {
	return &Progress{w: w, tty: tty, now: now}
}

// estimateETA estimates the time left in a sweep: the mean duration of the
// runs done so far times the runs not started, plus what the current run
// still needs at its observed pace (or the mean, before any request of it
// finished). It is zero until a run has finished, since nothing is known.
func estimateETA(done []time.Duration, notStarted int, curElapsed time.Duration, curFrac float64) time.Duration {
	if len(done) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range done {
		sum += d
	}
	mean := sum / time.Duration(len(done))
	eta := mean * time.Duration(notStarted)
	switch {
	case curFrac > 0 && curFrac < 1:
		eta += time.Duration(float64(curElapsed) * (1 - curFrac) / curFrac)
	case curFrac == 0 && curElapsed >= 0 && notStarted >= 0:
		eta += max(mean-curElapsed, 0)
	}
	return eta
}

// begin starts a sweep of total runs.
func (p *Progress) begin(total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
}

// skip records a run kept from an earlier invocation.
func (p *Progress) skip(spec analysis.RunSpec) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.clearLocked()
	fmt.Fprintf(p.w, "resume: keeping complete run %s\n", spec)
}

// startRun records the start of a run of n requests.
func (p *Progress) startRun(spec analysis.RunSpec, n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.reqTotal, p.reqDone, p.curStart = spec, n, 0, p.now()
	if p.tty {
		p.drawLocked(true)
		return
	}
	fmt.Fprintf(p.w, "run %d/%d: %s (%d requests)\n", p.done+1, p.total, spec, n)
}

// request records that done requests of the current run have finished.
func (p *Progress) request(done int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqDone = done
	if p.tty {
		p.drawLocked(false)
	}
}

// endRun records the end of the current run.
func (p *Progress) endRun(s *loadgen.Summary) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.durations = append(p.durations, p.now().Sub(p.curStart))
	p.done++
	if s != nil {
		if w := s.Counts.UsageWarning(); w != "" {
			// Printed even on a terminal: a bar redraw would hide it, and
			// it explains a throughput figure in every report.
			p.clearLocked()
			fmt.Fprintf(p.w, "warning: run %s: %s\n", p.cur, w)
		}
	}
	if p.tty {
		p.drawLocked(true)
		return
	}
	if s != nil {
		fmt.Fprintf(p.w, "run %d/%d: %s done: %d/%d ok, %s output tokens/s, p99 latency %s\n",
			p.done, p.total, p.cur, s.Counts.Successful, s.Counts.Attempted,
			fmtNum(s.OutputTokenThroughput, "%.1f"), fmtNum(s.LatencyS.P99, "%.3f s"))
	}
}

// logf prints a line, keeping the bar below it.
func (p *Progress) logf(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// finish ends the bar's line.
func (p *Progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

func (p *Progress) clearLocked() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *Progress) drawLocked(force bool) {
	now := p.now()
	if !force && now.Sub(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw = now
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	frac := 0.0
	if p.reqTotal > 0 {
		frac = float64(p.reqDone) / float64(p.reqTotal)
	}
	notStarted := max(p.total-p.done-1, 0)
	eta := estimateETA(p.durations, notStarted, now.Sub(p.curStart), frac)
	etaText := "--"
	if eta > 0 {
		etaText = eta.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] runs %d/%d | %s %d/%d requests | ETA %s",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		p.done, p.total, p.cur, p.reqDone, p.reqTotal, etaText)
	p.drawn = true
}

// fmtNum formats v, "n/a" when there is none (as the reports do).
func fmtNum(v *float64, format string) string {
	if v == nil || math.IsNaN(*v) {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}
