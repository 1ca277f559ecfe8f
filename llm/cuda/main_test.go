package cuda

import (
	"fmt"
	"os"
	"testing"
)

// gpuKernelCache is one kernel cache for every GPU backend of a test run,
// so that NVRTC compiles the kernels once per architecture rather than once
// per backend (about a second each, from the device check's few minutes).
var gpuKernelCache string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tinyserve-cuda-kernels")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gpuKernelCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
