package cuda

import (
	"testing"

	"github.com/tinyserve/tinyserve/internal/f32"

	"github.com/tinyserve/tinyserve/llm/model"
)

// TestFakeGPUQ8_0 runs models quantized to Q8_0 (Model.Quantize: every
// matrix and the tied embedding) on the fake GPU: the backend has no 8-bit
// kernels yet and dequantizes Q8_0 tensors to its storage type at upload
// (encodeTensor widens any type it does not store), so in float32 it must
// agree with the CPU backend, whose 8-bit kernels compute with the same
// dequantized values: to float32 rounding where those kernels keep the
// activations in float32, and within cpuQ8ActTol where they round them
// to 16 bits per block of 32 for integer products (AVX2 or AVX-512BW;
// f32.Q8Rows), which moves these logits by up to about 0.0012.
func TestFakeGPUQ8_0(t *testing.T) {
	tol := 1e-5
	if f32.NewPackedQ8(32, 32).UsesQ8Rows() {
		tol = cpuQ8ActTol
	}
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
			if worst > tol {
				t.Errorf("fake GPU vs CPU logits differ by %.3g on Q8_0 weights", worst)
			}
			t.Logf("max |fake GPU - CPU| logit %.3g", worst)
		})
	}
}

// cpuQ8ActTol is TestFakeGPUQ8_0's bound where the CPU backend's Q8_0
// products round the activations to 16 bits (about three times the
// largest difference seen).
const cpuQ8ActTol = 4e-3
