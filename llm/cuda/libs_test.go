package cuda

import (
	"errors"
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
