package tinyserve

import (
	"errors"

	"github.com/tinyserve/tinyserve/llm/cuda"
)

// NoGPU reports whether err (from [Open], wrapped or not) says that the cuda
// backend found no CUDA driver or no device, so that a command can suggest
// the CPU backend without importing the backend itself.
func NoGPU(err error) bool {
	var nf *cuda.NotFoundError
	return errors.As(err, &nf) || errors.Is(err, cuda.ErrNoDevice)
}
