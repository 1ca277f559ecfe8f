package f32

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// floorGBs is the read bandwidth of the reference machine class (2 cores,
// issue 8): a decode step cannot read its weights faster than this.
const floorGBs = 40

// mulAddPar splits the columns of one product across threads goroutines by
// whole panels, as the GPT-2 backend does.
func mulAddPar(ks *kernels, p *Packed, y, x []float32, m, threads int) {
	if threads == 1 {
		p.mulAdd(ks, y, p.n, x, p.k, m, 0, p.n)
		return
	}
	panels := (p.n + PanelWidth - 1) / PanelWidth
	var wg sync.WaitGroup
	for t := range threads {
		lo := panels * t / threads * PanelWidth
		hi := min(p.n, panels*(t+1)/threads*PanelWidth)
		wg.Go(func() { p.mulAdd(ks, y, p.n, x, p.k, m, lo, hi) })
	}
	wg.Wait()
}

// BenchmarkMulAdd measures y += x·W for W 768×3072 (GPT-2's MLP up
// projection) at M = 1, 8, 128 and 512 rows, on one core and split across
// all cores, for every kernel set this CPU runs. Each case reports GFLOP/s,
// its speed-up over the portable path timed in the same run
// ("x-generic"), and the weight bytes read per second with their share of
// the bandwidth floor ("floor-frac"; 1.0 = at the floor) — the figure that
// matters at M = 1.
func BenchmarkMulAdd(b *testing.B) {
	const k, n = 768, 3072
	rng := rand.New(rand.NewPCG(7, 8))
	p := Pack(randSlice(rng, k*n), k, n)
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		for _, m := range []int{1, 8, 128, 512} {
			x := randSlice(rng, m*k)
			y := make([]float32, m*n)
			// The portable path's time per op, measured once per case.
			genNs := timeOp(func() { mulAddPar(genericKernels, p, y, x, m, threads) })
			for _, ks := range available() {
				b.Run(fmt.Sprintf("threads=%d/M=%d/%s", threads, m, ks.name), func(b *testing.B) {
					for b.Loop() {
						mulAddPar(ks, p, y, x, m, threads)
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					flops := 2 * float64(m) * k * n
					b.ReportMetric(flops/ns, "GFLOP/s")
					b.ReportMetric(genNs/ns, "x-generic")
					gbs := float64(p.Bytes()) / ns
					b.ReportMetric(gbs, "weight-GB/s")
					b.ReportMetric(gbs/floorGBs, "floor-frac")
				})
			}
		}
	}
}

// timeOp returns the median time of f in nanoseconds over repeated runs
// of at least 50 ms in total.
func timeOp(f func()) float64 {
	f()
	var runs []float64
	start := time.Now()
	for len(runs) < 5 || time.Since(start) < 50*time.Millisecond {
		t := time.Now()
		f()
		runs = append(runs, float64(time.Since(t).Nanoseconds()))
	}
	// median
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			if runs[j] < runs[i] {
				runs[i], runs[j] = runs[j], runs[i]
			}
		}
	}
	return runs[len(runs)/2]
}

// BenchmarkDot measures the attention-sized dot product (head dim 64).
func BenchmarkDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	a, c := randSlice(rng, 64), randSlice(rng, 64)
	for _, ks := range available() {
		b.Run(ks.name, func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += ks.dotSlices(a, c)
			}
			_ = s
		})
	}
}
