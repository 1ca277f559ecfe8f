package cuda

import (
	"testing"

	"github.com/tinyserve/tinyserve/llm/model"
)

// TestFakeGPUQ8_0 runs models quantized to Q8_0 (Model.Quantize: every
// matrix and the tied embedding) on the fake GPU: the backend has no 8-bit
// kernels yet and dequantizes Q8_0 tensors to its storage type at upload
// (encodeTensor widens any type it does not store), so in float32 it must
// agree with the CPU backend, whose 8-bit kernels compute with the same
// dequantized values.
func TestFakeGPUQ8_0(t *testing.T) {
	for _, v := range []struct {
		name  string
		model func(testing.TB) *model.Model
	}{
		{"gpt2", func(t testing.TB) *model.Model { return smallModel(t, nil) }},
		{"qwen3", func(t testing.TB) *model.Model { return smallLlama(t, "qwen3") }},
	} {
		t.Run(v.name, func(t *testing.T) {
			m := v.model(t)
			if err := m.Quantize(model.QuantQ8_0); err != nil {
				t.Fatal(err)
			}
			const blocks = 40
			fb, _ := newFakeBackend(t, m, Options{DType: "float32"}, blocks)
			cb := cpuBackend(t, m, blocks)
			worst := compareMixed(t, fb, cb, smallPrompts(300, 1, 17, 40, 5, 33), blocks, 7, 5)
			if worst > 1e-5 {
				t.Errorf("fake GPU vs CPU logits differ by %.3g on Q8_0 weights", worst)
			}
			t.Logf("max |fake GPU - CPU| logit %.3g", worst)
		})
	}
}
