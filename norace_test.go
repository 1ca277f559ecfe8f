//go:build !race

package tinyserve

const raceEnabled = false
