package f32

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkMulAddQ8 times y += x·W with W stored as Q8_0, bfloat16 and
// float32, in the same process, for GPT-2 124M's MLP up projection
// (768×3072) and Qwen2.5-0.5B's fused gate and up projection (896×9728),
// at M = 1, 8, 32 and 512 rows on all cores. Each Q8_0 case reports its
// speed over bfloat16 and float32 timed in the same run ("x-bf16",
// "x-f32") and the weight bytes it reads per second. Whether a matrix
// fits in cache changes these figures; the whole-model benchmarks in
// llm/cpu are the ones against the bandwidth floor.
func BenchmarkMulAddQ8(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	threads := runtime.GOMAXPROCS(0)
	for _, shape := range []struct {
		name string
		k, n int
	}{{"gpt2-mlp", 768, 3072}, {"qwen05b-gateup", 896, 9728}} {
		w := randSlice(rng, shape.k*shape.n)
		f := Pack(w, shape.k, shape.n)
		h := PackBF16(w, shape.k, shape.n)
		q := NewPackedQ8(shape.k, shape.n)
		col := make([]float32, shape.k)
		for j := range shape.n {
			for kk := range col {
				col[kk] = w[kk*shape.n+j]
			}
			q.FillColumnQuantize(j, col)
		}
		for _, m := range []int{1, 8, 32, 512} {
			x := randSlice(rng, m*shape.k)
			y := make([]float32, m*shape.n)
			f32Ns := timeOp(func() { mulAddPar(best, f, y, x, m, threads) })
			bf16Ns := timeOp(func() { mulAddPar(best, h, y, x, m, threads) })
			for _, ks := range available() {
				b.Run(fmt.Sprintf("%s/threads=%d/M=%d/%s", shape.name, threads, m, ks.name), func(b *testing.B) {
					for b.Loop() {
						mulAddPar(ks, q, y, x, m, threads)
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					b.ReportMetric(2*float64(m)*float64(shape.k*shape.n)/ns, "GFLOP/s")
					b.ReportMetric(float64(q.Bytes())/ns, "weight-GB/s")
					b.ReportMetric(bf16Ns/ns, "x-bf16")
					b.ReportMetric(f32Ns/ns, "x-f32")
				})
			}
		}
	}
}
