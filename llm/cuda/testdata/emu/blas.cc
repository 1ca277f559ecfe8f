// blas.cc: the cuBLAS calls llm/cuda binds, with the prototypes of NVIDIA's
// cublas_api.h, on the host emulator: GemmEx runs emu.cc's plain GEMM
// (float64 sums) on the stream, or is recorded during graph capture.

#include <stdint.h>
#include <stddef.h>

#include "device.h"

using namespace tsdev;

namespace {

const char* const cublasNames[] = {"CUBLAS_STATUS_SUCCESS", "CUBLAS_STATUS_NOT_INITIALIZED", nullptr,
                                   "CUBLAS_STATUS_ALLOC_FAILED", nullptr, nullptr, nullptr,
                                   "CUBLAS_STATUS_INVALID_VALUE", "CUBLAS_STATUS_ARCH_MISMATCH", nullptr, nullptr,
                                   nullptr, nullptr, "CUBLAS_STATUS_EXECUTION_FAILED", nullptr,
                                   "CUBLAS_STATUS_NOT_SUPPORTED"};

bool validType(int t) { return t == 0 || t == 2 || t == 14; }

// gemmArgs checks what cuBLAS checks for GemmEx with CUBLAS_COMPUTE_32F
// or CUBLAS_COMPUTE_32F_PEDANTIC.
int gemmArgs(int ta, int tb, int m, int n, int k, int atype, int lda, int btype, int ldb, int ctype, int ldc,
             int compute, int algo) {
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0) return 7;
  if (!validType(atype) || !validType(btype) || !validType(ctype) || atype != btype) return 15;
  // CUBLAS_COMPUTE_32F (68) and _PEDANTIC (69): the only ones the backend uses
  if (compute != 68 && compute != 69) return 15;
  // cublasGemmAlgo_t: DEFAULT (-1), ALGO0..23, DEFAULT_TENSOR_OP (99) and
  // its ALGOs up to 115. Checking it also checks the last argument, passed
  // on the stack, arrives.
  if (algo < -1 || (algo > 23 && algo < 99) || algo > 115) return 7;
  int rowsA = ta ? k : m, rowsB = tb ? n : k;
  if (lda < (rowsA > 1 ? rowsA : 1) || ldb < (rowsB > 1 ? rowsB : 1) || ldc < (m > 1 ? m : 1)) return 7;
  return 0;
}

}  // namespace

TS_API const char* cublasGetStatusName(int s) {
  return s >= 0 && s < (int)(sizeof cublasNames / sizeof *cublasNames) && cublasNames[s] ? cublasNames[s]
                                                                                        : "CUBLAS_STATUS_UNKNOWN";
}

TS_API const char* cublasGetStatusString(int s) { return s == 0 ? "success" : "cuBLAS emulator error"; }

TS_API int cublasCreate_v2(void** h) {
  if (!initialized) return 1;  // CUBLAS_STATUS_NOT_INITIALIZED, as without a device
  *h = new int(0);
  return 0;
}

TS_API int cublasDestroy_v2(void* h) {
  delete (int*)h;
  return 0;
}

TS_API int cublasSetStream_v2(void*, CUstream) { return 0; }

TS_API int cublasSetMathMode(void*, int mode) { return mode >= 0 ? 0 : 7; }

TS_API int cublasSetWorkspace_v2(void* h, void* ws, size_t bytes) {
  if (!h) return 1;
  if (bytes > 0 && !ws) return 7;
  std::lock_guard<std::mutex> l(mu);
  if (bytes > 0) {  // the buffer must be one device allocation
    auto it = allocations.upper_bound((CUdeviceptr)(uintptr_t)ws);
    if (it == allocations.begin()) return 7;
    --it;
    if ((uintptr_t)ws + bytes > it->first + it->second.bytes) return 7;
  }
  return 0;
}

TS_API int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int atype,
                        int lda, const void* B, int btype, int ldb, const void* beta, void* C, int ctype, int ldc,
                        int compute, int algo) {
  if (!h) return 1;
  if (int s = gemmArgs(ta, tb, m, n, k, atype, lda, btype, ldb, ctype, ldc, compute, algo)) return s;
  float al = *(const float*)alpha, be = *(const float*)beta;
  std::lock_guard<std::mutex> l(mu);
  run([=] {
    if (!nullDevice())
      ts_emu_gemm(ta, tb, m, n, k, al, (uintptr_t)A, atype, lda, (uintptr_t)B, btype, ldb, be, (uintptr_t)C,
                  ctype, ldc);
    return (int)kSuccess;
  });
  return 0;
}

TS_API int cublasGemmStridedBatchedEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha,
                                      const void* A, int atype, int lda, long long strideA, const void* B, int btype,
                                      int ldb, long long strideB, const void* beta, void* C, int ctype, int ldc,
                                      long long strideC, int count, int compute, int algo) {
  if (!h) return 1;
  if (int s = gemmArgs(ta, tb, m, n, k, atype, lda, btype, ldb, ctype, ldc, compute, algo)) return s;
  if (count < 0) return 7;
  float al = *(const float*)alpha, be = *(const float*)beta;
  size_t as = atype == 0 ? 4 : 2, cs = ctype == 0 ? 4 : 2;
  std::lock_guard<std::mutex> l(mu);
  run([=] {
    for (int i = 0; i < count; i++)
      ts_emu_gemm(ta, tb, m, n, k, al, (uintptr_t)A + i * strideA * as, atype, lda, (uintptr_t)B + i * strideB * as,
                  btype, ldb, be, (uintptr_t)C + i * strideC * cs, ctype, ldc);
    return (int)kSuccess;
  });
  return 0;
}
