package tinyserve

import (
	"context"
	"strings"
	"testing"

	"github.com/tinyserve/tinyserve/llm"
)

// TestQuantizationSetting: the JSON key reaches Config.Quantization
// (--quantization and its environment variable: internal/cli's
// TestQuantizationFlag); Open with q8_0 serves the built-in model from
// 8-bit weights; a bad value, and the mock backend,
// are refused with errors naming the setting.
func TestQuantizationSetting(t *testing.T) {
	if c, err := DecodeConfigJSON([]byte(`{"quantization":"q8_0"}`)); err != nil || c.Quantization != "q8_0" {
		t.Errorf("quantization key: %+v %v", c, err)
	}
	e, err := Open(context.Background(), Config{Quantization: "q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ch, err := e.Generate(context.Background(), llm.Request{PromptTokens: []int{464, 3290}, Params: llm.SamplingParams{MaxTokens: 3, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ev := range ch {
		n += len(ev.TokenIDs)
	}
	if n != 3 {
		t.Errorf("%d tokens, want 3", n)
	}
	for _, c := range []Config{{Quantization: "q4_k"}, {Backend: BackendMock, Quantization: "q8_0"}} {
		if _, err := Open(context.Background(), c); err == nil || !strings.Contains(err.Error(), "quantization") {
			t.Errorf("Open(%+v): %v", c, err)
		}
	}
}
