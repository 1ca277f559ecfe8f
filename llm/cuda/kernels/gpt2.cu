// GPT-2 forward kernels for tinyserve's CUDA backend (llm/cuda).
//
// Compiled at run time by NVRTC, so the file includes no headers: half and
// bfloat16 values are stored as unsigned short and converted with PTX cvt
// (float16: halfToFloat, floatToHalf) or bit arithmetic (bfloat16). Every
// kernel is a template over a storage type and instantiated as extern "C"
// <name>_f32 / _f16 / _bf16, so one compiled module serves every dtype. Arithmetic is float32 throughout;
// only weights, KV and GEMM inputs are stored in the narrow type.
//
// Batch layout (packed on the host, see meta.go): N token rows; for row i,
// tokens[i], pos[i] (its position in its sequence) and seq[i] (its
// sequence's index in the batch); block tables are [numSeqs][maxBlocks], so
// position p of sequence s is cache slot bt[s*maxBlocks + p/bs]*bs + p%bs.
// The KV cache of one layer is [numBlocks*bs][C], a head's slice at h*D.
//
// The tests also run this file on the host (llm/cuda/testdata/emu compiles
// it as C++ with a small CUDA shim); the emulator defines TS_EMULATOR and
// brings its own versions of the three hooks below, which have no portable
// C++ spelling.

#ifndef TS_EMULATOR
// TS_DYNAMIC_SHARED declares the kernel's dynamic shared memory.
#define TS_DYNAMIC_SHARED(T, name) extern __shared__ T name[]

// halfToFloat and floatToHalf convert IEEE float16, rounding to nearest even.
__device__ __forceinline__ float halfToFloat(unsigned short x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}
__device__ __forceinline__ unsigned short floatToHalf(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// globalTimerNs reads the GPU's global nanosecond timer.
__device__ __forceinline__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

struct F32 {
  typedef float T;
  static __device__ __forceinline__ float ld(T x) { return x; }
  static __device__ __forceinline__ T st(float f) { return f; }
};

struct F16 {
  typedef unsigned short T;
  static __device__ __forceinline__ float ld(T x) { return halfToFloat(x); }
  static __device__ __forceinline__ T st(float f) { return floatToHalf(f); }
};

struct BF16 {
  typedef unsigned short T;
  static __device__ __forceinline__ float ld(T x) { return __uint_as_float(((unsigned int)x) << 16); }
  static __device__ __forceinline__ T st(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (T)0x7fc0;  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);                          // round to nearest even
    return (T)(u >> 16);
  }
};

// blockSum adds v over the block; every thread gets the total. scratch
// holds 32 values. Blocks are multiples of 32 threads.
template <typename A>
__device__ __forceinline__ A blockSum(A v, A* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A t = 0;
  for (int w = 0; w < nw; w++) t += scratch[w];
  return t;
}

__device__ __forceinline__ float blockMax(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = scratch[0];
  for (int w = 1; w < nw; w++) t = fmaxf(t, scratch[w]);
  return t;
}

// embed: x[i] = wte[tokens[i]] + wpe[pos[i]]. Grid N.
template <typename S>
__device__ void embed(float* x, const typename S::T* wte, const typename S::T* wpe,
                      const int* tokens, const int* pos, int C) {
  int i = blockIdx.x;
  const typename S::T* te = wte + (long long)tokens[i] * C;
  const typename S::T* pe = wpe + (long long)pos[i] * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) x[(long long)i * C + c] = S::ld(te[c]) + S::ld(pe[c]);
}

// layernormRow writes LN(xr) * w + b to out, by the whole block. Sums in
// double, like the CPU reference, so the float32 mode matches it closely.
// Each thread reads only the elements c = threadIdx.x + k*blockDim.x, so a
// caller may have written those same elements just before without a
// barrier.
template <typename S>
__device__ void layernormRow(typename S::T* out, const float* xr, const typename S::T* w,
                             const typename S::T* b, int C, float eps, double* scratch) {
  double s = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += xr[c];
  double mean = blockSum(s, scratch) / C;
  double ss = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    double d = xr[c] - mean;
    ss += d * d;
  }
  double inv = rsqrt(blockSum(ss, scratch) / C + (double)eps);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float n = (float)((xr[c] - mean) * inv);
    out[c] = S::st(n * S::ld(w[c]) + S::ld(b[c]));
  }
}

// layernorm: out[r] = LN(x[rows ? rows[r] : r]) * w + b. Grid R. The
// optional row list gathers the sampled rows for the final LayerNorm, so
// the LM head runs on those rows only.
template <typename S>
__device__ void layernorm(typename S::T* out, const float* x, const int* rows,
                          const typename S::T* w, const typename S::T* b, int C, float eps) {
  __shared__ double scratch[32];
  int r = blockIdx.x;
  int src = rows ? rows[r] : r;
  layernormRow<S>(out + (long long)r * C, x + (long long)src * C, w, b, C, eps, scratch);
}

// add_layernorm: x[r] += in[r] + bias (a c_proj output joining the residual
// stream), then out[r] = LN(x[r]) * w + b, in one launch. Grid N.
template <typename S>
__device__ void add_layernorm(typename S::T* out, float* x, const float* in, const typename S::T* bias,
                              const typename S::T* w, const typename S::T* b, int C, float eps) {
  __shared__ double scratch[32];
  int r = blockIdx.x;
  float* xr = x + (long long)r * C;
  const float* ir = in + (long long)r * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) xr[c] += ir[c] + S::ld(bias[c]);
  layernormRow<S>(out + (long long)r * C, xr, w, b, C, eps, scratch);
}

// qkv_store adds the c_attn bias, keeps q (float32, [N][C]) for attention
// and writes k and v into the paged cache at each row's slot. Grid N.
template <typename S>
__device__ void qkv_store(float* __restrict__ q, const float* __restrict__ qkv,
                          const typename S::T* __restrict__ bias, typename S::T* __restrict__ kc,
                          typename S::T* __restrict__ vc, const int* pos, const int* seq, const int* bt,
                          int maxBlocks, int bs, int C) {
  int i = blockIdx.x;
  int p = pos[i];
  long long slot = (long long)bt[seq[i] * maxBlocks + p / bs] * bs + p % bs;
  const float* row = qkv + (long long)i * 3 * C;
#pragma unroll 4
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    q[(long long)i * C + c] = row[c] + S::ld(bias[c]);
    kc[slot * C + c] = S::st(row[C + c] + S::ld(bias[C + c]));
    vc[slot * C + c] = S::st(row[2 * C + c] + S::ld(bias[2 * C + c]));
  }
}

// Pack is W storage elements moved as one unit. With W*sizeof(T) = 16 a
// pack is one 16-byte load: a thread then has a whole 64-wide head row of
// float16 keys in flight in eight loads, where element by element it waited
// for 64 (a decode step's attention is bound by load latency, not by
// bandwidth).
template <typename T, int W>
struct alignas(W * sizeof(T)) Pack {
  T v[W];
};

// attentionRows is attention with W elements per load; the caller checked
// that head rows start on a multiple of W (D and C are multiples of W).
// sh is the dynamic shared memory: scores (then weights) and cache slots
// for npos positions, the scaled query, and blockDim*W partial outputs.
template <typename S, int W>
__device__ void attentionRows(typename S::T* out, const float* q, const typename S::T* kc,
                              const typename S::T* vc, const int* pos, const int* seq, const int* bt,
                              int maxBlocks, int bs, int C, int D, int npos, float scale, float* sh,
                              float* scratch) {
  typedef Pack<typename S::T, W> P;
  float* sc = sh;                   // [npos] scores, then weights
  int* slots = (int*)(sh + npos);   // [npos] each position's cache slot
  float* qs = sh + 2 * npos;        // [D] this head's query, scaled
  float* part = qs + D;             // [G*D] partial outputs, G*D <= blockDim*W
  int i = blockIdx.x, h = blockIdx.y;
  int p = pos[i];
  const int* table = bt + seq[i] * maxBlocks;
  for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = q[(long long)i * C + h * D + d] * scale;
  __syncthreads();
  int L = D / W;  // packs per head row
  // Scores: one position per thread, its key row read in L packs, all
  // issued before the first is used.
  float m = -3.0e38f;
  for (int j = threadIdx.x; j <= p; j += blockDim.x) {
    int slot = table[j / bs] * bs + j % bs;
    slots[j] = slot;
    const P* k = (const P*)(kc + (long long)slot * C + h * D);
    float dot = 0.f;
#pragma unroll 8
    for (int u = 0; u < L; u++) {
      P x = k[u];
#pragma unroll
      for (int e = 0; e < W; e++) dot += qs[u * W + e] * S::ld(x.v[e]);
    }
    sc[j] = dot;
    m = fmaxf(m, dot);
  }
  m = blockMax(m, scratch);  // also orders the writes to slots before the reads below
  float sum = 0.f;
  for (int j = threadIdx.x; j <= p; j += blockDim.x) {
    float e = expf(sc[j] - m);  // not __expf: the float32 mode is compared at 1e-5
    sc[j] = e;
    sum += e;
  }
  sum = blockSum(sum, scratch);  // also orders the writes to sc before the reads below
  // Weighted values: L threads share a position (a pack each), G positions
  // at a time, each group summing every G-th position into part.
  int G = blockDim.x / L;
  int lane = threadIdx.x % L, g = threadIdx.x / L;
  if (g < G) {
    float acc[W];
#pragma unroll
    for (int e = 0; e < W; e++) acc[e] = 0.f;
#pragma unroll 4
    for (int j = g; j <= p; j += G) {
      P x = ((const P*)(vc + (long long)slots[j] * C + h * D))[lane];
      float w = sc[j];
#pragma unroll
      for (int e = 0; e < W; e++) acc[e] += w * S::ld(x.v[e]);
    }
#pragma unroll
    for (int e = 0; e < W; e++) part[g * D + lane * W + e] = acc[e];
  }
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float t = 0.f;
    for (int k = 0; k < G; k++) t += part[k * D + d];
    out[(long long)i * C + h * D + d] = S::st(t / sum);
  }
}

// attention: causal attention of row i, head h (grid N x H) over positions
// 0..pos[i] of its own sequence, read through the block table. Rows of a
// prefill chunk see the chunk's own keys because qkv_store ran first.
// blockDim is at least D, in whole warps (blockSum and blockMax shuffle
// over full warps). Dynamic shared memory: (2*npos + D + blockDim*16/
// sizeof(T)) floats, npos >= pos[i]+1 (attentionShared in forward.go).
// Heads whose rows hold whole 16-byte packs (GPT-2's D = 64, every dtype)
// load them so; others element by element.
template <typename S>
__device__ void attention(typename S::T* out, const float* q, const typename S::T* kc,
                          const typename S::T* vc, const int* pos, const int* seq, const int* bt,
                          int maxBlocks, int bs, int C, int D, int npos, float scale) {
  TS_DYNAMIC_SHARED(float, sh);
  __shared__ float scratch[32];
  const int W = 16 / sizeof(typename S::T);
  if (D % W == 0 && C % W == 0) {
    attentionRows<S, W>(out, q, kc, vc, pos, seq, bt, maxBlocks, bs, C, D, npos, scale, sh, scratch);
  } else {
    attentionRows<S, 1>(out, q, kc, vc, pos, seq, bt, maxBlocks, bs, C, D, npos, scale, sh, scratch);
  }
}

// bias_act: out = act(in + bias) over an [rows][cols] float32 GEMM result;
// act is gelu_new (tanh form) when useErf is 0, exact erf GELU otherwise.
template <typename S>
__device__ void bias_act(typename S::T* out, const float* in, const typename S::T* bias,
                         int rows, int cols, int useErf) {
  long long n = (long long)rows * cols;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    float x = in[k] + S::ld(bias[k % cols]);
    float y;
    if (useErf) {
      y = 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    } else {
      y = 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    }
    out[k] = S::st(y);
  }
}

// residual: x += in + bias (the c_proj outputs joining the residual stream).
template <typename S>
__device__ void residual(float* x, const float* in, const typename S::T* bias, int rows, int cols) {
  long long n = (long long)rows * cols;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x)
    x[k] += in[k] + S::ld(bias[k % cols]);
}

#define TS_INSTANTIATE(S, SUF)                                                                        \
  extern "C" __global__ void embed_##SUF(float* x, const S::T* wte, const S::T* wpe,                 \
                                         const int* tokens, const int* pos, int C) {                  \
    embed<S>(x, wte, wpe, tokens, pos, C);                                                            \
  }                                                                                                   \
  extern "C" __global__ void layernorm_##SUF(S::T* out, const float* x, const int* rows,             \
                                             const S::T* w, const S::T* b, int C, float eps) {        \
    layernorm<S>(out, x, rows, w, b, C, eps);                                                         \
  }                                                                                                   \
  extern "C" __global__ void add_layernorm_##SUF(S::T* out, float* x, const float* in, const S::T* bias, \
                                                 const S::T* w, const S::T* b, int C, float eps) {    \
    add_layernorm<S>(out, x, in, bias, w, b, C, eps);                                                 \
  }                                                                                                   \
  extern "C" __global__ void qkv_store_##SUF(float* q, const float* qkv, const S::T* bias, S::T* kc,  \
                                             S::T* vc, const int* pos, const int* seq, const int* bt, \
                                             int maxBlocks, int bs, int C) {                          \
    qkv_store<S>(q, qkv, bias, kc, vc, pos, seq, bt, maxBlocks, bs, C);                               \
  }                                                                                                   \
  extern "C" __global__ void attention_##SUF(S::T* out, const float* q, const S::T* kc,              \
                                             const S::T* vc, const int* pos, const int* seq,          \
                                             const int* bt, int maxBlocks, int bs, int C, int D,      \
                                             int npos, float scale) {                                 \
    attention<S>(out, q, kc, vc, pos, seq, bt, maxBlocks, bs, C, D, npos, scale);                     \
  }                                                                                                   \
  extern "C" __global__ void bias_act_##SUF(S::T* out, const float* in, const S::T* bias, int rows,  \
                                            int cols, int useErf) {                                   \
    bias_act<S>(out, in, bias, rows, cols, useErf);                                                      \
  }                                                                                                   \
  extern "C" __global__ void residual_##SUF(float* x, const float* in, const S::T* bias, int rows,   \
                                            int cols) {                                               \
    residual<S>(x, in, bias, rows, cols);                                                             \
  }

TS_INSTANTIATE(F32, f32)
TS_INSTANTIATE(F16, f16)
TS_INSTANTIATE(BF16, bf16)

// argmax: out[r] = the id of the largest logit of row r (ties to the lowest
// id, as the engine's sampler and the CPU backend break them). Grid R,
// blockDim a power of two <= 1024.
extern "C" __global__ void argmax_rows(int* out, const float* logits, int V) {
  __shared__ float bv[1024];
  __shared__ int bi[1024];
  const float* row = logits + (long long)blockIdx.x * V;
  float best = __uint_as_float(0xff800000u);  // -inf, as the CPU backend: any finite logit can win
  int besti = 0x7fffffff;
  int bd = blockDim.x, k = threadIdx.x;
  // Four loads in flight per thread (a row is read once, so latency, not
  // bandwidth, bounds the pass); each thread still visits its ids in
  // increasing order, so a tie keeps the lower id.
  for (; k + 3 * bd < V; k += 4 * bd) {
    float v0 = row[k], v1 = row[k + bd], v2 = row[k + 2 * bd], v3 = row[k + 3 * bd];
    if (v0 > best) best = v0, besti = k;
    if (v1 > best) best = v1, besti = k + bd;
    if (v2 > best) best = v2, besti = k + 2 * bd;
    if (v3 > best) best = v3, besti = k + 3 * bd;
  }
  for (; k < V; k += bd) {
    float v = row[k];
    if (v > best) best = v, besti = k;
  }
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = besti;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float ov = bv[threadIdx.x + s];
      int oi = bi[threadIdx.x + s];
      if (ov > bv[threadIdx.x] || (ov == bv[threadIdx.x] && oi < bi[threadIdx.x])) {
        bv[threadIdx.x] = ov;
        bi[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = bi[0] == 0x7fffffff ? 0 : bi[0];
}

// hold_ns keeps its stream busy for ns nanoseconds (launch it with one
// thread). The step profiler (profile.go) queues a step behind it, so that
// every launch of the step is queued before the first kernel runs and the
// events between kernels time the GPU's work, not the host's launches.
extern "C" __global__ void hold_ns(long long ns) {
  unsigned long long t0 = globalTimerNs();
  while ((long long)(globalTimerNs() - t0) < ns) {
  }
}
