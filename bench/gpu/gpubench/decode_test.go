package main

import (
	"strings"
	"testing"
)

// TestDecodeTable: the quantized row sits beside the unquantized one of the
// same type and batch, with their ratio; a row without a quantized twin
// gets dashes.
func TestDecodeTable(t *testing.T) {
	rows := []decodeRow{
		{dtype: "float16", quant: "none", batch: 1, msPerStep: 2, weightBytes: 4 << 20},
		{dtype: "float16", quant: "none", batch: 4, msPerStep: 3, weightBytes: 4 << 20},
		{dtype: "float16", quant: "q8_0", batch: 1, msPerStep: 1.5, weightBytes: 2 << 20, scratchBytes: 1 << 19},
	}
	got := decodeTable("m", "GPU (sm_90)", true, 128, rows)
	for _, want := range []string{
		"decode step of m on GPU (sm_90), CUDA graphs, every sequence at position 128",
		"| float16 | 1 | 2.0000 | 1.5000 | 0.75 | 4.0 | 2.0 (+ 0.5) |",
		"| float16 | 4 | 3.0000 | - | - | 4.0 | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestDecodeFlags: bad flags are refused before any model or GPU is
// touched, and scenarios refuses an unknown quantization alike.
func TestDecodeFlags(t *testing.T) {
	for _, args := range [][]string{{"decode", "-batches", "1,x"}, {"decode", "-quantization", "q4_k"}, {"decode", "-steps", "0"}, {"scenarios", "-quantization", "q4_k"}} {
		var out, errs strings.Builder
		if err := run(args, &out, &errs); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
