//go:build before

package main

import (
	"fmt"

	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/model"
)

// withWeights for a BEFORE build (compare.sh): older trees have no
// Model.Quantize, so only the float storage types.
func withWeights(_ *model.Model, o *cpu.Options, dtype string) (float64, error) {
	if dtype == "q8_0" {
		return 0, fmt.Errorf("-dtype q8_0 needs a tree with model.Quantize")
	}
	elem := 4.0
	if dtype == "bfloat16" {
		elem = 2
	}
	return elem, withDType(o, dtype)
}
