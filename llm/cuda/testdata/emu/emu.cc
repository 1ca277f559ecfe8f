// emu.cc: a host emulator for the CUDA C kernels in kernels/decoder.cu, built
// by the llm/cuda tests (emu_test.go) with g++ into a shared library that
// they open with purego. It runs each launch's grid block by block; the
// threads of a block are fibers that switch only at __syncthreads and warp
// shuffles (see cuda_emu.h), in forward or reverse thread order, so a
// kernel that reads shared memory before the barrier that orders it gives
// different results in the two orders. It also stands in for the two
// cuBLAS calls the backend makes (a plain column-major GEMM with float64
// sums, or float32 sums in one of two orders: ts_emu_set_gemm_order).
//
// Build: g++ -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -I<dir of
// decoder.cu and kernels.inc> -I<this dir> emu.cc [driver.cc blas.cc
// nvrtc.cc], where kernels.inc lists the kernels as TS_EMU_KERNEL(name)
// lines. The three optional files add the CUDA driver, cuBLAS and NVRTC
// entry points the backend binds, so that the library can stand in for
// libcuda.so.1, libcublas.so and libnvrtc.so (bench/gpu/emu-libs.sh).

#include "cuda_emu.h"

#include "decoder.cu"

#include "emu_api.h"

#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <utility>
#include <vector>

#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif

// tsemu_switch saves the callee-saved registers on the current stack,
// stores its stack pointer in *save and resumes the context whose stack
// pointer is to. The SSE and x87 control words are left alone: the kernels
// never change them, so every fiber runs with the caller's.
extern "C" void tsemu_switch(void** save, void* to);
asm(R"(
  .text
  .globl tsemu_switch
  .hidden tsemu_switch
  .type tsemu_switch, @function
tsemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tsemu_switch, .-tsemu_switch
)");

namespace tsemu {

Dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

enum State { kReady, kAtSync, kAtWarp, kDone };

struct Fiber {
  void* sp;
  State state;
  Dim3 idx;    // threadIdx
  int parity;  // which exchange buffer the next shuffle uses
};

const size_t kStackBytes = 64 << 10;

std::vector<Fiber> fibers;
std::vector<char*> stacks;
void* schedulerSP;
int current;
std::vector<unsigned char> sharedMem;
uint64_t slots[2][1024];  // warp exchange: two buffers, one slot per thread
void (*invoke)(void**);
void* params[32];
std::string failure;  // the launch's first error; stops it

void fail(const std::string& msg) {
  if (failure.empty()) failure = msg;
}

void yield() { tsemu_switch(&fibers[current].sp, schedulerSP); }

void fiberMain() {
  invoke(params);
  fibers[current].state = kDone;
  yield();
  abort();  // a finished fiber is never resumed
}

// start prepares fiber i to enter fiberMain on its own stack, laid out as
// tsemu_switch leaves a suspended context.
void start(int i) {
  // Each stack's top is offset by a different multiple of 64 bytes: stacks
  // malloc'ed kStackBytes apart would otherwise put every fiber's live
  // frames in the same cache sets, and a block's round of switches through
  // its threads would miss the cache at every one.
  uintptr_t top = (uintptr_t)(stacks[i] + kStackBytes - 64 * (i % 61)) & ~(uintptr_t)15;
  uint64_t* sp = (uint64_t*)top;
  sp[-1] = 0;                    // keeps fiberMain's frame 16-byte aligned
  sp[-2] = (uint64_t)fiberMain;  // tsemu_switch's ret goes here
  for (int r = 3; r <= 8; r++) sp[-r] = 0;  // rbp, rbx, r12..r15
  fibers[i].sp = &sp[-8];
  fibers[i].state = kReady;
  fibers[i].idx = {i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y)};
  fibers[i].parity = 0;
}

// releaseOne moves the threads past one barrier they all reached: a warp
// whose live lanes all wait in a shuffle, else the block when every live
// thread waits in __syncthreads. It reports whether it released any.
bool releaseOne(int n) {
  bool released = false;
  for (int w = 0; w < n; w += 32) {
    int end = w + 32 < n ? w + 32 : n, live = 0, atWarp = 0;
    for (int t = w; t < end; t++) {
      live += fibers[t].state != kDone;
      atWarp += fibers[t].state == kAtWarp;
    }
    if (live > 0 && atWarp == live) {
      for (int t = w; t < end; t++)
        if (fibers[t].state == kAtWarp) fibers[t].state = kReady;
      released = true;
    }
  }
  if (released) return true;
  int live = 0, atSync = 0;
  for (int t = 0; t < n; t++) {
    live += fibers[t].state != kDone;
    atSync += fibers[t].state == kAtSync;
  }
  if (live > 0 && atSync == live) {
    for (int t = 0; t < n; t++)
      if (fibers[t].state == kAtSync) fibers[t].state = kReady;
    return true;
  }
  if (live > 0) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "deadlock in block (%u,%u,%u): of %d live threads %d wait in __syncthreads, the rest in a "
             "shuffle their warp does not finish",
             blockIdx.x, blockIdx.y, blockIdx.z, live, atSync);
    fail(msg);
  }
  return false;
}

void runBlock(int n, bool reverse) {
  for (int t = 0; t < n; t++) start(t);
  if (!sharedMem.empty()) memset(sharedMem.data(), 0xff, sharedMem.size());  // NaN
  for (;;) {
    for (int k = 0; k < n; k++) {
      int t = reverse ? n - 1 - k : k;
      if (fibers[t].state != kReady) continue;
      current = t;
      threadIdx = fibers[t].idx;
      tsemu_switch(&schedulerSP, fibers[t].sp);
      if (!failure.empty()) return;
    }
    if (!releaseOne(n)) return;
  }
}

}  // namespace

void* dynamicShared() {
  if (sharedMem.empty()) fail("kernel uses dynamic shared memory but the launch gave none");
  return sharedMem.data();
}

void syncthreads() {
  fibers[current].state = kAtSync;
  yield();
}

uint64_t exchange(unsigned mask, uint64_t v, int src) {
  if (mask != 0xffffffffu) {
    fail("shuffle with a partial mask, which the emulator does not model");
    yield();
  }
  int warp = current & ~31;
  if (warp + 32 > (int)(blockDim.x * blockDim.y * blockDim.z)) {
    fail("shuffle in a partial warp");
    yield();
  }
  // Alternate buffers, so one barrier per shuffle suffices: a lane can
  // write this buffer again only two shuffles on, after every lane has
  // published in the next one, which each does after reading this one.
  uint64_t* buf = slots[fibers[current].parity];
  fibers[current].parity ^= 1;
  buf[current] = v;
  fibers[current].state = kAtWarp;
  yield();  // every lane has published
  return buf[warp + src];
}

}  // namespace tsemu

namespace {

template <typename... A, size_t... I>
void invokeWith(void (*f)(A...), void** p, std::index_sequence<I...>) {
  f(*static_cast<A*>(p[I])...);
}

template <typename... A>
void invokeKernel(void (*f)(A...), void** p) {
  invokeWith(f, p, std::index_sequence_for<A...>{});
}

template <typename... A>
constexpr int argCount(void (*)(A...)) {
  return sizeof...(A);
}

template <typename... A>
struct ArgSizes {
  static constexpr unsigned char bytes[sizeof...(A) + 1] = {(unsigned char)sizeof(A)..., 0};
};

template <typename... A>
constexpr const unsigned char* argSizes(void (*)(A...)) {
  return ArgSizes<A...>::bytes;
}

struct Kernel {
  const char* name;
  int nargs;
  const unsigned char* sizes;
  void (*invoke)(void**);
};

#define TS_EMU_KERNEL(K) {#K, argCount(&K), argSizes(&K), [](void** p) { invokeKernel(&K, p); }},
const Kernel kernels[] = {
#include "kernels.inc"
};

const Kernel* find(const char* name) {
  for (const Kernel& k : kernels)
    if (strcmp(k.name, name) == 0) return &k;
  return nullptr;
}

// loadAs reads element i of an array of cudaDataType Type (0 float32,
// 2 float16, 14 bfloat16).
template <int Type>
inline float loadAs(uintptr_t p, long long i) {
  if (Type == 0) return ((const float*)p)[i];
  if (Type == 2) return halfToFloat(((const unsigned short*)p)[i]);
  return __uint_as_float((unsigned)((const unsigned short*)p)[i] << 16);
}

// addColumns adds b[l]·op(A)[:, l] over l to acc, op(A) being m×k: each
// acc[i] sums its products in the order of l. A transposed A is walked row
// by row (the same sums, in the same order), so that an LM head of 150,000
// rows streams through memory instead of missing the cache at every load.
template <int Type>
void addColumns(double* acc, const float* b, uintptr_t A, int m, int k, int lda, bool trans) {
  if (trans) {
    for (int i = 0; i < m; i++) {
      double s = acc[i];
      for (int l = 0; l < k; l++) s += (double)loadAs<Type>(A, l + (long long)i * lda) * (double)b[l];
      acc[i] = s;
    }
    return;
  }
  for (int l = 0; l < k; l++) {
    double bl = b[l];
    for (int i = 0; i < m; i++) acc[i] += (double)loadAs<Type>(A, i + (long long)l * lda) * bl;
  }
}

// gemmOrder is how ts_emu_gemm sums each dot product (ts_emu_set_gemm_order).
int gemmOrder = TS_EMU_GEMM_FLOAT64;

// dot32 is one dot product of op(A)'s row i with b summed in float32 as a
// GPU's GEMM does, in the order gemmOrder names.
template <int Type>
float dot32(const float* b, uintptr_t A, int i, int k, int lda, bool trans) {
  auto a = [&](int l) { return loadAs<Type>(A, trans ? l + (long long)i * lda : i + (long long)l * lda); };
  if (gemmOrder == TS_EMU_GEMM_FLOAT32) {
    float s = 0;
    for (int l = 0; l < k; l++) s = fmaf(a(l), b[l], s);
    return s;
  }
  // Split-K: four slices of k, each summed with fused multiply-adds, then
  // added last to first.
  float part[4] = {0, 0, 0, 0};
  int slice = (k + 3) / 4;
  for (int l = 0; l < k; l++) part[l / slice] = fmaf(a(l), b[l], part[l / slice]);
  return ((part[3] + part[2]) + part[1]) + part[0];
}

float load(uintptr_t p, long long i, int type) {
  switch (type) {
    case 0:
      return loadAs<0>(p, i);
    case 2:
      return loadAs<2>(p, i);
    default:
      return loadAs<14>(p, i);
  }
}

void store(uintptr_t p, long long i, int type, float v) {
  switch (type) {
    case 0:
      ((float*)p)[i] = v;
      break;
    case 2:
      ((unsigned short*)p)[i] = floatToHalf(v);
      break;
    default:
      ((unsigned short*)p)[i] = BF16::st(v);
  }
}

}  // namespace

TS_API int ts_emu_kernel_args(const char* name) {
  const Kernel* k = find(name);
  return k ? k->nargs : -1;
}

TS_API int ts_emu_kernel_arg_size(const char* name, int i) {
  const Kernel* k = find(name);
  return k && i >= 0 && i < k->nargs ? k->sizes[i] : -1;
}

TS_API int ts_emu_launch(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, const uint64_t* args, int nargs, int reverse, char* err,
                             int errLen) {
  using namespace tsemu;
  failure.clear();
  const Kernel* k = find(name);
  int n = (int)(bx * by * bz);
  if (!k) {
    fail(std::string("no kernel ") + name);
  } else if (nargs != k->nargs) {
    fail(std::string(name) + ": " + std::to_string(nargs) + " arguments, the kernel takes " + std::to_string(k->nargs));
  } else if (n <= 0 || n > 1024 || gx == 0 || gy == 0 || gz == 0) {
    fail(std::string(name) + ": invalid launch shape");
  } else if (shared > 48 * 1024) {
    fail(std::string(name) + ": " + std::to_string(shared) + " bytes of dynamic shared memory, over the default 48 KiB");
  }
  if (failure.empty()) {
    for (int i = 0; i < nargs; i++) params[i] = (void*)&args[i];
    invoke = k->invoke;
    if ((int)fibers.size() < n) fibers.resize(n);
    while ((int)stacks.size() < n) stacks.push_back((char*)malloc(kStackBytes));
    sharedMem.assign(shared, 0);
    gridDim = {gx, gy, gz};
    blockDim = {bx, by, bz};
    long long blocks = (long long)gx * gy * gz;
    for (long long b = 0; b < blocks && failure.empty(); b++) {
      long long l = reverse ? blocks - 1 - b : b;
      blockIdx = {(unsigned)(l % gx), (unsigned)(l / gx % gy), (unsigned)(l / ((long long)gx * gy))};
      runBlock(n, reverse != 0);
    }
  }
  if (failure.empty()) return 0;
  snprintf(err, errLen, "%s", failure.c_str());
  return 1;
}

TS_API void ts_emu_set_gemm_order(int order) { gemmOrder = order; }

TS_API void ts_emu_gemm(int ta, int tb, int m, int n, int k, float alpha, uintptr_t A, int atype, int lda,
                            uintptr_t B, int btype, int ldb, float beta, uintptr_t C, int ctype, int ldc) {
  std::vector<double> acc(m);
  std::vector<float> col(k);
  for (int j = 0; j < n; j++) {
    for (int l = 0; l < k; l++) col[l] = load(B, tb ? j + (long long)l * ldb : l + (long long)j * ldb, btype);
    for (int i = 0; i < m; i++) acc[i] = 0;
    if (gemmOrder != TS_EMU_GEMM_FLOAT64) {
      for (int i = 0; i < m; i++) {
        bool tr = ta != 0;
        acc[i] = atype == 0   ? dot32<0>(col.data(), A, i, k, lda, tr)
                 : atype == 2 ? dot32<2>(col.data(), A, i, k, lda, tr)
                              : dot32<14>(col.data(), A, i, k, lda, tr);
      }
    } else if (atype == 0) {
      addColumns<0>(acc.data(), col.data(), A, m, k, lda, ta != 0);
    } else if (atype == 2) {
      addColumns<2>(acc.data(), col.data(), A, m, k, lda, ta != 0);
    } else {
      addColumns<14>(acc.data(), col.data(), A, m, k, lda, ta != 0);
    }
    for (int i = 0; i < m; i++) {
      long long ci = i + (long long)j * ldc;
      float v = alpha * (float)acc[i];
      if (beta != 0) v += beta * load(C, ci, ctype);
      store(C, ci, ctype, v);
    }
  }
}
