package pyrandom

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"
)

// golden is testdata/python_golden.json, printed by CPython 3.11 with
// testdata/gen_golden.py. Floats are stored as float.hex() so the comparison
// is bit for bit.
type golden struct {
	Cases []struct {
		Seed    int64       `json:"seed"`
		U32     []uint32    `json:"u32"`
		Bits    [][2]uint64 `json:"bits"`
		Random  []string    `json:"random"`
		Shuffle []int       `json:"shuffle"`
		Expo    []string    `json:"expo"`
	} `json:"cases"`
	Shuffle1000 []int    `json:"shuffle1000_seed20260729"`
	Expo5000    []string `json:"expo5000_seed7"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile("testdata/python_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 {
		t.Fatal("golden file has no cases")
	}
	return g
}

func hexFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bad golden float %q: %v", s, err)
	}
	return f
}

func shuffled(r *Rand, n int) []int {
	x := make([]int, n)
	for i := range x {
		x[i] = i
	}
	r.Shuffle(n, func(i, j int) { x[i], x[j] = x[j], x[i] })
	return x
}

func TestMatchesCPython(t *testing.T) {
	g := loadGolden(t)
	expo := []float64{0.5, 1.0, 3.7, 100.0}
	for _, c := range g.Cases {
		t.Run(strconv.FormatInt(c.Seed, 10), func(t *testing.T) {
			r := New(c.Seed)
			for i, want := range c.U32 {
				if got := r.Getrandbits(32); got != uint64(want) {
					t.Errorf("getrandbits(32) #%d = %d, want %d", i, got, want)
				}
			}
			r = New(c.Seed)
			for _, kb := range c.Bits {
				if got := r.Getrandbits(int(kb[0])); got != kb[1] {
					t.Errorf("getrandbits(%d) = %d, want %d", kb[0], got, kb[1])
				}
			}
			r = New(c.Seed)
			for i, s := range c.Random {
				if got, want := r.Random(), hexFloat(t, s); got != want {
					t.Errorf("random() #%d = %v, want %v", i, got, want)
				}
			}
			got := shuffled(New(c.Seed), len(c.Shuffle))
			for i := range got {
				if got[i] != c.Shuffle[i] {
					t.Fatalf("shuffle = %v, want %v", got, c.Shuffle)
				}
			}
			r = New(c.Seed)
			for i, s := range c.Expo {
				if got, want := r.Expovariate(expo[i]), hexFloat(t, s); got != want {
					t.Errorf("expovariate(%v) = %v, want %v", expo[i], got, want)
				}
			}
		})
	}
}

func TestLongStreams(t *testing.T) {
	g := loadGolden(t)
	got := shuffled(New(20260729), len(g.Shuffle1000))
	for i := range got {
		if got[i] != g.Shuffle1000[i] {
			t.Fatalf("shuffle of 1000 differs from CPython at %d: %d vs %d", i, got[i], g.Shuffle1000[i])
		}
	}
	// Many draws through log. glibc's log is not correctly rounded when the
	// true value lies within a few hundredths of an ulp of a rounding
	// boundary; ours is, so a handful of draws differ in the last bit
	// (7 of these 5000; math.Log differed in 353). Every draw must be within
	// one ulp and nearly all must be identical.
	r := New(7)
	exact := 0
	for i, s := range g.Expo5000 {
		got, want := r.Expovariate(1.0), hexFloat(t, s)
		if got == want {
			exact++
			continue
		}
		if math.Nextafter(got, want) != want {
			t.Fatalf("expovariate #%d = %x, want %x: more than one ulp apart", i, got, want)
		}
	}
	if min := len(g.Expo5000) * 998 / 1000; exact < min {
		t.Fatalf("only %d of %d expovariate draws match CPython bit for bit, want >= %d", exact, len(g.Expo5000), min)
	}
}

func TestEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		run  func(r *Rand) bool
	}{
		{"negative k returns 0", func(r *Rand) bool { return r.Getrandbits(-3) == 0 }},
		{"randbelow(0) is 0", func(r *Rand) bool { return r.Randbelow(0) == 0 }},
		{"randbelow(1) is 0", func(r *Rand) bool { return r.Randbelow(1) == 0 }},
		{"shuffle of 0 and 1 elements calls nothing", func(r *Rand) bool {
			called := false
			r.Shuffle(0, func(i, j int) { called = true })
			r.Shuffle(1, func(i, j int) { called = true })
			return !called
		}},
		{"random in [0,1)", func(r *Rand) bool {
			for range 10000 {
				if v := r.Random(); v < 0 || v >= 1 {
					return false
				}
			}
			return true
		}},
		{"expovariate positive and finite", func(r *Rand) bool {
			for range 10000 {
				if v := r.Expovariate(2); v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
					return false
				}
			}
			return true
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.run(New(1)) {
				t.Fatal("failed")
			}
		})
	}
}

func TestSignIgnored(t *testing.T) {
	a, b := New(12345), New(-12345)
	for range 100 {
		if a.Getrandbits(32) != b.Getrandbits(32) {
			t.Fatal("New(-s) and New(s) differ; CPython seeds from |s|")
		}
	}
}

func BenchmarkShuffle1000(b *testing.B) {
	x := make([]int, 1000)
	r := New(1)
	for b.Loop() {
		r.Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
	}
}
