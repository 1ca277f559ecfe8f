// driver.cc: the CUDA driver, cuBLAS and NVRTC calls llm/cuda binds, with
// the prototypes of NVIDIA's headers (cuda.h, cublas_api.h, nvrtc.h),
// running on the host emulator (emu.cc). Built together with emu.cc, the
// library can be installed under the names libcuda.so.1, libcublas.so.12
// and libnvrtc.so.12 in a folder that TINYSERVE_CUDA_LIB_DIR points at, so
// that unmodified binaries (cuda.test, gpubench, cmd/serve, cmd/sweep) run
// "on a GPU" here: their purego calls go through the same C ABI as on a
// real one. It is a test device: one emulated GPU, work runs synchronously
// at the call, and the NVRTC "compiler" hands back a marker that
// cuModuleLoadData accepts, since the kernels were compiled into this
// library from the same source.
//
// With TINYSERVE_CUDA_EMU_NULL=1 in the environment, kernels and GEMMs are
// checked and then skipped: the device does no work, so a benchmark
// measures only the host side of a step (the backend's Go code and its
// purego calls), not including a real driver's own launch cost.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "emu_api.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;
typedef void* CUevent;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUgraph;
typedef void* CUgraphExec;

namespace {

// CUresult values (cuda.h).
enum {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kInvalidDevice = 101,
  kInvalidImage = 200,
  kInvalidHandle = 400,
  kNotFound = 500,
  kLaunchFailed = 719,
  kCaptureUnsupported = 900,
  kCaptureInvalidated = 901,
};

struct ErrorName {
  int code;
  const char* name;
  const char* message;
};

const ErrorName errorNames[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kInvalidImage, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {kNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {kCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {kCaptureInvalidated, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
};

const char kImageMarker[] = "tinyserve-cuda-emulator image\n";

std::mutex mu;  // one call at a time: the emulator's state is global
bool initialized;
size_t memLimit;  // the emulated device's memory
size_t memUsed;

struct Allocation {
  void* mapping;
  size_t mapped;
  size_t bytes;
};
std::map<CUdeviceptr, Allocation> allocations;

struct Function {
  std::string name;
  int nargs;
  std::vector<int> sizes;
};

// Work recorded while a stream is being captured, and graphs.
bool capturing;
CUstream captureStream;
std::vector<std::function<int()>> captured;
struct Graph {
  std::vector<std::function<int()>> work;
};

int nullMode = -1;  // -1: not yet read from the environment

// nullDevice reports whether kernels and GEMMs are skipped.
bool nullDevice() {
  if (nullMode < 0) {
    const char* e = getenv("TINYSERVE_CUDA_EMU_NULL");
    nullMode = e && strcmp(e, "1") == 0;
  }
  return nullMode == 1;
}

size_t deviceMemory() {
  if (!memLimit) {
    const char* v = getenv("TINYSERVE_CUDA_EMU_MEMORY_MB");
    long mb = v ? atol(v) : 0;
    memLimit = (size_t)(mb > 0 ? mb : 2048) << 20;
  }
  return memLimit;
}

// run executes work now, or records it during capture.
int run(std::function<int()> work) {
  if (capturing) {
    captured.push_back(std::move(work));
    return kSuccess;
  }
  return work();
}

int launchNow(const Function& f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
              unsigned shared, const std::vector<uint64_t>& slots) {
  if (nullDevice()) return kSuccess;
  char err[256];
  if (ts_emu_launch(f.name.c_str(), gx, gy, gz, bx, by, bz, shared, slots.data(), (int)slots.size(), 0, err,
                    sizeof err) != 0) {
    fprintf(stderr, "cuda emulator: %s: %s\n", f.name.c_str(), err);
    return kLaunchFailed;
  }
  return kSuccess;
}

}  // namespace

#define CU_API TS_API CUresult

// ts_emu_set_null turns the null device on or off, for tests that cannot
// set the environment of the C library (a Go binary without cgo).
TS_API void ts_emu_set_null(int on) { nullMode = on != 0; }

// --- errors, devices, contexts ---

CU_API cuGetErrorName(CUresult error, const char** str) {
  for (const ErrorName& e : errorNames)
    if (e.code == error) {
      *str = e.name;
      return kSuccess;
    }
  *str = nullptr;
  return kInvalidValue;
}

CU_API cuGetErrorString(CUresult error, const char** str) {
  for (const ErrorName& e : errorNames)
    if (e.code == error) {
      *str = e.message;
      return kSuccess;
    }
  *str = nullptr;
  return kInvalidValue;
}

CU_API cuInit(unsigned int flags) {
  if (flags != 0) return kInvalidValue;
  std::lock_guard<std::mutex> l(mu);
  initialized = true;
  return kSuccess;
}

CU_API cuDriverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = 12080;
  return kSuccess;
}

CU_API cuDeviceGetCount(int* count) {
  if (!initialized) return kNotInitialized;
  *count = 1;
  return kSuccess;
}

CU_API cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!initialized) return kNotInitialized;
  if (ordinal != 0) return kInvalidDevice;
  *dev = 0;
  return kSuccess;
}

CU_API cuDeviceGetAttribute(int* v, int attr, CUdevice dev) {
  if (dev != 0) return kInvalidDevice;
  switch (attr) {
    case 75:  // COMPUTE_CAPABILITY_MAJOR
      *v = 9;
      break;
    case 76:  // COMPUTE_CAPABILITY_MINOR
      *v = 0;
      break;
    case 16:  // MULTIPROCESSOR_COUNT
      *v = 1;
      break;
    case 1:  // MAX_THREADS_PER_BLOCK
      *v = 1024;
      break;
    case 8:  // MAX_SHARED_MEMORY_PER_BLOCK
      *v = 48 * 1024;
      break;
    case 10:  // WARP_SIZE
      *v = 32;
      break;
    default:
      *v = 0;
  }
  return kSuccess;
}

CU_API cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (dev != 0) return kInvalidDevice;
  if (!name || len <= 0) return kInvalidValue;
  snprintf(name, len, "%s", "tinyserve CUDA emulator (host CPU)");
  return kSuccess;
}

CU_API cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (dev != 0) return kInvalidDevice;
  *bytes = deviceMemory();
  return kSuccess;
}

CU_API cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!initialized) return kNotInitialized;
  if (dev != 0) return kInvalidDevice;
  static int context;
  *ctx = &context;
  return kSuccess;
}

CU_API cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return dev == 0 ? kSuccess : kInvalidDevice; }

CU_API cuCtxSetCurrent(CUcontext) { return kSuccess; }

CU_API cuCtxSynchronize(void) { return kSuccess; }

// --- memory ---

// cuMemAlloc_v2 maps fresh memory whose end meets a PROT_NONE page (within
// 16 bytes), so that a kernel overrunning a buffer faults.
CU_API cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (!p || bytes == 0) return kInvalidValue;
  std::lock_guard<std::mutex> l(mu);
  if (memUsed + bytes > deviceMemory()) return kOutOfMemory;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t size = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  mprotect((char*)m + size, page, PROT_NONE);
  CUdeviceptr base = (CUdeviceptr)((uintptr_t)m + ((size - bytes) & ~(size_t)15));
  allocations[base] = {m, size + page, bytes};
  memUsed += bytes;
  *p = base;
  return kSuccess;
}

CU_API cuMemFree_v2(CUdeviceptr p) {
  std::lock_guard<std::mutex> l(mu);
  auto it = allocations.find(p);
  if (it == allocations.end()) return kInvalidValue;
  munmap(it->second.mapping, it->second.mapped);
  memUsed -= it->second.bytes;
  allocations.erase(it);
  return kSuccess;
}

CU_API cuMemGetInfo_v2(size_t* free, size_t* total) {
  std::lock_guard<std::mutex> l(mu);
  *total = deviceMemory();
  *free = *total - memUsed;
  return kSuccess;
}

CU_API cuMemAllocHost_v2(void** p, size_t bytes) {
  if (!p || bytes == 0) return kInvalidValue;
  *p = calloc(1, bytes);
  return *p ? kSuccess : kOutOfMemory;
}

CU_API cuMemFreeHost(void* p) {
  free(p);
  return kSuccess;
}

CU_API cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream) {
  std::lock_guard<std::mutex> l(mu);
  if (capturing) return kCaptureUnsupported;  // the backend never copies inside a graph
  memcpy((void*)(uintptr_t)dst, src, n);
  return kSuccess;
}

CU_API cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream) {
  std::lock_guard<std::mutex> l(mu);
  if (capturing) return kCaptureUnsupported;
  memcpy(dst, (const void*)(uintptr_t)src, n);
  return kSuccess;
}

CU_API cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream) {
  std::lock_guard<std::mutex> l(mu);
  return run([=] {
    memset((void*)(uintptr_t)dst, v, n);
    return (int)kSuccess;
  });
}

// --- streams and events ---

CU_API cuStreamCreate(CUstream* s, unsigned int) {
  *s = new int(0);
  return kSuccess;
}

CU_API cuStreamDestroy_v2(CUstream s) {
  delete (int*)s;
  return kSuccess;
}

CU_API cuStreamSynchronize(CUstream) { return capturing ? kCaptureUnsupported : kSuccess; }

CU_API cuEventCreate(CUevent* e, unsigned int) {
  *e = new std::chrono::steady_clock::time_point();
  return kSuccess;
}

CU_API cuEventRecord(CUevent e, CUstream) {
  *(std::chrono::steady_clock::time_point*)e = std::chrono::steady_clock::now();
  return kSuccess;
}

CU_API cuEventSynchronize(CUevent) { return kSuccess; }

CU_API cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  auto a = *(std::chrono::steady_clock::time_point*)start, b = *(std::chrono::steady_clock::time_point*)end;
  *ms = std::chrono::duration<float, std::milli>(b - a).count();
  return kSuccess;
}

CU_API cuEventDestroy_v2(CUevent e) {
  delete (std::chrono::steady_clock::time_point*)e;
  return kSuccess;
}

// --- modules and launches ---

CU_API cuModuleLoadData(CUmodule* m, const void* image) {
  if (!image) return kInvalidValue;
  const char* s = (const char*)image;
  // This library's own marker (its NVRTC), a cubin (ELF) or PTX from a
  // real NVRTC: the kernels inside are the ones compiled in here.
  if (strncmp(s, kImageMarker, sizeof kImageMarker - 1) != 0 && memcmp(s, "\x7f" "ELF", 4) != 0 &&
      !strstr(s, ".version")) {
    return kInvalidImage;
  }
  static int module;
  *m = &module;
  return kSuccess;
}

CU_API cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  int n = ts_emu_kernel_args(name);
  if (n < 0) return kNotFound;
  Function* fn = new Function{name, n, {}};
  for (int i = 0; i < n; i++) fn->sizes.push_back(ts_emu_kernel_arg_size(name, i));
  *f = fn;
  return kSuccess;
}

CU_API cuModuleUnload(CUmodule) { return kSuccess; }

// cuLaunchKernel copies the parameter values now, as the driver does, and
// runs the kernel (or records it during capture).
CU_API cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream, void** params, void** extra) {
  if (!f) return kInvalidHandle;
  if (extra) return kInvalidValue;  // the backend passes its arguments through params
  const Function& fn = *(const Function*)f;
  std::vector<uint64_t> slots(fn.nargs, 0);
  for (int i = 0; i < fn.nargs; i++) memcpy(&slots[i], params[i], fn.sizes[i]);
  std::lock_guard<std::mutex> l(mu);
  return run([=, &fn] { return launchNow(fn, gx, gy, gz, bx, by, bz, shared, slots); });
}

// --- graphs ---

CU_API cuStreamBeginCapture_v2(CUstream s, int mode) {
  std::lock_guard<std::mutex> l(mu);
  if (capturing || mode < 0 || mode > 2) return kInvalidValue;
  capturing = true;
  captureStream = s;
  captured.clear();
  return kSuccess;
}

CU_API cuStreamEndCapture(CUstream s, CUgraph* g) {
  std::lock_guard<std::mutex> l(mu);
  if (!capturing || s != captureStream) return kInvalidValue;
  capturing = false;
  *g = new Graph{std::move(captured)};
  captured.clear();
  return kSuccess;
}

CU_API cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long) {
  if (!g) return kInvalidValue;
  *e = new Graph(*(Graph*)g);
  return kSuccess;
}

CU_API cuGraphLaunch(CUgraphExec e, CUstream) {
  std::lock_guard<std::mutex> l(mu);
  if (capturing) return kCaptureUnsupported;
  for (auto& w : ((Graph*)e)->work) {
    int r = w();
    if (r != kSuccess) return r;
  }
  return kSuccess;
}

CU_API cuGraphExecDestroy(CUgraphExec e) {
  delete (Graph*)e;
  return kSuccess;
}

CU_API cuGraphDestroy(CUgraph g) {
  delete (Graph*)g;
  return kSuccess;
}

// --- cuBLAS ---

namespace {

const char* const cublasNames[] = {"CUBLAS_STATUS_SUCCESS", "CUBLAS_STATUS_NOT_INITIALIZED", nullptr,
                                   "CUBLAS_STATUS_ALLOC_FAILED", nullptr, nullptr, nullptr,
                                   "CUBLAS_STATUS_INVALID_VALUE", "CUBLAS_STATUS_ARCH_MISMATCH", nullptr, nullptr,
                                   nullptr, nullptr, "CUBLAS_STATUS_EXECUTION_FAILED", nullptr,
                                   "CUBLAS_STATUS_NOT_SUPPORTED"};

bool validType(int t) { return t == 0 || t == 2 || t == 14; }

// gemmArgs checks what cuBLAS checks for GemmEx with CUBLAS_COMPUTE_32F.
int gemmArgs(int ta, int tb, int m, int n, int k, int atype, int lda, int btype, int ldb, int ctype, int ldc,
             int compute) {
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0) return 7;
  if (!validType(atype) || !validType(btype) || !validType(ctype) || atype != btype) return 15;
  if (compute != 68) return 15;  // CUBLAS_COMPUTE_32F: the only one the backend uses
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
  if (int s = gemmArgs(ta, tb, m, n, k, atype, lda, btype, ldb, ctype, ldc, compute)) return s;
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
  if (int s = gemmArgs(ta, tb, m, n, k, atype, lda, btype, ldb, ctype, ldc, compute)) return s;
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

// --- NVRTC ---
//
// The "compiler" checks its options the way the backend passes them and
// returns the marker image: the kernels were compiled into this library.

namespace {

struct Program {
  std::string src, log;
  bool compiled = false;
};

const char* const nvrtcNames[] = {"NVRTC_SUCCESS",
                                  "NVRTC_ERROR_OUT_OF_MEMORY",
                                  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
                                  "NVRTC_ERROR_INVALID_INPUT",
                                  "NVRTC_ERROR_INVALID_PROGRAM",
                                  "NVRTC_ERROR_INVALID_OPTION",
                                  "NVRTC_ERROR_COMPILATION"};

int copyOut(const std::string& s, char* out) {
  if (!out) return 3;
  memcpy(out, s.data(), s.size());
  out[s.size()] = 0;
  return 0;
}

}  // namespace

TS_API const char* nvrtcGetErrorString(int r) {
  return r >= 0 && r < (int)(sizeof nvrtcNames / sizeof *nvrtcNames) ? nvrtcNames[r] : "NVRTC_ERROR unknown";
}

TS_API int nvrtcVersion(int* major, int* minor) {
  *major = 12;
  *minor = 8;
  return 0;
}

TS_API int nvrtcGetNumSupportedArchs(int* n) {
  *n = 1;
  return 0;
}

TS_API int nvrtcGetSupportedArchs(int* archs) {
  archs[0] = 90;
  return 0;
}

TS_API int nvrtcCreateProgram(void** prog, const char* src, const char* name, int numHeaders, const char* const*,
                              const char* const*) {
  if (!prog || !src || numHeaders != 0) return 3;
  *prog = new Program{src, "", false};
  return 0;
}

TS_API int nvrtcDestroyProgram(void** prog) {
  if (!prog || !*prog) return 4;
  delete (Program*)*prog;
  *prog = nullptr;
  return 0;
}

TS_API int nvrtcCompileProgram(void* prog, int n, const char* const* opts) {
  Program* p = (Program*)prog;
  if (!p) return 4;
  bool arch = false;
  for (int i = 0; i < n; i++) {
    if (!opts[i]) return 3;
    std::string o = opts[i];
    if (o.rfind("--gpu-architecture=", 0) == 0 || o.rfind("-arch=", 0) == 0) {
      arch = o.find("_90") != std::string::npos;
      if (!arch) {
        p->log = "tinyserve CUDA emulator: only sm_90/compute_90 is emulated, got " + o + "\n";
        return 6;
      }
    }
  }
  if (!arch) {
    p->log = "tinyserve CUDA emulator: no --gpu-architecture option\n";
    return 6;
  }
  p->compiled = true;
  return 0;
}

TS_API int nvrtcGetProgramLogSize(void* prog, size_t* n) {
  *n = ((Program*)prog)->log.size() + 1;
  return 0;
}

TS_API int nvrtcGetProgramLog(void* prog, char* out) { return copyOut(((Program*)prog)->log, out); }

TS_API int nvrtcGetPTXSize(void* prog, size_t* n) {
  if (!((Program*)prog)->compiled) return 4;
  *n = sizeof kImageMarker;
  return 0;
}

TS_API int nvrtcGetPTX(void* prog, char* out) {
  if (!((Program*)prog)->compiled) return 4;
  return copyOut(kImageMarker, out);
}

TS_API int nvrtcGetCUBINSize(void* prog, size_t* n) { return nvrtcGetPTXSize(prog, n); }

TS_API int nvrtcGetCUBIN(void* prog, char* out) { return nvrtcGetPTX(prog, out); }
