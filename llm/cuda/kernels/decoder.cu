// Decoder forward kernels for tinyserve's CUDA backend (llm/cuda): every
// architecture of model.Config (GPT-2, Llama, Qwen2, Qwen3) runs on these,
// the Config choosing per launch: LayerNorm or RMSNorm, learned positions
// or rotary ones, biases or none, q/k norms, a plain or a gated MLP.
//
// Compiled at run time by NVRTC, so the file includes no headers: half and
// bfloat16 values are stored as unsigned short and converted with PTX cvt
// (float16: halfToFloat, floatToHalf) or bit arithmetic (bfloat16). Every
// kernel is a template over a storage type and instantiated as extern "C"
// <name>_f32 / _f16 / _bf16, so one compiled module serves every dtype. Arithmetic is float32 throughout;
// only weights, KV and GEMM inputs are stored in the narrow type. An
// optional tensor (a bias the model does not have, GPT-2's position table
// in a rotary model) is passed as a null pointer and then not read.
//
// Batch layout (packed on the host, see meta.go): N token rows; for row i,
// tokens[i], pos[i] (its position in its sequence) and seq[i] (its
// sequence's index in the batch); block tables are [numSeqs][maxBlocks], so
// position p of sequence s is cache slot bt[s*maxBlocks + p/bs]*bs + p%bs.
// A CUDA-graph step is padded to its graph's rows: a padding row has seq -1,
// and the kernels that read the KV cache or the block tables (qkv_store,
// attention) return at once for it; the others compute it from token 0 at
// position 0 like any row, which touches no other row.
// The KV cache of one layer is [numBlocks*bs][KVH*D]: a slot holds the
// KVH key (or value) heads of one position, KV head k at k*D. Queries are
// [N][H*D]; query head h reads KV head h/(H/KVH) (grouped-query attention).
// Attention also reads a tile table (pairs: first row, row count; a count
// of 0 is padding) for flash_prefill, whose tiles are consecutive rows of
// one sequence, and a list of decode rows (-1 is padding) for the row
// kernels (meta.go's batchMeta).
//
// The tests also run this file on the host (llm/cuda/testdata/emu compiles
// it as C++ with a small CUDA shim); the emulator defines TS_EMULATOR and
// brings its own versions of the four hooks below, which have no portable
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

// bytePerm is PTX prmt (CUDA's __byte_perm): byte k of the result is byte
// (s >> 4k) & 7 of the eight bytes y:x (x's bytes first).
__device__ __forceinline__ unsigned int bytePerm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned int r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
  return r;
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

// opt reads element c of an optional tensor: 0 where there is none.
template <typename S>
__device__ __forceinline__ float opt(const typename S::T* p, long long c) {
  return p ? S::ld(p[c]) : 0.f;
}

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

// embed: x[i] = wte[tokens[i]], plus wpe[pos[i]] when the model has learned
// positions (wpe not null). Grid N.
template <typename S>
__device__ void embed(float* x, const typename S::T* wte, const typename S::T* wpe,
                      const int* tokens, const int* pos, int C) {
  int i = blockIdx.x;
  const typename S::T* te = wte + (long long)tokens[i] * C;
  if (wpe) {
    const typename S::T* pe = wpe + (long long)pos[i] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) x[(long long)i * C + c] = S::ld(te[c]) + S::ld(pe[c]);
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x) x[(long long)i * C + c] = S::ld(te[c]);
  }
}

// normRow writes the norm of xr to out, by the whole block: with rms 0 the
// LayerNorm (xr − mean)/sqrt(var + eps)·w + b (b may be null), with rms 1
// the RMSNorm xr·(1/sqrt(mean(xr²) + eps))·w, the factor rounded to float32
// before the two products, as the CPU reference and Hugging Face's
// LlamaRMSNorm compute it. Sums in double, like the CPU reference, so the
// float32 mode matches it closely. Each thread reads only the elements
// c = threadIdx.x + k*blockDim.x, so a caller may have written those same
// elements just before without a barrier.
template <typename S>
__device__ void normRow(typename S::T* out, const float* xr, const typename S::T* w,
                        const typename S::T* b, int C, float eps, int rms, double* scratch) {
  if (rms) {
    double ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (double)xr[c] * xr[c];
    float inv = (float)(1.0 / sqrt(blockSum(ss, scratch) / C + (double)eps));
    for (int c = threadIdx.x; c < C; c += blockDim.x) out[c] = S::st(xr[c] * inv * S::ld(w[c]));
    return;
  }
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
    out[c] = S::st(n * S::ld(w[c]) + opt<S>(b, c));
  }
}

// norm: out[r] = norm(x[rows ? rows[r] : r]). Grid R. The optional row
// list gathers the sampled rows for the final norm, so the LM head runs on
// those rows only.
template <typename S>
__device__ void norm(typename S::T* out, const float* x, const int* rows, const typename S::T* w,
                     const typename S::T* b, int C, float eps, int rms) {
  __shared__ double scratch[32];
  int r = blockIdx.x;
  int src = rows ? rows[r] : r;
  normRow<S>(out + (long long)r * C, x + (long long)src * C, w, b, C, eps, rms, scratch);
}

// add_norm: x[r] += in[r] + bias (a projection's output joining the
// residual stream; bias may be null), then out[r] = norm(x[r]), in one
// launch. Grid N.
template <typename S>
__device__ void add_norm(typename S::T* out, float* x, const float* in, const typename S::T* bias,
                         const typename S::T* w, const typename S::T* b, int C, float eps, int rms) {
  __shared__ double scratch[32];
  int r = blockIdx.x;
  float* xr = x + (long long)r * C;
  const float* ir = in + (long long)r * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) xr[c] += ir[c] + opt<S>(bias, c);
  normRow<S>(out + (long long)r * C, xr, w, b, C, eps, rms, scratch);
}

// qkv_store turns row i of the query/key/value GEMM ([H query heads | KVH
// key heads | KVH value heads] of D, float32) into attention's inputs. Grid
// N, whole warps. In order, as the CPU reference: + bias (when given); each
// query and key head RMS-normalised with the gains qNorm and kNorm (when
// given: Qwen3), the factor a warp's reduction in double; each query and
// key head rotated (when invFreq is given) in rotate-half layout, dimension
// j paired with j + D/2 and turned by the angle pos·invFreq[j], computed in
// double and its cosine and sine rounded to float32 (a float32 angle is
// off by 2e-4 at 2,000 positions). The queries stay float32 in q ([N][H*D])
// for attention; keys and values go into the paged cache at the row's slot.
// D <= 1024 (the rotation table's size).
template <typename S>
__device__ void qkv_store(float* __restrict__ q, const float* __restrict__ qkv,
                          const typename S::T* __restrict__ bias, const typename S::T* __restrict__ qNorm,
                          const typename S::T* __restrict__ kNorm, const double* __restrict__ invFreq,
                          typename S::T* __restrict__ kc, typename S::T* __restrict__ vc, const int* pos,
                          const int* seq, const int* bt, int maxBlocks, int bs, int H, int KVH, int D, float eps) {
  __shared__ float rot[1024];  // cos of pair j at j, sin at D/2 + j
  int i = blockIdx.x;
  if (seq[i] < 0) return;  // a padding row of a CUDA-graph step: no query, no KV
  int p = pos[i];
  long long slot = (long long)bt[seq[i] * maxBlocks + p / bs] * bs + p % bs;
  int QD = H * D, KVD = KVH * D, half = D / 2;
  const float* row = qkv + (long long)i * (QD + 2 * KVD);
  if (invFreq) {
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
      double a = (double)p * invFreq[j];
      rot[j] = (float)cos(a);
      rot[half + j] = (float)sin(a);
    }
    __syncthreads();
  }
  // A warp per query or key head: the head's norm is one warp reduction.
  int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  for (int hh = threadIdx.x >> 5; hh < H + KVH; hh += nw) {
    const float* src = row + (long long)hh * D;
    const typename S::T* hb = bias ? bias + (long long)hh * D : 0;
    const typename S::T* g = hh < H ? qNorm : kNorm;
    float inv = 1.f;
    if (g) {
      double ss = 0;
      for (int d = lane; d < D; d += 32) {
        float v = src[d] + opt<S>(hb, d);
        ss += (double)v * v;
      }
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      inv = (float)(1.0 / sqrt(ss / D + (double)eps));
    }
    float* qo = hh < H ? q + (long long)i * QD + (long long)hh * D : 0;
    typename S::T* ko = hh < H ? 0 : kc + slot * KVD + (long long)(hh - H) * D;
    int n = invFreq ? half : D;
    for (int d = lane; d < n; d += 32) {
      float x1 = src[d] + opt<S>(hb, d);
      if (g) x1 = x1 * inv * S::ld(g[d]);
      if (!invFreq) {
        if (qo) qo[d] = x1;
        else ko[d] = S::st(x1);
        continue;
      }
      float x2 = src[d + half] + opt<S>(hb, d + half);
      if (g) x2 = x2 * inv * S::ld(g[d + half]);
      float c = rot[d], s = rot[half + d];
      float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
      if (qo) {
        qo[d] = y1;
        qo[d + half] = y2;
      } else {
        ko[d] = S::st(y1);
        ko[d + half] = S::st(y2);
      }
    }
  }
  for (int c = threadIdx.x; c < KVD; c += blockDim.x)
    vc[slot * KVD + c] = S::st(row[QD + KVD + c] + opt<S>(bias, QD + KVD + c));
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
// that head rows start on a multiple of W (D is a multiple of W). sh is
// the dynamic shared memory: one tile's weights and cache slots
// (blockDim.x positions), the scaled query, and blockDim*W partial outputs.
//
// The positions 0..p are taken a tile of blockDim.x at a time, one
// position per thread, with an online softmax: each tile's scores raise
// the running maximum m, and the running sum l and every thread's partial
// weighted values are scaled by exp(m_old − m_new) before the tile's
// weights are added. Shared memory is thus fixed by the block, whatever the
// context length; a context within one tile computes exactly what the
// two-pass softmax did (the scale of the empty start is 0).
//
// Row i (query head blockIdx.y) takes the positions lo..hi-1 (lo < hi,
// lo a multiple of blockDim.x): the whole context 0..pos[i] for the
// attention kernel, one split of it for attention_split. With partial
// null it writes the normalised output to out; otherwise it writes the
// split's unnormalised weighted values (D floats), its running maximum and
// its sum to partial[0..D+1] (attention_combine merges the splits).
template <typename S, int W>
__device__ void attentionRows(typename S::T* out, float* partial, const float* q, const typename S::T* kc,
                              const typename S::T* vc, int i, int lo, int hi, const int* table, int bs, int QD,
                              int KVD, int D, int group, float scale, float* sh, float* scratch) {
  typedef Pack<typename S::T, W> P;
  int tile = blockDim.x;            // positions per tile
  float* sc = sh;                   // [tile] this tile's weights
  int* slots = (int*)(sh + tile);   // [tile] this tile's cache slots
  float* qs = sh + 2 * tile;        // [D] this head's query, scaled
  float* part = qs + D;             // [G*D] partial outputs, G*D <= blockDim*W
  int h = blockIdx.y;
  long long head = (long long)(h / group) * D;  // the KV head's offset in a slot
  for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = q[(long long)i * QD + h * D + d] * scale;
  __syncthreads();
  int L = D / W;  // packs per head row
  // Weighted values: L threads share a position (a pack each), G positions
  // at a time, each group summing every G-th position of a tile.
  int G = blockDim.x / L;
  int lane = threadIdx.x % L, g = threadIdx.x / L;
  float acc[W];
#pragma unroll
  for (int e = 0; e < W; e++) acc[e] = 0.f;
  float m = -3.0e38f, l = 0.f;
  for (int t0 = lo; t0 < hi; t0 += tile) {
    // Scores: one position per thread, its key row read in L packs, all
    // issued before the first is used.
    int j = t0 + threadIdx.x;
    float dot = -3.0e38f;
    if (j < hi) {
      int slot = table[j / bs] * bs + j % bs;
      slots[threadIdx.x] = slot;
      const P* k = (const P*)(kc + (long long)slot * KVD + head);
      dot = 0.f;
#pragma unroll 8
      for (int u = 0; u < L; u++) {
        P x = k[u];
#pragma unroll
        for (int e = 0; e < W; e++) dot += qs[u * W + e] * S::ld(x.v[e]);
      }
    }
    float mt = blockMax(dot, scratch);  // also orders the writes to slots before the reads below
    float mn = fmaxf(m, mt);
    float w = j < hi ? expf(dot - mn) : 0.f;  // not __expf: the float32 mode is compared at 1e-5
    sc[threadIdx.x] = w;
    float corr = expf(m - mn);  // 0 for the first tile
    l = l * corr + blockSum(w, scratch);  // also orders the writes to sc before the reads below
    m = mn;
    int n = hi - t0 < tile ? hi - t0 : tile;  // positions in this tile
    if (g < G) {
#pragma unroll
      for (int e = 0; e < W; e++) acc[e] *= corr;
#pragma unroll 4
      for (int jj = g; jj < n; jj += G) {
        P x = ((const P*)(vc + (long long)slots[jj] * KVD + head))[lane];
        float wj = sc[jj];
#pragma unroll
        for (int e = 0; e < W; e++) acc[e] += wj * S::ld(x.v[e]);
      }
    }
    __syncthreads();  // the next tile rewrites sc and slots
  }
  if (g < G) {
#pragma unroll
    for (int e = 0; e < W; e++) part[g * D + lane * W + e] = acc[e];
  }
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float t = 0.f;
    for (int k = 0; k < G; k++) t += part[k * D + d];
    if (partial) {
      partial[d] = t;
    } else {
      out[(long long)i * QD + h * D + d] = S::st(t / l);
    }
  }
  if (partial && threadIdx.x == 0) {
    partial[D] = m;
    partial[D + 1] = l;
  }
}

// attention: causal attention of row i, query head h (grid N x H) over
// positions 0..pos[i] of its own sequence, reading KV head h/group through
// the block table. Rows of a prefill chunk see the chunk's own keys because
// qkv_store ran first. blockDim is at least D, in whole warps (blockSum and
// blockMax shuffle over full warps). Dynamic shared memory: (2*blockDim + D
// + blockDim*16/sizeof(T)) floats (attentionShared in forward.go), for any
// context length. Heads whose rows hold whole 16-byte packs (D = 64 or 128,
// every dtype) load them so; others element by element.
template <typename S>
__device__ void attention(typename S::T* out, const float* q, const typename S::T* kc,
                          const typename S::T* vc, const int* pos, const int* seq, const int* bt,
                          int maxBlocks, int bs, int QD, int KVD, int D, int group, float scale) {
  TS_DYNAMIC_SHARED(float, sh);
  __shared__ float scratch[32];
  if (seq[blockIdx.x] < 0) return;  // a padding row of a CUDA-graph step (the whole block)
  const int W = 16 / sizeof(typename S::T);
  int i = blockIdx.x;
  const int* table = bt + seq[i] * maxBlocks;
  if (D % W == 0) {
    attentionRows<S, W>(out, 0, q, kc, vc, i, 0, pos[i] + 1, table, bs, QD, KVD, D, group, scale, sh, scratch);
  } else {
    attentionRows<S, 1>(out, 0, q, kc, vc, i, 0, pos[i] + 1, table, bs, QD, KVD, D, group, scale, sh, scratch);
  }
}

// attention_split: split-context attention for decode rows (flash-decoding).
// Grid (rows, H, splits): block (r, h, z) takes row i = rows[r] (rows null:
// i = r; a negative entry, or a row of sequence -1, is padding and exits;
// the combine then writes that row from partials nobody wrote, and since
// every later kernel computes a row from itself alone, nothing reads it)
// and the positions
// z*splitLen .. min((z+1)*splitLen, pos[i]+1) - 1; splitLen is a multiple
// of blockDim.x, so a split's tiles are the attention kernel's tiles. With
// one split (gridDim.z 1) it writes the output as the attention kernel
// does, bit for bit. Otherwise each block writes its partial — D
// unnormalised weighted values, its maximum m and its sum l — to
// part[((r*H + h)*splits + z)*(D+2)], float32; a split past the row's
// context writes an empty one (m −inf, l 0), which attention_combine
// ignores. The launch thus depends on the rows and the context bound the
// splits are cut from, never on a row's own context (CUDA graphs). Block
// and dynamic shared memory as the attention kernel's.
template <typename S>
__device__ void attention_split(typename S::T* out, float* part, const float* q, const typename S::T* kc,
                                const typename S::T* vc, const int* pos, const int* seq, const int* bt,
                                const int* rows, int maxBlocks, int bs, int QD, int KVD, int D, int group,
                                float scale, int splitLen) {
  TS_DYNAMIC_SHARED(float, sh);
  __shared__ float scratch[32];
  const int W = 16 / sizeof(typename S::T);
  int r = blockIdx.x;
  int i = rows ? rows[r] : r;
  if (i < 0 || seq[i] < 0) return;  // a padding slot, or a CUDA-graph step's padding row
  int lo = blockIdx.z * splitLen, hi = pos[i] + 1;
  if (hi > lo + splitLen) hi = lo + splitLen;
  float* partial = 0;
  if (gridDim.z > 1) {
    partial = part + ((long long)(r * gridDim.y + blockIdx.y) * gridDim.z + blockIdx.z) * (D + 2);
    if (lo >= hi) {
      for (int d = threadIdx.x; d < D; d += blockDim.x) partial[d] = 0.f;
      if (threadIdx.x == 0) {
        partial[D] = __uint_as_float(0xff800000u);  // -inf
        partial[D + 1] = 0.f;
      }
      return;
    }
  }
  const int* table = bt + seq[i] * maxBlocks;
  if (D % W == 0) {
    attentionRows<S, W>(out, partial, q, kc, vc, i, lo, hi, table, bs, QD, KVD, D, group, scale, sh, scratch);
  } else {
    attentionRows<S, 1>(out, partial, q, kc, vc, i, lo, hi, table, bs, QD, KVD, D, group, scale, sh, scratch);
  }
}

// attention_combine merges attention_split's partials: grid (rows, H),
// row i = rows[r] (rows null: r; negative: padding), out[i][h] =
// Σ_z e^(m_z − M)·acc_z / Σ_z e^(m_z − M)·l_z with M the largest m_z.
// Empty splits (m −inf) weigh 0; with a single non-empty split the result
// is acc/l, what the unsplit kernel writes.
template <typename S>
__device__ void attention_combine(typename S::T* out, const float* part, const int* rows, int QD, int D,
                                  int splits) {
  int r = blockIdx.x, h = blockIdx.y;
  int i = rows ? rows[r] : r;
  if (i < 0) return;
  const float* pp = part + (long long)(r * gridDim.y + h) * splits * (D + 2);
  float M = __uint_as_float(0xff800000u);
  for (int z = 0; z < splits; z++) M = fmaxf(M, pp[z * (D + 2) + D]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.f, den = 0.f;
    for (int z = 0; z < splits; z++) {
      const float* pz = pp + z * (D + 2);
      float w = expf(pz[D] - M);
      num += w * pz[d];
      den += w * pz[D + 1];
    }
    out[(long long)i * QD + h * D + d] = S::st(num / den);
  }
}

// FLASH_ROWS, FLASH_KEYS and FLASH_THREADS are flash_prefill's query rows
// per block, keys per tile and blockDim (flashRows, flashKeys,
// flashThreads in forward.go); the kernel's thread mapping assumes these
// values: 4 warps of 4 rows each for the scores and the weighted values,
// 8 threads per row for the softmax.
#define FLASH_ROWS 16
#define FLASH_KEYS 32
#define FLASH_THREADS 128

// flashRows is flash_prefill with W storage elements per global load.
template <typename S, int W>
__device__ void flashRows(typename S::T* out, const float* q, const typename S::T* kc, const typename S::T* vc,
                          const int* pos, const int* seq, const int* bt, const int* tiles, int maxBlocks, int bs,
                          int QD, int KVD, int D, int group, float scale, float* sh) {
  typedef Pack<typename S::T, W> P;
  typedef Pack<float, 4> F4;
  const int QT = FLASH_ROWS, KT = FLASH_KEYS;
  int row0 = tiles[2 * blockIdx.x], n = tiles[2 * blockIdx.x + 1];
  if (n <= 0) return;  // past the step's tiles (the grid is an upper bound)
  int h = blockIdx.y;
  int KS = D + 4;                  // a key row's stride: 16-byte aligned, conflict-free
  float* Qs = sh;                  // [QT][D] the tile's queries, scaled
  float* Ks = Qs + QT * D;         // [KT][KS] a tile of keys, float32
  float* Vs = Ks + KT * KS;        // [KT][D] the same positions' values
  float* Ps = Vs + KT * D;         // [QT][KT+1] scores, then weights
  float* corrS = Ps + QT * (KT + 1);  // [QT] each row's rescale for this tile
  float* lS = corrS + QT;          // [QT] each row's final sum
  int* rp = (int*)(lS + QT);       // [QT] each row's position (-1 past n)
  int* slots = rp + QT;            // [KT] the key tile's cache slots (-1 past the last row's position)
  int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int* table = bt + seq[row0] * maxBlocks;
  long long head = (long long)(h / group) * D;
  for (int e = t; e < QT * D; e += blockDim.x) {
    int r = e / D, d = e - r * D;
    Qs[e] = r < n ? q[(long long)(row0 + r) * QD + h * D + d] * scale : 0.f;
  }
  if (t < QT) rp[t] = t < n ? pos[row0 + t] : -1;
  __syncthreads();
  int plast = rp[n - 1];
  int sr = t >> 3, sj = t & 7;  // softmax: row sr, keys sj + 8k
  float m = -3.0e38f, l = 0.f;
  float acc[4][4];  // rows warp + 4k, dimensions lane + 32u
#pragma unroll
  for (int k = 0; k < 4; k++)
#pragma unroll
    for (int u = 0; u < 4; u++) acc[k][u] = 0.f;
  int L = D / W;
  for (int t0 = 0; t0 <= plast; t0 += KT) {
    if (t < KT) {
      int j = t0 + t;
      slots[t] = j <= plast ? table[j / bs] * bs + j % bs : -1;
    }
    __syncthreads();
    // The key and value tile, in W-element loads, to float32.
    for (int e = t; e < KT * L; e += blockDim.x) {
      int j = e / L, u = e - j * L;
      int slot = slots[j];
      float* kd = Ks + j * KS + u * W;
      float* vd = Vs + j * D + u * W;
      if (slot >= 0) {
        P kx = ((const P*)(kc + (long long)slot * KVD + head))[u];
        P vx = ((const P*)(vc + (long long)slot * KVD + head))[u];
#pragma unroll
        for (int w = 0; w < W; w++) {
          kd[w] = S::ld(kx.v[w]);
          vd[w] = S::ld(vx.v[w]);
        }
      } else {
#pragma unroll
        for (int w = 0; w < W; w++) kd[w] = vd[w] = 0.f;
      }
    }
    __syncthreads();
    // Scores: key lane against rows warp + 4k; a key after a row's
    // position (or a row past n) is marked -3e38.
    {
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      const F4* kr = (const F4*)(Ks + lane * KS);
      for (int d4 = 0; d4 < D / 4; d4++) {
        F4 kx = kr[d4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
          F4 qx = ((const F4*)(Qs + (warp + 4 * k) * D))[d4];
#pragma unroll
          for (int e = 0; e < 4; e++) s[k] += qx.v[e] * kx.v[e];
        }
      }
      int j = t0 + lane;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        int r = warp + 4 * k;
        Ps[r * (KT + 1) + lane] = j <= rp[r] ? s[k] : -3.0e38f;
      }
    }
    __syncthreads();
    // Online softmax of row sr: 8 threads, 4 keys each.
    {
      float* pr = Ps + sr * (KT + 1);
      int rpos = rp[sr];
      float v[4];
      float mt = -3.0e38f;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        v[k] = pr[sj + 8 * k];
        mt = fmaxf(mt, v[k]);
      }
      for (int o = 4; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
      float mn = fmaxf(m, mt);
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        float w = t0 + sj + 8 * k <= rpos ? expf(v[k] - mn) : 0.f;
        pr[sj + 8 * k] = w;
        sum += w;
      }
      for (int o = 4; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      float corr = expf(m - mn);  // 0 on the first tile
      l = l * corr + sum;
      m = mn;
      if (sj == 0) corrS[sr] = corr;
    }
    __syncthreads();
    // Weighted values: rows warp + 4k, dimensions lane + 32u.
    int jn = plast + 1 - t0 < KT ? plast + 1 - t0 : KT;
    float c[4];
#pragma unroll
    for (int k = 0; k < 4; k++) c[k] = corrS[warp + 4 * k];
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
      for (int u = 0; u < 4; u++) acc[k][u] *= c[k];
    for (int jj = 0; jj < jn; jj++) {
      float pk[4];
#pragma unroll
      for (int k = 0; k < 4; k++) pk[k] = Ps[(warp + 4 * k) * (KT + 1) + jj];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        int d = lane + 32 * u;
        if (d < D) {
          float vv = Vs[jj * D + d];
#pragma unroll
          for (int k = 0; k < 4; k++) acc[k][u] += pk[k] * vv;
        }
      }
    }
    __syncthreads();  // the next tile rewrites slots, Ks, Vs and Ps
  }
  if (sj == 0) lS[sr] = l;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; k++) {
    int r = warp + 4 * k;
    if (r < n) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        int d = lane + 32 * u;
        if (d < D) out[(long long)(row0 + r) * QD + h * D + d] = S::st(acc[k][u] / lS[r]);
      }
    }
  }
}

// flash_prefill: causal attention for the rows of prefill chunks, a tile
// of up to FLASH_ROWS consecutive rows of one sequence per block against
// the sequence's keys FLASH_KEYS positions at a time (flash attention):
// each key and value tile is read from the paged cache once per query tile
// into shared memory (as float32), every row keeps its own online softmax,
// and a key after a row's position is masked. Grid (tile slots, H),
// FLASH_THREADS threads; tiles[2k], tiles[2k+1] are tile k's first row and
// row count, a count of 0 marking a slot past the step's tiles (the grid
// may be an upper bound: ceil(N/FLASH_ROWS) + sequences). A tile's rows
// hold consecutive positions of one sequence. D <= 128 and a multiple of 4;
// dynamic shared memory (80·D + 736)·4 bytes (flashShared in forward.go),
// 43,904 at D = 128.
template <typename S>
__device__ void flash_prefill(typename S::T* out, const float* q, const typename S::T* kc, const typename S::T* vc,
                              const int* pos, const int* seq, const int* bt, const int* tiles, int maxBlocks, int bs,
                              int QD, int KVD, int D, int group, float scale) {
  TS_DYNAMIC_SHARED(float, sh);
  const int W = 16 / sizeof(typename S::T);
  if (D % W == 0) {
    flashRows<S, W>(out, q, kc, vc, pos, seq, bt, tiles, maxBlocks, bs, QD, KVD, D, group, scale, sh);
  } else {
    flashRows<S, 1>(out, q, kc, vc, pos, seq, bt, tiles, maxBlocks, bs, QD, KVD, D, group, scale, sh);
  }
}

// bias_act: out = act(in + bias) over an [rows][cols] float32 GEMM result
// (bias may be null); act is gelu_new (tanh form) when useErf is 0, exact
// erf GELU otherwise.
template <typename S>
__device__ void bias_act(typename S::T* out, const float* in, const typename S::T* bias,
                         int rows, int cols, int useErf) {
  long long n = (long long)rows * cols;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    float x = in[k] + opt<S>(bias, k % cols);
    float y;
    if (useErf) {
      y = 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    } else {
      y = 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    }
    out[k] = S::st(y);
  }
}

// silu_mul: the gated MLP's activation. in is the [gate | up] GEMM result,
// [rows][2*cols] float32; out[r][c] = silu(gate) · up, silu(x) = x/(1+e^−x),
// with gate = in[r][c] + bias[c] and up = in[r][cols + c] + bias[cols + c]
// (bias may be null).
template <typename S>
__device__ void silu_mul(typename S::T* out, const float* in, const typename S::T* bias, int rows, int cols) {
  long long n = (long long)rows * cols;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
    long long r = k / cols;
    int c = (int)(k % cols);
    const float* row = in + r * 2 * cols;
    float g = row[c] + opt<S>(bias, c), u = row[cols + c] + opt<S>(bias, cols + c);
    out[k] = S::st(g / (1.f + expf(-g)) * u);
  }
}

// residual: x += in + bias (the last projection joining the residual
// stream; bias may be null).
template <typename S>
__device__ void residual(float* x, const float* in, const typename S::T* bias, int rows, int cols) {
  long long n = (long long)rows * cols;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x)
    x[k] += in[k] + opt<S>(bias, k % cols);
}

// ---- Q8_0 weights (ggml's blocks of 32 int8 with one float16 scale) ----
//
// Device layout of a Q8_0 matrix of N outputs by K inputs (K a multiple of
// 32; nn.Linear's orientation, each block along a row): two arrays, the
// quants int8 [N][K] row-major and the scales, float16 bits, [N][K/32].
// ggml's 34-byte blocks would put every 16-byte load off its alignment;
// split, consecutive threads read consecutive 16-byte chunks of a row
// (512 bytes a warp), and the scales of that span as 64 consecutive bytes.
// A 16-byte chunk c of the quants is half of block c/2, whose scale is
// scales[c/2] (row starts are whole blocks, so this holds from any row).

// Q8Chunk is 16 quants loaded as one 16-byte load, as four 32-bit words.
typedef Pack<unsigned int, 4> Q8Chunk;

// q8Word turns the four int8 of u into floats q (exactly) without the
// integer-to-float conversion instruction, which runs at a quarter of the
// float rate or less (16 a clock per SM on sm_80..sm_90): at Hopper's
// bandwidth a GEMV converting every weight byte so would be bound by the
// conversions, not by memory. Flipping each byte's sign bit makes it
// q + 128 unsigned; bytePerm sets it as the low mantissa byte of 2^23
// (0x4b000000), and subtracting 2^23 + 128 leaves q.
__device__ __forceinline__ void q8Word(float* f, unsigned int u) {
  u ^= 0x80808080u;
  f[0] = __uint_as_float(bytePerm(u, 0x4b000000u, 0x7650u)) - 8388736.f;
  f[1] = __uint_as_float(bytePerm(u, 0x4b000000u, 0x7651u)) - 8388736.f;
  f[2] = __uint_as_float(bytePerm(u, 0x4b000000u, 0x7652u)) - 8388736.f;
  f[3] = __uint_as_float(bytePerm(u, 0x4b000000u, 0x7653u)) - 8388736.f;
}

// q8Dequant writes the 16 weights of a loaded chunk with scale d: d·q,
// exact in float32 (an 11-bit by 8-bit product), the same values the CPU
// backend's Q8_0 kernels multiply by.
__device__ __forceinline__ void q8Dequant(float* w, const Q8Chunk& v, float d) {
#pragma unroll
  for (int k = 0; k < 4; k++) q8Word(w + 4 * k, v.v[k]);
#pragma unroll
  for (int e = 0; e < 16; e++) w[e] *= d;
}

// embed_q8: embed with a Q8_0 token table (quants wq, scales ws; C a
// multiple of 32): x[i] = dequantized row tokens[i], plus wpe[pos[i]] when
// the model has learned positions. Grid N. The table stays 8-bit on the
// device, and is the LM head too when tied.
template <typename S>
__device__ void embed_q8(float* x, const signed char* wq, const unsigned short* ws, const typename S::T* wpe,
                         const int* tokens, const int* pos, int C) {
  int i = blockIdx.x;
  long long t = tokens[i];
  const signed char* q = wq + t * C;
  const unsigned short* s = ws + t * (C / 32);
  const typename S::T* pe = wpe ? wpe + (long long)pos[i] * C : 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float v = halfToFloat(s[c >> 5]) * (float)q[c];
    x[(long long)i * C + c] = pe ? v + S::ld(pe[c]) : v;
  }
}

// Q8_GEMV_OUTPUTS is q8_gemv's outputs per block (q8GemvOutputs in q8.go).
#define Q8_GEMV_OUTPUTS 4

// q8_gemv: out[M][N] (float32, as the GEMMs' results) = in[M][K] (storage
// type) · Wᵀ for a Q8_0 W of N×K, for the few rows of a decode step. A
// block computes Q8_GEMV_OUTPUTS consecutive outputs (grid.x = N/those,
// rounded up) for R activation rows (grid.y: rows blockIdx.y·R on; M need
// not be a multiple of R); its threads split K, thread t taking the 16-byte
// chunks t, t + blockDim, … of each of the block's weight rows, so a warp
// reads 512 consecutive bytes of each row and every load of a thread (one
// per output row) is issued before the first is used. blockDim is the
// chunks of a row rounded up to whole warps, at most 256 (q8GemvLaunch): a
// row of 896 weights is one chunk per thread of two warps, with every
// load in flight at once. The weights are dequantized in registers once
// and each activation, converted to float32 once, is multiplied into the
// block's outputs: per weight byte, R/Q8_GEMV_OUTPUTS activation
// conversions. Sums are float32, added over the warp by shuffles and over
// the warps through shared memory. K is a multiple of 32 and in's rows
// start 16-byte aligned (the backend's buffers are 256-byte aligned).
template <typename S, int R>
__device__ void q8_gemv(float* __restrict__ out, const typename S::T* __restrict__ in,
                        const unsigned char* __restrict__ wq, const unsigned short* __restrict__ ws, int M, int K,
                        int N) {
  typedef typename S::T T;
  const int W = Q8_GEMV_OUTPUTS;
  const int A = 16 / sizeof(T);  // activations per 16-byte pack
  typedef Pack<T, A> P;
  __shared__ float part[32 * R * W];  // [warp][row][output]
  int n0 = blockIdx.x * W, r0 = blockIdx.y * R;
  int chunks = K / 16;
  float acc[R][W];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < W; j++) acc[r][j] = 0.f;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    Q8Chunk raw[W];
    float d[W];
#pragma unroll
    for (int j = 0; j < W; j++) {
      if (n0 + j < N) {
        long long n = n0 + j;
        raw[j] = ((const Q8Chunk*)(wq + n * K))[c];
        d[j] = halfToFloat(ws[n * (K / 32) + (c >> 1)]);
      } else {
        raw[j].v[0] = raw[j].v[1] = raw[j].v[2] = raw[j].v[3] = 0x80808080u;  // q = -128, d = 0
        d[j] = 0.f;
      }
    }
    float w[W][16];
#pragma unroll
    for (int j = 0; j < W; j++) q8Dequant(w[j], raw[j], d[j]);
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (r0 + r < M) {
        const P* xp = (const P*)(in + (long long)(r0 + r) * K + (long long)c * 16);
        float x[16];
#pragma unroll
        for (int u = 0; u < 16 / A; u++) {
          P xv = xp[u];
#pragma unroll
          for (int e = 0; e < A; e++) x[u * A + e] = S::ld(xv.v[e]);
        }
#pragma unroll
        for (int j = 0; j < W; j++)
#pragma unroll
          for (int e = 0; e < 16; e++) acc[r][j] += w[j][e] * x[e];
      }
    }
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < W; j++) {
      float v = acc[r][j];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) part[(warp * R + r) * W + j] = v;
    }
  __syncthreads();
  for (int t = threadIdx.x; t < R * W; t += blockDim.x) {
    int r = t / W, j = t % W;
    if (r0 + r < M && n0 + j < N) {
      float v = 0.f;
      for (int k = 0; k < nw; k++) v += part[k * R * W + t];
      out[(long long)(r0 + r) * N + n0 + j] = v;
    }
  }
}

// q8_dequant: out (storage type) = the dequantized weights of chunks
// 16-byte quant chunks (16·chunks weights, whole rows of a Q8_0 matrix:
// quants wq, scales ws), for a prefill's GEMM by cuBLAS. Grid-stride, one
// chunk per thread: a 16-byte load in, 16 weights out in 16-byte packs.
template <typename S>
__device__ void q8_dequant(typename S::T* out, const unsigned char* __restrict__ wq,
                           const unsigned short* __restrict__ ws, int chunks) {
  typedef typename S::T T;
  const int A = 16 / sizeof(T);
  typedef Pack<T, A> P;
  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < chunks;
       c += (long long)gridDim.x * blockDim.x) {
    float w[16];
    q8Dequant(w, ((const Q8Chunk*)wq)[c], halfToFloat(ws[c >> 1]));
    P* o = (P*)(out + c * 16);
#pragma unroll
    for (int u = 0; u < 16 / A; u++) {
      P pv;
#pragma unroll
      for (int e = 0; e < A; e++) pv.v[e] = S::st(w[u * A + e]);
      o[u] = pv;
    }
  }
}

#define TS_INSTANTIATE(S, SUF)                                                                          \
  extern "C" __global__ void embed_##SUF(float* x, const S::T* wte, const S::T* wpe,                   \
                                         const int* tokens, const int* pos, int C) {                    \
    embed<S>(x, wte, wpe, tokens, pos, C);                                                              \
  }                                                                                                     \
  extern "C" __global__ void norm_##SUF(S::T* out, const float* x, const int* rows, const S::T* w,     \
                                        const S::T* b, int C, float eps, int rms) {                     \
    norm<S>(out, x, rows, w, b, C, eps, rms);                                                           \
  }                                                                                                     \
  extern "C" __global__ void add_norm_##SUF(S::T* out, float* x, const float* in, const S::T* bias,    \
                                            const S::T* w, const S::T* b, int C, float eps, int rms) {  \
    add_norm<S>(out, x, in, bias, w, b, C, eps, rms);                                                   \
  }                                                                                                     \
  extern "C" __global__ void qkv_store_##SUF(float* q, const float* qkv, const S::T* bias,             \
                                             const S::T* qNorm, const S::T* kNorm,                      \
                                             const double* invFreq, S::T* kc, S::T* vc, const int* pos, \
                                             const int* seq, const int* bt, int maxBlocks, int bs,      \
                                             int H, int KVH, int D, float eps) {                        \
    qkv_store<S>(q, qkv, bias, qNorm, kNorm, invFreq, kc, vc, pos, seq, bt, maxBlocks, bs, H, KVH, D,   \
                 eps);                                                                                  \
  }                                                                                                     \
  extern "C" __global__ void attention_##SUF(S::T* out, const float* q, const S::T* kc,                \
                                             const S::T* vc, const int* pos, const int* seq,            \
                                             const int* bt, int maxBlocks, int bs, int QD, int KVD,     \
                                             int D, int group, float scale) {                           \
    attention<S>(out, q, kc, vc, pos, seq, bt, maxBlocks, bs, QD, KVD, D, group, scale);                \
  }                                                                                                     \
  extern "C" __global__ void attention_split_##SUF(S::T* out, float* part, const float* q,              \
                                                   const S::T* kc, const S::T* vc, const int* pos,      \
                                                   const int* seq, const int* bt, const int* rows,      \
                                                   int maxBlocks, int bs, int QD, int KVD, int D,       \
                                                   int group, float scale, int splitLen) {              \
    attention_split<S>(out, part, q, kc, vc, pos, seq, bt, rows, maxBlocks, bs, QD, KVD, D, group, scale, \
                       splitLen);                                                                       \
  }                                                                                                     \
  extern "C" __global__ void attention_combine_##SUF(S::T* out, const float* part, const int* rows,     \
                                                     int QD, int D, int splits) {                       \
    attention_combine<S>(out, part, rows, QD, D, splits);                                               \
  }                                                                                                     \
  extern "C" __global__ void flash_prefill_##SUF(S::T* out, const float* q, const S::T* kc,            \
                                                 const S::T* vc, const int* pos, const int* seq,        \
                                                 const int* bt, const int* tiles, int maxBlocks,        \
                                                 int bs, int QD, int KVD, int D, int group,             \
                                                 float scale) {                                         \
    flash_prefill<S>(out, q, kc, vc, pos, seq, bt, tiles, maxBlocks, bs, QD, KVD, D, group, scale);     \
  }                                                                                                     \
  extern "C" __global__ void bias_act_##SUF(S::T* out, const float* in, const S::T* bias, int rows,    \
                                            int cols, int useErf) {                                     \
    bias_act<S>(out, in, bias, rows, cols, useErf);                                                     \
  }                                                                                                     \
  extern "C" __global__ void silu_mul_##SUF(S::T* out, const float* in, const S::T* bias, int rows,    \
                                            int cols) {                                                 \
    silu_mul<S>(out, in, bias, rows, cols);                                                             \
  }                                                                                                     \
  extern "C" __global__ void residual_##SUF(float* x, const float* in, const S::T* bias, int rows,     \
                                            int cols) {                                                 \
    residual<S>(x, in, bias, rows, cols);                                                               \
  }                                                                                                     \
  extern "C" __global__ void embed_q8_##SUF(float* x, const signed char* wq, const unsigned short* ws,  \
                                            const S::T* wpe, const int* tokens, const int* pos, int C) {\
    embed_q8<S>(x, wq, ws, wpe, tokens, pos, C);                                                        \
  }                                                                                                     \
  extern "C" __global__ void q8_gemv1_##SUF(float* out, const S::T* in, const unsigned char* wq,        \
                                            const unsigned short* ws, int M, int K, int N) {            \
    q8_gemv<S, 1>(out, in, wq, ws, M, K, N);                                                            \
  }                                                                                                     \
  extern "C" __global__ void q8_gemv2_##SUF(float* out, const S::T* in, const unsigned char* wq,        \
                                            const unsigned short* ws, int M, int K, int N) {            \
    q8_gemv<S, 2>(out, in, wq, ws, M, K, N);                                                            \
  }                                                                                                     \
  extern "C" __global__ void q8_gemv4_##SUF(float* out, const S::T* in, const unsigned char* wq,        \
                                            const unsigned short* ws, int M, int K, int N) {            \
    q8_gemv<S, 4>(out, in, wq, ws, M, K, N);                                                            \
  }                                                                                                     \
  extern "C" __global__ void q8_gemv8_##SUF(float* out, const S::T* in, const unsigned char* wq,        \
                                            const unsigned short* ws, int M, int K, int N) {            \
    q8_gemv<S, 8>(out, in, wq, ws, M, K, N);                                                            \
  }                                                                                                     \
  extern "C" __global__ void q8_dequant_##SUF(S::T* out, const unsigned char* wq,                       \
                                              const unsigned short* ws, int chunks) {                   \
    q8_dequant<S>(out, wq, ws, chunks);                                                                 \
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
