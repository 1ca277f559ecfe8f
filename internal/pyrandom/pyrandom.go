// Package pyrandom reproduces CPython's random.Random for an integer seed:
// the Mersenne Twister (MT19937) state seeded the way CPython seeds it from an
// int, getrandbits, random, shuffle and expovariate.
//
// It exists so that workload order (generate_prompts.py shuffles its request
// list with random.Random(seed).shuffle) and sweep order are the same in
// tinyserve as in the Python tools for the same seed. The generator algorithm
// is the public MT19937 reference (Matsumoto and Nishimura, mt19937ar.c), which
// CPython's Modules/_randommodule.c also follows; the seeding and the
// derivations on top of it follow CPython 3.11's documented behaviour and are
// checked against values printed by CPython.
package pyrandom

import "math/bits"

// MT19937 parameters.
const (
	stateSize   = 624
	shiftSize   = 397
	matrixA     = 0x9908b0df
	upperMask   = 0x80000000
	lowerMask   = 0x7fffffff
	initSeed    = 19650218
	initMult    = 1812433253
	arrayMult1  = 1664525
	arrayMult2  = 1566083941
	temperMaskB = 0x9d2c5680
	temperMaskC = 0xefc60000
)

// Rand is one random.Random instance. It is not safe for concurrent use, as a
// Python Random shared between threads would not give reproducible output
// either.
type Rand struct {
	mt  [stateSize]uint32
	idx int
}

// New returns the generator Python's random.Random(seed) creates: CPython
// splits |seed| into 32-bit words, least significant first (one zero word for
// seed 0), and feeds them to init_by_array. The sign is dropped, as in Python,
// so New(-5) and New(5) give the same stream.
func New(seed int64) *Rand {
	mag := uint64(seed)
	if seed < 0 {
		mag = -mag // two's complement negation gives |seed| also for MinInt64
	}
	key := []uint32{uint32(mag)}
	if hi := uint32(mag >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &Rand{}
	r.initByArray(key)
	return r
}

// initGenrand fills the state from one 32-bit seed (mt19937ar.c init_genrand).
func (r *Rand) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < stateSize; i++ {
		prev := r.mt[i-1]
		r.mt[i] = initMult*(prev^(prev>>30)) + uint32(i)
	}
	r.idx = stateSize
}

// initByArray mixes a key of any length into the state (mt19937ar.c
// init_by_array), which is what CPython uses for every int seed.
func (r *Rand) initByArray(key []uint32) {
	r.initGenrand(initSeed)
	i, j := 1, 0
	k := max(stateSize, len(key))
	for ; k > 0; k-- {
		prev := r.mt[i-1]
		r.mt[i] = (r.mt[i] ^ ((prev ^ (prev >> 30)) * arrayMult1)) + key[j] + uint32(j)
		i++
		j++
		if i >= stateSize {
			r.mt[0] = r.mt[stateSize-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = stateSize - 1; k > 0; k-- {
		prev := r.mt[i-1]
		r.mt[i] = (r.mt[i] ^ ((prev ^ (prev >> 30)) * arrayMult2)) - uint32(i)
		i++
		if i >= stateSize {
			r.mt[0] = r.mt[stateSize-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000 // guarantees a non-zero state
}

// uint32 returns the next tempered 32-bit output (mt19937ar.c genrand_int32).
func (r *Rand) uint32() uint32 {
	if r.idx >= stateSize {
		r.twist()
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & temperMaskB
	y ^= (y << 15) & temperMaskC
	y ^= y >> 18
	return y
}

// twist regenerates the whole state block.
func (r *Rand) twist() {
	for k := 0; k < stateSize; k++ {
		y := (r.mt[k] & upperMask) | (r.mt[(k+1)%stateSize] & lowerMask)
		v := r.mt[(k+shiftSize)%stateSize] ^ (y >> 1)
		if y&1 != 0 {
			v ^= matrixA
		}
		r.mt[k] = v
	}
	r.idx = 0
}

// Getrandbits returns Python's getrandbits(k) for 0 <= k <= 64. For k > 64 it
// returns the low 64 bits of Python's value while consuming the same number of
// 32-bit outputs, so the stream stays in step with Python's. For k < 0
// (a ValueError in Python) it returns 0 and consumes nothing.
func (r *Rand) Getrandbits(k int) uint64 {
	if k <= 0 {
		return 0
	}
	if k <= 32 {
		return uint64(r.uint32() >> (32 - k))
	}
	// CPython fills 32-bit words least significant first; the last word keeps
	// only its top bits when k is not a multiple of 32.
	var out uint64
	for word := 0; k > 0; word++ {
		v := r.uint32()
		if k < 32 {
			v >>= 32 - k
		}
		if word < 2 {
			out |= uint64(v) << (32 * word)
		}
		k -= 32
	}
	return out
}

// Random returns Python's random(): a float64 in [0, 1) with 53 random bits
// built from two 32-bit outputs (27 and 26 bits).
func (r *Rand) Random() float64 {
	a := r.uint32() >> 5
	b := r.uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// Randbelow returns Python's _randbelow(n): a uniform int in [0, n), drawn by
// rejection from getrandbits(n.bit_length()). n <= 0 returns 0 and consumes
// nothing.
func (r *Rand) Randbelow(n int) int {
	if n <= 0 {
		return 0
	}
	k := bits.Len64(uint64(n))
	for {
		v := r.Getrandbits(k)
		if v < uint64(n) {
			return int(v)
		}
	}
}

// Shuffle permutes n elements in place through swap exactly as Python's
// random.shuffle(x) permutes a list of length n: Fisher-Yates from the end,
// with j = _randbelow(i+1).
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		j := r.Randbelow(i + 1)
		swap(i, j)
	}
}

// Expovariate returns Python's expovariate(lambd): -log(1 - random()) / lambd.
// The random draw is Python's exactly; the logarithm is correctly rounded,
// which equals glibc's (and so CPython's on Linux) except in rare
// near-halfway cases where the two differ in the last bit (7 in 5000 draws
// in the tests).
// As in Python, lambd is the rate (1 / mean) and a negative lambd gives
// values in (-inf, 0]; lambd == 0 gives ±Inf or NaN where Python raises
// ZeroDivisionError, so callers should validate it.
func (r *Rand) Expovariate(lambd float64) float64 {
	return -log(1.0-r.Random()) / lambd
}
