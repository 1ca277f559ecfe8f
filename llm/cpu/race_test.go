//go:build race

package cpu

// raceEnabled trims the heaviest golden comparisons under the race detector,
// which slows this arithmetic about 12x; every feature is still exercised.
const raceEnabled = true
