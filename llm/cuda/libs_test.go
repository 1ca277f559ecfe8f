package cuda

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// These tests open the real driver and cuBLAS where they are installed,
// with or without a GPU: every symbol the bindings use must resolve, and
// statuses must come back named by the library itself. Without a GPU the
// first call that needs one fails, which is what they check; on a GPU
// machine they check the success path's first calls instead.

func TestRealDriver(t *testing.T) {
	d, err := LoadDriver(SearchDirs(LibDirFromEnv(), nil))
	var nf *NotFoundError
	if errors.As(err, &nf) {
		t.Skipf("no CUDA driver library here: %v", err)
	}
	if err != nil {
		t.Fatalf("LoadDriver (a symbol the bindings use is missing?): %v", err)
	}
	t.Logf("driver from %s", d.Path)
	if v, err := d.Version(); err == nil {
		t.Logf("cuDriverGetVersion: %d", v)
	}
	err = d.Init()
	if err == nil {
		n, err := d.DeviceCount()
		t.Logf("cuInit succeeded; %d devices (%v)", n, err)
		return
	}
	var ce *Error
	if !errors.As(err, &ce) || strings.HasPrefix(ce.Name, "CUDA_ERROR_") && ce.Message == "" {
		t.Errorf("cuInit error is not named by the driver: %#v", err)
	}
	t.Logf("cuInit without a GPU: %v (ErrNoDevice: %v)", err, errors.Is(err, ErrNoDevice))
}

func TestRealCuBLAS(t *testing.T) {
	c, err := LoadCuBLAS(LibCuBLAS(), SearchDirs(LibDirFromEnv(), nil))
	var nf *NotFoundError
	if errors.As(err, &nf) {
		t.Skipf("no cuBLAS here: %v", err)
	}
	if err == nil {
		t.Logf("cublasCreate succeeded (a GPU is present) with %s", c.Path)
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		return
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("LoadCuBLAS (a symbol the bindings use is missing?): %v", err)
	}
	if ce.Func != "cublasCreate_v2" || !strings.HasPrefix(ce.Name, "CUBLAS_STATUS_") {
		t.Errorf("unexpected error %#v", ce)
	}
	t.Logf("cublasCreate without a GPU: %v", err)
}

// TestLoadSystemDriver: the driver the system loader finds by soname binds,
// and its Path is the file mapped; where the loader finds none, the error
// is a *NotFoundError naming the loader's search, so that NewBackend falls
// back to the library folders.
func TestLoadSystemDriver(t *testing.T) {
	d, err := LoadSystemDriver()
	var nf *NotFoundError
	if errors.As(err, &nf) {
		if !strings.Contains(err.Error(), "system loader") {
			t.Errorf("error does not name the system loader's search: %v", err)
		}
		t.Skipf("no libcuda.so.1 through the system loader here: %v", err)
	}
	if err != nil {
		t.Fatalf("LoadSystemDriver (a symbol the bindings use is missing?): %v", err)
	}
	if !strings.HasPrefix(d.Path, "/") || !strings.HasPrefix(filepath.Base(d.Path), "libcuda.so") {
		t.Errorf("Path %q is not the mapped libcuda file", d.Path)
	}
	t.Logf("system loader's driver: %s", d.Path)
}

func TestMappedLibrary(t *testing.T) {
	maps := `55d0c0000000-55d0c0100000 r-xp 00000000 08:01 123 /opt/bin/cuda.test
7f00a0000000-7f00a0200000 r--p 00000000 08:01 456 /usr/local/nvidia/lib64/libcuda.so.580.159.04
7f00b0000000-7f00b0200000 r--p 00000000 08:01 789 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
7f00c0000000-7f00c0001000 rw-p 00000000 00:00 0
7f00d0000000-7f00d0200000 r--p 00000000 08:01 999 /home/a user/cuda 13/libcudart.so.13
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`
	for _, c := range []struct{ prefix, want string }{
		{"libcuda.so", "/usr/local/nvidia/lib64/libcuda.so.580.159.04"}, // the first mapped
		{"libcudart.so", "/home/a user/cuda 13/libcudart.so.13"},        // spaces in the path
		{"libnvrtc.so", ""},
		{"stack", ""}, // pseudo-paths are not files
	} {
		if got := mappedLibrary(maps, c.prefix); got != c.want {
			t.Errorf("mappedLibrary(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}
