// nvrtc.cc: the NVRTC calls llm/cuda binds, with the prototypes of NVIDIA's
// nvrtc.h. The "compiler" checks its options the way the backend passes
// them and returns the marker image that cuModuleLoadData accepts: the
// kernels were compiled into this library (emu.cc) from the same source.

#include <string.h>

#include <string>

#include "device.h"

using namespace tsdev;

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
