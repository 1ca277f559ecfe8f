package analysis

// Default saturation thresholds, serving-inference's: a step up in
// concurrency that buys less than 5% more output-token throughput while the
// p99 latency grows by at least 20% is paying latency for nothing.
const (
	DefaultThroughputGain = 0.05
	DefaultP99Rise        = 0.20
	// RequiredTransitions is how many successive qualifying transitions make
	// a candidate: one could be noise, two in a row is a plateau.
	RequiredTransitions = 2
)

// LevelPoint is what the saturation analysis needs from one concurrency
// level: the medians over measured repeats. A nil value means the level has
// no such measurement (all requests failed, or no output tokens were
// reported); it never crashes the analysis, it only stops a transition from
// qualifying.
type LevelPoint struct {
	Concurrency      int
	OutputTokensPerS *float64
	LatencyP99S      *float64
}

// Transition is one step between adjacent levels, as recorded in
// summary.json.
type Transition struct {
	FromConcurrency int `json:"from_concurrency"`
	ToConcurrency   int `json:"to_concurrency"`
	// ThroughputChange is (new - old) / old of the median output-token
	// throughput; nil when either is missing or old is zero.
	ThroughputChange *float64 `json:"median_throughput_change_fraction"`
	// P99Change is (new - old) / old of the median p99 latency; nil when
	// either is missing or old is zero.
	P99Change *float64 `json:"median_p99_latency_change_fraction"`
	Qualifies bool     `json:"meets_transition_criteria"`
}

// SaturationResult is the "saturation" object of summary.json: the
// thresholds used, every transition and the candidate, so a reader can redo
// the decision by hand.
type SaturationResult struct {
	ThroughputGainThreshold float64      `json:"throughput_gain_threshold_fraction"`
	P99RiseThreshold        float64      `json:"p99_latency_rise_threshold_fraction"`
	RequiredTransitions     int          `json:"required_successive_transitions"`
	Candidate               *int         `json:"candidate_saturation_concurrency"`
	Transitions             []Transition `json:"transitions"`
}

// Saturation walks adjacent levels in the order given (callers pass them in
// ascending concurrency) and finds the candidate saturation concurrency: a
// transition qualifies when the median output-token throughput gains less
// than gain and the median p99 latency rises by at least rise; the candidate
// is the level between the first two successive qualifying transitions (the
// "from" level of the second one): throughput already stopped growing on the
// way to it, and going past it does not help either. This is
// serving-inference's rule (saturation_analysis in
// scripts/run_experiment.py): levels 1, 2, 4 with throughput 100, 103, 104
// and p99 1.0, 1.25, 1.55 give candidate 2.
func Saturation(levels []LevelPoint, gain, rise float64) SaturationResult {
	res := SaturationResult{
		ThroughputGainThreshold: gain,
		P99RiseThreshold:        rise,
		RequiredTransitions:     RequiredTransitions,
		Transitions:             []Transition{},
	}
	streak := 0
	for i := 1; i < len(levels); i++ {
		prev, cur := levels[i-1], levels[i]
		t := Transition{
			FromConcurrency:  prev.Concurrency,
			ToConcurrency:    cur.Concurrency,
			ThroughputChange: relChange(prev.OutputTokensPerS, cur.OutputTokensPerS),
			P99Change:        relChange(prev.LatencyP99S, cur.LatencyP99S),
		}
		t.Qualifies = t.ThroughputChange != nil && t.P99Change != nil &&
			*t.ThroughputChange < gain && *t.P99Change >= rise
		if t.Qualifies {
			streak++
		} else {
			streak = 0
		}
		if streak >= RequiredTransitions && res.Candidate == nil {
			c := prev.Concurrency
			res.Candidate = &c
		}
		res.Transitions = append(res.Transitions, t)
	}
	return res
}

func relChange(old, cur *float64) *float64 {
	if old == nil || cur == nil || *old == 0 {
		return nil
	}
	v := (*cur - *old) / *old
	return &v
}
