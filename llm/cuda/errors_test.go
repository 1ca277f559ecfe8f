package cuda

import (
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// cstr is a C string in Go memory, as a library would return.
func cstr(s string) *byte { return cString(s) }

func TestDriverStatusToError(t *testing.T) {
	d := &Driver{
		getErrorName: func(code int32, p **byte) int32 {
			if code == 2 {
				*p = cstr("CUDA_ERROR_OUT_OF_MEMORY")
				return 0
			}
			return 1 // CUDA_ERROR_INVALID_VALUE: unknown code
		},
		getErrorString: func(code int32, p **byte) int32 {
			if code == 2 {
				*p = cstr("out of memory")
				return 0
			}
			return 1
		},
	}
	if err := d.check("cuMemAlloc_v2", 0); err != nil {
		t.Fatalf("success mapped to %v", err)
	}
	err := d.check("cuMemAlloc_v2", 2)
	var e *Error
	if !errors.As(err, &e) || e.Name != "CUDA_ERROR_OUT_OF_MEMORY" || e.Message != "out of memory" || e.Code != 2 || e.Func != "cuMemAlloc_v2" {
		t.Fatalf("got %#v", err)
	}
	if got, want := err.Error(), "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if err := d.check("cuInit", 999); !strings.Contains(err.Error(), "CUDA_ERROR_999") {
		t.Errorf("unknown code: %v", err)
	}
	if errors.Is(err, ErrNoDevice) {
		t.Error("out of memory matched ErrNoDevice")
	}
	if err := d.check("cuInit", cudaErrorNoDevice); !errors.Is(err, ErrNoDevice) {
		t.Errorf("status 100 does not match ErrNoDevice: %v", err)
	}
}

func TestCuBLASStatusToError(t *testing.T) {
	c := &CuBLAS{} // an old cuBLAS without cublasGetStatusName: the table names it
	err := c.check("cublasGemmEx", 7)
	if got, want := err.Error(), "cuda: cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (7)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if err := c.check("cublasGemmEx", 42); !strings.Contains(err.Error(), "CUBLAS_STATUS_42") {
		t.Errorf("unknown status: %v", err)
	}
	c.getStatusName = func(int32) *byte { return cstr("CUBLAS_STATUS_NOT_SUPPORTED") }
	c.getStatusString = func(int32) *byte { return cstr("the functionality requested is not supported") }
	if got, want := c.check("cublasGemmEx", 15).Error(), "cuda: cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED (15): the functionality requested is not supported"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if c.check("x", 0) != nil {
		t.Error("success mapped to an error")
	}
}

func TestNVRTCStatusToError(t *testing.T) {
	n := &NVRTC{}
	if got := n.check("nvrtcCompileProgram", 6).Error(); got != "cuda: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)" {
		t.Errorf("table fallback: %q", got)
	}
	n.getErrorString = func(int32) *byte { return cstr("NVRTC_ERROR_INVALID_OPTION") }
	err := n.check("nvrtcCompileProgram", 5)
	if !archRejected(err) {
		t.Errorf("archRejected(%v) = false", err)
	}
	ce := &CompileError{Err: err, Log: "decoder.cu(3): error: identifier \"x\" is undefined"}
	if !errors.Is(ce, err) || !strings.Contains(ce.Error(), "is undefined") || !strings.Contains(ce.Error(), "NVRTC_ERROR_INVALID_OPTION") {
		t.Errorf("CompileError %q does not carry status and log", ce.Error())
	}
}

func TestGoString(t *testing.T) {
	if goString(nil) != "" || goString(cstr("")) != "" || goString(cstr("sm_90")) != "sm_90" {
		t.Error("goString")
	}
	p := cstr("ab")
	if *(*byte)(unsafe.Add(unsafe.Pointer(p), 2)) != 0 {
		t.Error("cString is not NUL-terminated")
	}
}
