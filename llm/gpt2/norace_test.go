//go:build !race

package gpt2

const raceEnabled = false
