package cuda

import (
	"errors"
	"fmt"
)

// ErrNoDevice is matched (errors.Is) when the driver loads but reports no
// usable GPU, so a caller can fall back to the CPU backend.
var ErrNoDevice = errors.New("cuda: no CUDA device")

// Error is a failed CUDA, cuBLAS or NVRTC call. It keeps the library's own
// status name and message so that a log line can be searched for in
// NVIDIA's documentation as is.
type Error struct {
	// Lib is the library: "driver", "cublas" or "nvrtc".
	Lib string
	// Func is the C function that failed, e.g. "cuMemAlloc_v2".
	Func string
	// Code is the numeric status (CUresult, cublasStatus_t, nvrtcResult).
	Code int
	// Name is the status's symbolic name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
	Name string
	// Message is the library's description of the status.
	Message string
}

// Error reads "cuda: <function>: <NAME> (<code>): <message>".
func (e *Error) Error() string {
	switch {
	case e.Message != "" && e.Message != e.Name:
		return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Func, e.Name, e.Code, e.Message)
	default:
		return fmt.Sprintf("cuda: %s: %s (%d)", e.Func, e.Name, e.Code)
	}
}

// Driver API status codes the package branches on (cuda.h's CUresult).
const (
	cudaSuccess        = 0
	cudaErrorNoDevice  = 100
	cudaErrorNotInit   = 3
	cudaErrorOOM       = 2
	cudaErrorNoBinary  = 209 // CUDA_ERROR_NO_BINARY_FOR_GPU
	cudaErrorPTXUnsupp = 222 // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
)

// Is lets errors.Is(err, ErrNoDevice) match the driver's "no device" status.
func (e *Error) Is(target error) bool {
	return target == ErrNoDevice && e.Lib == "driver" && e.Code == cudaErrorNoDevice
}

// cublasStatusNames are cublasStatus_t's names (cublas_api.h). Older cuBLAS
// releases lack cublasGetStatusName, so the table is the fallback.
var cublasStatusNames = map[int]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// nvrtcResultNames are nvrtcResult's names (nvrtc.h), used when
// nvrtcGetErrorString is unavailable (it never is in practice, but a fake
// in tests may leave it out).
var nvrtcResultNames = map[int]string{
	0:  "NVRTC_SUCCESS",
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
}

// statusName is a table's name for code, or a generic one for a code the
// table does not know (a newer library).
func statusName(table map[int]string, prefix string, code int) string {
	if n, ok := table[code]; ok {
		return n
	}
	return fmt.Sprintf("%s_%d", prefix, code)
}
