package pyrandom

import "math"

// Go's math.Log is accurate to about one ulp but is not the C library's log:
// on a few percent of inputs its last bit differs from glibc's, which is what
// CPython's math.log calls, so Expovariate would drift from Python. log
// computes the natural logarithm in double-double arithmetic (about 106 bits)
// and rounds once, which gives the correctly rounded value that glibc's log
// also returns in all but astronomically rare cases.

// dd is an unevaluated sum hi + lo with |lo| <= ulp(hi)/2.
type dd struct{ hi, lo float64 }

// ln2 in double-double.
const (
	ln2Hi = 0x1.62e42fefa39efp-1
	ln2Lo = 0x1.abc9e3b39803fp-56
)

// twoSum returns a+b exactly as a double-double (Knuth).
func twoSum(a, b float64) dd {
	s := a + b
	bb := s - a
	return dd{s, (a - (s - bb)) + (b - bb)}
}

// quickTwoSum is twoSum for |a| >= |b|.
func quickTwoSum(a, b float64) dd {
	s := a + b
	return dd{s, b - (s - a)}
}

func ddAdd(a, b dd) dd {
	s := twoSum(a.hi, b.hi)
	t := twoSum(a.lo, b.lo)
	s.lo += t.hi
	s = quickTwoSum(s.hi, s.lo)
	s.lo += t.lo
	return quickTwoSum(s.hi, s.lo)
}

func ddMul(a, b dd) dd {
	p := a.hi * b.hi
	e := math.FMA(a.hi, b.hi, -p)
	e += a.hi*b.lo + a.lo*b.hi
	return quickTwoSum(p, e)
}

func ddMulFloat(a dd, b float64) dd {
	p := a.hi * b
	e := math.FMA(a.hi, b, -p)
	e += a.lo * b
	return quickTwoSum(p, e)
}

func ddDiv(a, b dd) dd {
	q1 := a.hi / b.hi
	r := ddAdd(a, ddMulFloat(b, -q1))
	q2 := r.hi / b.hi
	r = ddAdd(r, ddMulFloat(b, -q2))
	q3 := r.hi / b.hi
	return ddAdd(quickTwoSum(q1, q2), dd{q3, 0})
}

// log returns ln(x) rounded once from a double-double result.
func log(x float64) float64 {
	if x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return math.Log(x)
	}
	m, k := math.Frexp(x) // x = m * 2^k, m in [0.5, 1)
	if m < math.Sqrt2/2 {
		m *= 2
		k--
	}
	// ln(m) = 2 atanh(s) with s = (m-1)/(m+1), |s| < 0.172; m-1 is exact.
	s := ddDiv(dd{m - 1, 0}, twoSum(m, 1))
	s2 := ddMul(s, s)
	term, sum := s, s
	for n := 3.0; n < 80; n += 2 {
		term = ddMul(term, s2)
		if math.Abs(term.hi) < 1e-40*math.Abs(sum.hi) {
			break
		}
		sum = ddAdd(sum, ddDiv(term, dd{n, 0}))
	}
	sum = ddMulFloat(sum, 2)
	res := ddAdd(ddMulFloat(dd{ln2Hi, ln2Lo}, float64(k)), sum)
	return res.hi + res.lo
}
