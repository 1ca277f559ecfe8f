// device.h: the emulated device's state shared by driver.cc, blas.cc and
// nvrtc.cc (the CUDA driver, cuBLAS and NVRTC entry points).
#ifndef TS_EMU_DEVICE_H
#define TS_EMU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "emu_api.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void* CUstream;

namespace tsdev {

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

// kImageMarker is the "compiled image" nvrtc.cc returns and
// cuModuleLoadData accepts.
extern const char kImageMarker[31];

// mu serialises the calls: the emulator's state is global.
extern std::mutex mu;

// initialized is set by cuInit.
extern bool initialized;

// Allocation is one cuMemAlloc: a mapping whose data ends at a guard page.
struct Allocation {
  void* mapping;
  size_t mapped;
  size_t bytes;
};

// allocations maps each allocation's device address to it.
extern std::map<CUdeviceptr, Allocation> allocations;

// run executes work now, or records it while a stream is being captured
// into a graph. The caller holds mu.
int run(std::function<int()> work);

// nullDevice reports whether kernels and GEMMs are skipped
// (TINYSERVE_CUDA_EMU_NULL=1, or ts_emu_set_null); setNull sets it.
bool nullDevice();
void setNull(bool on);

}  // namespace tsdev

#endif
