//go:build race

package cuda

// raceEnabled trims the fake-GPU tests under the race detector, which
// slows their Go emulation of every kernel about tenfold.
const raceEnabled = true
