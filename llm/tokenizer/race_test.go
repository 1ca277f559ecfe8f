//go:build race

package tokenizer

// raceEnabled: the race detector slows JSON decoding tenfold, so the
// GGUF tests compare the two 150k-token vocabularies only without it.
const raceEnabled = true
