// emu_api.h: the emulator's entry points, for the Go tests (through purego)
// and for driver.cc.
#ifndef TS_EMU_API_H
#define TS_EMU_API_H

#include <stdint.h>

#define TS_API extern "C" __attribute__((visibility("default")))

// ts_emu_kernel_args returns the number of parameters of kernel name, or
// -1 when the module has no such kernel (cuModuleGetFunction's NOT_FOUND).
TS_API int ts_emu_kernel_args(const char* name);

// ts_emu_kernel_arg_size returns the size in bytes of parameter i of
// kernel name, or -1.
TS_API int ts_emu_kernel_arg_size(const char* name, int i);

// ts_emu_launch runs kernel name over the grid now. args holds the
// parameter values, one 8-byte slot each (a 4-byte int in the low half).
// reverse runs the blocks, and each block's threads, in reverse order. It
// returns 0, or 1 with a message in err.
TS_API int ts_emu_launch(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shared, const uint64_t* args, int nargs, int reverse, char* err,
                         int errLen);

// ts_emu_gemm is cublasGemmEx with float32 compute, column-major:
// C = alpha·op(A)·op(B) + beta·C, each dot product summed as
// ts_emu_set_gemm_order says; types are cudaDataType values (0 float32,
// 2 float16, 14 bfloat16).
TS_API void ts_emu_gemm(int ta, int tb, int m, int n, int k, float alpha, uintptr_t A, int atype, int lda,
                        uintptr_t B, int btype, int ldb, float beta, uintptr_t C, int ctype, int ldc);

// The orders of ts_emu_set_gemm_order. A GPU sums in float32, in an order
// of its own: float64 sums (the default) keep the emulator's GEMMs
// independent of order, so that tests comparing it with the Go emulation
// can be strict; the two float32 orders bracket what cuBLAS does (one
// thread's sequential fused multiply-adds along k, or split-K), so that
// the goldens' float32 tolerances are checked against a GPU's rounding.
#define TS_EMU_GEMM_FLOAT64 0
#define TS_EMU_GEMM_FLOAT32 1
#define TS_EMU_GEMM_FLOAT32_SPLIT_K 2

// ts_emu_set_gemm_order sets how ts_emu_gemm sums, for the GEMMs after it.
TS_API void ts_emu_set_gemm_order(int order);

#endif
