package main

import (
	"path/filepath"
	"testing"

	"github.com/tinyserve/tinyserve/llm/gguf"
	"github.com/tinyserve/tinyserve/llm/model"
	"github.com/tinyserve/tinyserve/llm/tensor"
	"github.com/tinyserve/tinyserve/llm/tokenizer"
)

// TestConvert converts gpt2-tiny as the command does and reads the file
// back: the model's config, GPT-2's tokenizer, no chat template.
func TestConvert(t *testing.T) {
	m, err := model.OpenWith("../../../testdata/gpt2-tiny", model.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	meta, err := tokenizerMeta(m, "")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "gpt2-tiny.gguf")
	if err := writeFile(m, out, model.GGUFOptions{Type: tensor.Q8_0, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	g, err := model.LoadGGUF(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Config.Layers != m.Config.Layers || g.Weights.Layers[0].QKV[0].W.DType != tensor.Q8_0 || !g.Weights.TiedHead() {
		t.Errorf("read back %+v", g.Config)
	}
	tok, err := tokenizer.LoadGGUF(out)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := tokenizer.GPT2()
	if a, b := tok.Encode("Hello there, world", false), ref.Encode("Hello there, world", false); len(a) != len(b) || a[0] != b[0] {
		t.Errorf("tokens %v, want %v", a, b)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Has("tokenizer.chat_template") {
		t.Error("GPT-2 has no chat template to write")
	}
	if ft, _ := f.Int("general.file_type"); ft != 7 {
		t.Errorf("general.file_type %d, want 7 (MOSTLY_Q8_0)", ft)
	}
}
