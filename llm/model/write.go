package model

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tinyserve/tinyserve/llm/checkpoint"
	"github.com/tinyserve/tinyserve/llm/tensor"
)

// WriteCheckpoint writes m as a Hugging Face checkpoint folder that Load,
// transformers and other engines read: dir/config.json and one
// dir/model.safetensors, every tensor under its Hugging Face name in dtype
// (F32, F16 or BF16; empty keeps each tensor's own type). lm_head.weight is
// written only when the head is not tied. dir is created if needed;
// existing files are replaced.
func (m *Model) WriteCheckpoint(dir string, dtype tensor.DType) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	c := m.Config
	c.TiedEmbeddings = m.Weights.TiedHead()
	switch dtype {
	case tensor.F32:
		c.TorchDType = "float32"
	case tensor.F16:
		c.TorchDType = "float16"
	case tensor.BF16:
		c.TorchDType = "bfloat16"
	}
	js, err := MarshalConfig(c)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	var ts []checkpoint.Named
	for _, p := range params(&c, &m.Weights) {
		ts = append(ts, checkpoint.Named{Name: p.name, DType: dtype, Tensor: *p.dst})
	}
	return checkpoint.WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts)
}
