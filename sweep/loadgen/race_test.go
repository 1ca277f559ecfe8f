//go:build race

package loadgen

// raceEnabled is whether the race detector is on (it slows processes
// started from this test binary tenfold).
const raceEnabled = true
