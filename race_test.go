//go:build race

package tinyserve

// raceEnabled skips the tests the race detector makes too slow to run in
// CI's time; .ci/run runs them without it.
const raceEnabled = true
