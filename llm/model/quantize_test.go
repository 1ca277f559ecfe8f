package model

import (
	"testing"

	"github.com/tinyserve/tinyserve/llm/tensor"
)

// TestQuantize: a GPT-2 (in×out Conv1D weights, tied head) quantized to
// Q8_0 has every projection out×in Q8_0 with its values within a
// quantization step, the embedding Q8_0 and still tied, norms, biases and
// position embeddings untouched, and passes Check.
func TestQuantize(t *testing.T) {
	m, err := Builtin(BuiltinTiny)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Weights.Layers[1].QKV[0]
	vals := append([]float32(nil), before.W.Float32s()...)
	bias, posEmb := m.Weights.Layers[1].QKV[0].B, m.Weights.Positions
	if err := m.Quantize("Q8_0"); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	w := &m.Weights
	if w.Embed.DType != tensor.Q8_0 || !w.TiedHead() || w.Positions.DType != tensor.F32 || !w.Positions.Same(posEmb) {
		t.Fatalf("embedding %s tied %v, positions %s", w.Embed.DType, w.TiedHead(), w.Positions.DType)
	}
	after := w.Layers[1].QKV[0]
	if after.W.DType != tensor.Q8_0 || after.InMajor || after.W.Shape[0] != int64(before.Out) || !after.B.Same(bias) {
		t.Fatalf("qkv: %s in-major %v shape %v", after.W.DType, after.InMajor, after.W.Shape)
	}
	// W[k, j] in×out is now row j, column k.
	for _, kj := range [][2]int{{0, 0}, {5, 17}, {63, 191}} {
		k, j := kj[0], kj[1]
		orig, q := vals[k*before.Out+j], after.W.At(j*before.In+k)
		if d := orig - q; d > 0.01 || d < -0.01 {
			t.Errorf("W[%d,%d] = %v, quantized %v", k, j, orig, q)
		}
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		for _, lin := range []Linear{l.QKV[0], l.O, l.Up[0], l.Down} {
			if lin.W.DType != tensor.Q8_0 {
				t.Fatalf("layer %d: a %s matrix", i, lin.W.DType)
			}
		}
		if l.AttnNorm.W.DType != tensor.F32 {
			t.Fatal("norm quantized")
		}
	}
	// Quantizing again changes nothing; "" and "none" do nothing.
	e := w.Embed
	for _, q := range []string{"q8_0", "", "none"} {
		if err := m.Quantize(q); err != nil || !w.Embed.Same(e) {
			t.Fatalf("Quantize(%q): %v", q, err)
		}
	}
	if err := m.Quantize("q4_k"); err == nil {
		t.Error("Quantize(q4_k) succeeded")
	}
}

// TestQuantizeRefusesOddWidths: a matrix whose input is not a multiple of
// 32 cannot hold Q8_0 blocks; the error names it.
func TestQuantizeRefusesOddWidths(t *testing.T) {
	l := &Linear{W: tensor.FromFloat32(make([]float32, 48*2), 2, 48), In: 48, Out: 2}
	if err := quantizeLinear(l); err == nil || l.W.DType != tensor.F32 {
		t.Fatalf("quantizeLinear of In 48: %v", err)
	}
}
