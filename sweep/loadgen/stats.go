package loadgen

import (
	"math"
	"slices"
)

// Percentile returns the p-th percentile (0 <= p <= 100) of sorted, a slice
// in ascending order, by linear interpolation between the closest ranks:
// numpy's default method and serving-inference's percentile(). It returns
// NaN for an empty slice, and for a p outside [0, 100] (or NaN); callers
// that serialise use [Distribute], which turns that into null.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 || !(p >= 0 && p <= 100) { // !(...) catches NaN too
		return math.NaN()
	}
	pos := float64(n-1) * p / 100
	lo := math.Floor(pos)
	hi := math.Ceil(pos)
	l, h := int(lo), int(hi)
	if l < 0 {
		l = 0
	}
	if h > n-1 {
		h = n - 1
	}
	if l == h {
		return sorted[l]
	}
	return sorted[l] + (sorted[h]-sorted[l])*(pos-lo)
}

// Median returns the median of values (the mean of the two middle values for
// an even count, as Python's statistics.median), or nil when there are none.
// The input is not modified.
func Median(values []float64) *float64 {
	if len(values) == 0 {
		return nil
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	var m float64
	if n%2 == 1 {
		m = s[n/2]
	} else {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return &m
}

// Distribution summarises a set of values. The first five keys are
// serving-inference's; the rest are tinyserve's additions. Every statistic is
// null (nil) when Count is zero, so a reader never mistakes "no data" for 0.
type Distribution struct {
	Count int      `json:"count"` // values summarised
	Mean  *float64 `json:"mean"`
	P50   *float64 `json:"p50"` // percentiles: linear between closest ranks
	P90   *float64 `json:"p90"`
	P99   *float64 `json:"p99"`
	Min   *float64 `json:"min"`
	Max   *float64 `json:"max"`
	// Std is the population standard deviation (numpy's default, ddof=0):
	// the values are the whole measured run, not a sample of it.
	Std  *float64 `json:"std"`
	P1   *float64 `json:"p1"`
	P5   *float64 `json:"p5"`
	P10  *float64 `json:"p10"`
	P25  *float64 `json:"p25"`
	P75  *float64 `json:"p75"`
	P95  *float64 `json:"p95"`
	P999 *float64 `json:"p99.9"`
}

// Distribute computes the [Distribution] of values. The input is not
// modified; NaN values are dropped, because a NaN would poison every
// statistic and JSON cannot carry it.
func Distribute(values []float64) Distribution {
	s := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return Distribution{}
	}
	slices.Sort(s)
	// Kahan-free plain sums are fine here: values are seconds with at most
	// tens of thousands of terms.
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(len(s))
	var sq float64
	for _, v := range s {
		sq += (v - mean) * (v - mean)
	}
	std := math.Sqrt(sq / float64(len(s)))
	pct := func(p float64) *float64 { v := Percentile(s, p); return &v }
	return Distribution{
		Count: len(s),
		Mean:  &mean,
		P50:   pct(50),
		P90:   pct(90),
		P99:   pct(99),
		Min:   &s[0],
		Max:   &s[len(s)-1],
		Std:   &std,
		P1:    pct(1),
		P5:    pct(5),
		P10:   pct(10),
		P25:   pct(25),
		P75:   pct(75),
		P95:   pct(95),
		P999:  pct(99.9),
	}
}
