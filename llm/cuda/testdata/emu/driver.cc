// driver.cc: the CUDA driver calls llm/cuda binds, with the prototypes of
// NVIDIA's cuda.h, running on the host emulator (emu.cc); blas.cc and
// nvrtc.cc add cuBLAS and NVRTC. Built together with emu.cc, the
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "device.h"

typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUevent;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUgraph;
typedef void* CUgraphExec;

namespace tsdev {

const char kImageMarker[] = "tinyserve-cuda-emulator image\n";
std::mutex mu;
bool initialized;
std::map<CUdeviceptr, Allocation> allocations;

namespace {

int nullMode = -1;  // -1: not yet read from the environment

}  // namespace

bool nullDevice() {
  if (nullMode < 0) {
    const char* e = getenv("TINYSERVE_CUDA_EMU_NULL");
    nullMode = e && strcmp(e, "1") == 0;
  }
  return nullMode == 1;
}

void setNull(bool on) { nullMode = on; }

namespace {

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

size_t memLimit;  // the emulated device's memory
size_t memUsed;

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

size_t deviceMemory() {
  if (!memLimit) {
    const char* v = getenv("TINYSERVE_CUDA_EMU_MEMORY_MB");
    long mb = v ? atol(v) : 0;
    memLimit = (size_t)(mb > 0 ? mb : 2048) << 20;
  }
  return memLimit;
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

int run(std::function<int()> work) {
  if (capturing) {
    captured.push_back(std::move(work));
    return kSuccess;
  }
  return work();
}

}  // namespace tsdev

using namespace tsdev;

#define CU_API TS_API CUresult

// ts_emu_set_null turns the null device on or off, for tests that cannot
// set the environment of the C library (a Go binary without cgo).
TS_API void ts_emu_set_null(int on) { setNull(on != 0); }

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
// 16 bytes), so that a kernel overrunning a buffer faults. The memory is
// filled with 0xff bytes (NaN as float32, float16 and bfloat16, -1 as an
// int32), not left zero as mmap leaves it: a GPU's cuMemAlloc returns
// whatever the memory held (an earlier allocation's data within a
// process), so a kernel or copy that reads what nothing wrote must fail
// here rather than read zeros that happen to be right.
CU_API cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (!p || bytes == 0) return kInvalidValue;
  std::lock_guard<std::mutex> l(mu);
  if (memUsed + bytes > deviceMemory()) return kOutOfMemory;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t size = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  mprotect((char*)m + size, page, PROT_NONE);
  memset(m, 0xff, size);
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

// cuMemAllocHost_v2's memory is poisoned as cuMemAlloc_v2's is: the
// driver's page-locked memory is not zeroed either.
CU_API cuMemAllocHost_v2(void** p, size_t bytes) {
  if (!p || bytes == 0) return kInvalidValue;
  *p = malloc(bytes);
  if (!*p) return kOutOfMemory;
  memset(*p, 0xff, bytes);
  return kSuccess;
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

// Drivers since CUDA 13's headers export cuEventElapsedTime_v2 (the name
// those headers map the call to) beside the old one; built with
// -DTS_EMU_NO_EVENT_V2 the emulator is an older driver, with only the old.
#ifndef TS_EMU_NO_EVENT_V2
CU_API cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) { return cuEventElapsedTime(ms, start, end); }
#endif

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
