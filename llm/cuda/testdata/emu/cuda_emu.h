// cuda_emu.h: just enough of CUDA C for kernels/decoder.cu to compile as host
// C++ and run under emu.cc's scheduler. Each CUDA thread of a block is a
// fiber; the fibers of one block run one at a time on the calling OS
// thread, switching only at __syncthreads and warp shuffles, so blocks and
// their shared memory need no locks. This is a test device: it checks the
// kernels' indexing, paging, masking, reductions and barriers, not their
// speed, and its libm may differ from CUDA's in the last bits.
#ifndef TS_CUDA_EMU_H
#define TS_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <chrono>

#define TS_EMULATOR 1

#define __global__
#define __device__
#define __forceinline__ inline
// One copy per kernel instantiation: blocks run one after another, so the
// copy is the running block's shared memory.
#define __shared__ static

namespace tsemu {

struct Dim3 {
  unsigned x, y, z;
};

// The running fiber's coordinates, updated at every switch.
extern Dim3 threadIdx, blockIdx, blockDim, gridDim;

// dynamicShared is the running block's dynamic shared memory, filled with
// NaNs before the block starts so that reading an unwritten word shows.
void* dynamicShared();

// syncthreads waits for every live thread of the block.
void syncthreads();

// exchange publishes v for the calling lane and returns lane src's value,
// after every live lane of the warp has published; mask must be full.
uint64_t exchange(unsigned mask, uint64_t v, int src);

template <typename T>
T shflXor(unsigned mask, T v, int laneMask) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  uint64_t got = exchange(mask, bits, (int)((threadIdx.x & 31u) ^ (unsigned)laneMask));
  T r;
  memcpy(&r, &got, sizeof r);
  return r;
}

}  // namespace tsemu

using tsemu::blockDim;
using tsemu::blockIdx;
using tsemu::gridDim;
using tsemu::threadIdx;

#define TS_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(tsemu::dynamicShared())
#define __syncthreads() tsemu::syncthreads()

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int laneMask) {
  return tsemu::shflXor(mask, v, laneMask);
}

inline float __uint_as_float(unsigned int u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  memcpy(&u, &f, 4);
  return u;
}

inline double rsqrt(double x) { return 1.0 / sqrt(x); }

// IEEE float16 through GCC's _Float16, which rounds to nearest even like
// PTX cvt.rn.f16.f32.
inline float halfToFloat(unsigned short x) {
  _Float16 h;
  memcpy(&h, &x, 2);
  return (float)h;
}

inline unsigned short floatToHalf(float f) {
  _Float16 h = (_Float16)f;
  unsigned short x;
  memcpy(&x, &h, 2);
  return x;
}

// PTX prmt.b32 in its default mode (CUDA's __byte_perm): byte k of the
// result is byte (s >> 4k) & 7 of the eight bytes y:x, x's bytes first;
// with bit 3 of the selector set, that byte's sign replicated instead.
inline unsigned int bytePerm(unsigned int x, unsigned int y, unsigned int s) {
  uint64_t v = ((uint64_t)y << 32) | x;
  unsigned int r = 0;
  for (int k = 0; k < 4; k++) {
    unsigned int sel = (s >> (4 * k)) & 15u;
    unsigned int b = (unsigned int)(v >> (8 * (sel & 7u))) & 0xffu;
    if (sel & 8u) b = (b & 0x80u) ? 0xffu : 0u;
    r |= b << (8 * k);
  }
  return r;
}

// The GPU's %globaltimer: the host's steady clock in nanoseconds.
inline unsigned long long globalTimerNs() {
  return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#endif
