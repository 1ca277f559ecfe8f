package f32

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestScratchMatchesPack fills a scratch by columns and by rows, in several
// shapes in a row (each reshape reuses memory holding the previous one),
// and checks that MulAdd over it gives what it gives over Pack of the same
// matrix, bit for bit: the layout must be the same.
func TestScratchMatchesPack(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := NewScratch(96, 200)
	for _, shape := range [][2]int{{64, 200}, {96, 33}, {7, 64}, {64, 1}, {1, 31}, {96, 200}} {
		k, n := shape[0], shape[1]
		w := randSlice(rng, k*n)
		ref := Pack(w, k, n)
		for _, byRow := range []bool{false, true} {
			s.Reshape(k, n)
			if byRow {
				for kk := range k {
					s.SetRow(kk, w[kk*n:(kk+1)*n])
				}
			} else {
				col := make([]float32, k)
				for j := range n {
					for kk := range k {
						col[kk] = w[kk*n+j]
					}
					s.SetColumn(j, col)
				}
			}
			for _, m := range []int{1, 5, 19} {
				x := randSlice(rng, m*k)
				got, want := make([]float32, m*n), make([]float32, m*n)
				s.MulAdd(got, n, x, k, m, 0, n)
				ref.MulAdd(want, n, x, k, m, 0, n)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%d×%d byRow=%v m=%d: element %d is %v, Pack gives %v", k, n, byRow, m, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestScratchReshapeBounds checks that a shape needing more panels than
// the scratch holds panics instead of writing past it.
func TestScratchReshapeBounds(t *testing.T) {
	s := NewScratch(64, 64)
	for _, shape := range [][2]int{{65, 64}, {64, 65}, {-1, 3}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Reshape(%d, %d) of a 64×64 scratch did not panic", shape[0], shape[1])
				}
			}()
			s.Reshape(shape[0], shape[1])
		}()
	}
	s.Reshape(128, 32) // same panel storage, other split: allowed
	if s.K() != 128 || s.N() != 32 {
		t.Errorf("shape %d×%d after Reshape(128, 32)", s.K(), s.N())
	}
}

// TestPrefetchL2 checks that prefetching any range, empty, ragged or
// ending at the slice's end, leaves the values alone.
func TestPrefetchL2(t *testing.T) {
	x := randSlice(rand.New(rand.NewPCG(1, 1)), 1000)
	want := append([]float32(nil), x...)
	for _, r := range [][2]int{{0, 0}, {0, 1}, {3, 20}, {17, 1000}, {0, 1000}} {
		PrefetchL2(x[r[0]:r[1]])
	}
	for i := range x {
		if x[i] != want[i] {
			t.Fatalf("element %d changed", i)
		}
	}
}

// TestLayerNorm checks every kernel set's layer norm against float64 on
// rows of many lengths (ragged tails, beyond the ones table) with a large
// common offset, the case that breaks a one-pass E[x²] − mean² variance.
func TestLayerNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, ks := range available() {
		for _, n := range []int{1, 3, 16, 17, 64, 100, 768, 1024, 1500, 3072} {
			x := randSlice(rng, n)
			for i := range x {
				x[i] = 300 + 2*x[i]
			}
			g, b := randSlice(rng, n), randSlice(rng, n)
			y := make([]float32, n)
			ks.layerNorm(y, x, g, b, 1e-5)
			var mean, v float64
			for _, e := range x {
				mean += float64(e)
			}
			mean /= float64(n)
			for _, e := range x {
				v += (float64(e) - mean) * (float64(e) - mean)
			}
			inv := 1 / math.Sqrt(v/float64(n)+1e-5)
			for i := range x {
				want := (float64(x[i])-mean)*inv*float64(g[i]) + float64(b[i])
				tol := 1e-4 * (math.Abs(float64(g[i])) + math.Abs(float64(b[i])) + 1)
				if n == 1 {
					tol = 1e-2 // a lone element is all rounding of x − mean
				}
				if d := math.Abs(float64(y[i]) - want); !(d <= tol) {
					t.Fatalf("%s n=%d: y[%d] = %v, float64 gives %v", ks.name, n, i, y[i], want)
				}
			}
			// In place gives the same.
			ks.layerNorm(x, x, g, b, 1e-5)
			for i := range x {
				if x[i] != y[i] {
					t.Fatalf("%s n=%d: in place differs at %d", ks.name, n, i)
				}
			}
		}
	}
}
