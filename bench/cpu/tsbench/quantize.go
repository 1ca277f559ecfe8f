//go:build !before

package main

import (
	"github.com/tinyserve/tinyserve/llm/cpu"
	"github.com/tinyserve/tinyserve/llm/model"
)

// withWeights sets up the weights' storage for dtype: "" or float32,
// bfloat16 (the backend's WeightDType), or q8_0, which quantizes m's
// matrices and embedding to Q8_0 at load as --quantization q8_0 does (a
// model already stored as Q8_0, a GGUF file, is kept as it is). It
// returns the bytes per weight a decode step streams.
func withWeights(m *model.Model, o *cpu.Options, dtype string) (float64, error) {
	if dtype == model.QuantQ8_0 {
		return 34.0 / 32, m.Quantize(model.QuantQ8_0)
	}
	elem := 4.0
	if dtype == "bfloat16" {
		elem = 2
	}
	return elem, withDType(o, dtype)
}
