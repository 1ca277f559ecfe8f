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

// testScratch is a folder for what a test binary builds once for several
// tests (the emulator libraries, emu_libs_test.go); removed at exit.
var testScratch string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tinyserve-cuda-kernels")
	if err == nil {
		testScratch, err = os.MkdirTemp("", "tinyserve-cuda-test")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gpuKernelCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(testScratch)
	os.Exit(code)
}
