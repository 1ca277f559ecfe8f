package cuda

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
	"unsafe"
)

// profiler breaks an eager step's GPU time down by kernel and GEMM with
// CUDA events: where a step's time goes, for the device check. Each
// profiled step is queued behind the hold_ns kernel, so that all its
// launches are queued before its first kernel runs; the time between the
// events recorded after two launches is then the second one's time on the
// GPU (with an event's own cost), not the rate at which the host launches.
// Backend.prof is set only by tests and benchmarks; when nil, a launch pays
// one branch.
type profiler struct {
	drv    *Driver
	stream Stream
	hold   Function
	holdNs int64
	names  map[Function]string

	events []Event  // pooled, one per mark of the step
	labels []string // what ran before events[i]
	n      int      // events recorded in this step
	err    error    // the first failure of this step

	total map[string]time.Duration // summed over the collected steps
	calls map[string]int
	steps int
}

// newProfiler profiles b's eager steps, each held for hold before it runs
// (long enough for the host to queue a whole step).
func newProfiler(b *Backend, hold time.Duration) *profiler {
	f := b.fn
	names := map[Function]string{
		f.embed: "embed", f.norm: "norm", f.addNorm: "residual+norm",
		f.qkvStore: "qkv bias+rope+KV write", f.attention: "attention", f.biasAct: "bias+gelu",
		f.attentionSplit: "attention (decode rows)", f.attentionCombine: "attention split combine",
		f.flashPrefill: "attention (prefill tiles)",
		f.siluMul:      "silu·up", f.residual: "residual", f.argmax: "argmax",
		f.embedQ8: "embed", f.q8Dequant: "q8 dequantize",
	}
	for k, g := range f.q8Gemv {
		names[g] = fmt.Sprintf("q8 gemv (%d rows a tile)", q8GemvRows[k])
	}
	return &profiler{drv: b.drv, stream: b.stream, hold: f.hold, holdNs: hold.Nanoseconds(), names: names,
		total: map[string]time.Duration{}, calls: map[string]int{}}
}

// begin starts a step: the hold kernel, then the first event.
func (p *profiler) begin() {
	p.n, p.err = 0, nil
	ns := p.holdNs
	params := [1]unsafe.Pointer{unsafe.Pointer(&ns)}
	// cuLaunchKernel copies the argument before returning.
	p.fail(p.drv.Launch(p.hold, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, p.stream, unsafe.Pointer(&params[0])))
	p.mark("")
}

// launched marks the end of a kernel launch.
func (p *profiler) launched(f Function) { p.mark(p.names[f]) }

// mark records an event after the work queued so far, labelled with what
// ran since the previous one.
func (p *profiler) mark(label string) {
	if p.err != nil {
		return
	}
	if p.n == len(p.events) {
		e, err := p.drv.EventCreate()
		if p.fail(err) {
			return
		}
		p.events = append(p.events, e)
		p.labels = append(p.labels, "")
	}
	if p.fail(p.drv.EventRecord(p.events[p.n], p.stream)) {
		return
	}
	p.labels[p.n] = label
	p.n++
}

// fail records err as the step's first failure and reports whether there
// was one.
func (p *profiler) fail(err error) bool {
	if err != nil && p.err == nil {
		p.err = err
	}
	return err != nil
}

// collect adds the step just finished (its stream synchronised) to the
// totals; a step that failed, or that did not run under the profiler, is
// an error and adds nothing.
func (p *profiler) collect() error {
	defer func() { p.n, p.err = 0, nil }()
	if p.err != nil {
		return p.err
	}
	if p.n == 0 {
		return errors.New("cuda: profiler: no profiled step to collect")
	}
	for i := 1; i < p.n; i++ {
		ms, err := p.drv.EventElapsed(p.events[i-1], p.events[i])
		if err != nil {
			return err
		}
		p.total[p.labels[i]] += time.Duration(float64(ms) * float64(time.Millisecond))
		p.calls[p.labels[i]]++
	}
	p.steps++
	return nil
}

// stepTime is the mean GPU time of a collected step, hold excluded.
func (p *profiler) stepTime() time.Duration {
	var sum time.Duration
	for _, d := range p.total {
		sum += d
	}
	if p.steps == 0 {
		return 0
	}
	return sum / time.Duration(p.steps)
}

// write prints the breakdown per step, largest share first: what ran, how
// many times per step, its mean time per step and its share.
func (p *profiler) write(w io.Writer) error {
	labels := make([]string, 0, len(p.total))
	for l := range p.total {
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b string) int { return int(p.total[b] - p.total[a]) })
	step := p.stepTime()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "what\tper step\tµs per step\tshare\n")
	for _, l := range labels {
		per := p.total[l] / time.Duration(max(p.steps, 1))
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f%%\n", l, p.calls[l]/max(p.steps, 1), float64(per.Nanoseconds())/1e3, 100*float64(per)/float64(max(step, 1)))
	}
	fmt.Fprintf(tw, "total (GPU, events between launches)\t\t%.1f\t\n", float64(step.Nanoseconds())/1e3)
	return tw.Flush()
}

// release destroys the pooled events.
func (p *profiler) release() {
	for _, e := range p.events {
		_ = p.drv.EventDestroy(e)
	}
	p.events, p.labels = nil, nil
}
