// Device-side building blocks shared by every strategy: storage <-> fp32 conversion with
// 16-byte vectors, the exp used everywhere, warp/block reductions, the (max, sum) merge for
// partial rows, and the per-element epilogue (softmax / log-softmax / dropout).
//
// Why the exp is written as exp2(fma(x, log2e, -max*log2e)): one FFMA and one MUFU.EX2 per
// element. The rounding of max*log2e is the same constant for every element of the row, so it
// cancels in the normalisation; what remains is the rounding of the fma result (< 2^-20 in the
// exponent for |x - max| < 16) plus ex2.approx's 2 ulp: under 1e-6 relative, inside the fp32
// tolerance of tests/common/reference.h. A full-precision expf would cost ~8 more instructions
// per element; for 16-bit storage the MUFU rate is already the tighter limit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/common/philox.h"
#include "backends/cuda/row_epilogue.h"

namespace softmax_internal {
namespace cuda_kernels {

constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFullMask = 0xffffffffu;

// ---- storage types ---------------------------------------------------------------------------

template <class T>
struct Storage;

template <>
struct Storage<float> {
  static constexpr int kVec = 4;  // elements per 16-byte vector
  __device__ __forceinline__ static float load(const float* p) { return *p; }
  __device__ __forceinline__ static void store(float* p, float v) { *p = v; }
  __device__ __forceinline__ static void load_vec(const float* p, float (&v)[4]) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  }
  __device__ __forceinline__ static void store_vec(float* p, const float (&v)[4]) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
};

template <>
struct Storage<__half> {
  static constexpr int kVec = 8;
  __device__ __forceinline__ static float load(const __half* p) { return __half2float(*p); }
  __device__ __forceinline__ static void store(__half* p, float v) { *p = __float2half_rn(v); }
  __device__ __forceinline__ static void load_vec(const __half* p, float (&v)[8]) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&q);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
  }
  __device__ __forceinline__ static void store_vec(__half* p, const float (&v)[8]) {
    uint4 q;
    __half2* h = reinterpret_cast<__half2*>(&q);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = q;
  }
};

template <>
struct Storage<__nv_bfloat16> {
  static constexpr int kVec = 8;
  __device__ __forceinline__ static float load(const __nv_bfloat16* p) {
    return __bfloat162float(*p);
  }
  __device__ __forceinline__ static void store(__nv_bfloat16* p, float v) {
    *p = __float2bfloat16_rn(v);
  }
  __device__ __forceinline__ static void load_vec(const __nv_bfloat16* p, float (&v)[8]) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
  }
  __device__ __forceinline__ static void store_vec(__nv_bfloat16* p, const float (&v)[8]) {
    uint4 q;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&q);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = q;
  }
};

// A group of kVec consecutive elements handled together: a 16-byte vector when kVec equals the
// storage's vector width (pointers and cols allow it), otherwise a single element (kVec == 1).
template <class T, int kVec>
struct Chunk {
  __device__ __forceinline__ static void load(const T* p, float (&v)[kVec]) {
    if constexpr (kVec == 1) {
      v[0] = Storage<T>::load(p);
    } else {
      static_assert(kVec == Storage<T>::kVec, "vector width must be 16 bytes");
      Storage<T>::load_vec(p, v);
    }
  }
  __device__ __forceinline__ static void store(T* p, const float (&v)[kVec]) {
    if constexpr (kVec == 1) {
      Storage<T>::store(p, v[0]);
    } else {
      Storage<T>::store_vec(p, v);
    }
  }
};

// ---- arithmetic ------------------------------------------------------------------------------

// exp(x - max) given max_log2e = max * log2(e). See the header comment for the accuracy.
__device__ __forceinline__ float exp_shifted(float x, float max_log2e) {
  return exp2f(fmaf(x, kLog2e, -max_log2e));
}

// Reductions over `width` lanes (a power of two <= 32) of the calling lane's group; xor
// shuffles with offsets < width never leave the group, so sub-warp groups reduce independently.
__device__ __forceinline__ float group_max(float v, int width) {
  for (int o = width >> 1; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int o = width >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Block-wide max / sum; every thread gets the result. Each thread folds the per-warp values in
// the same order, so all threads (and all blocks of a row) see bit-identical results.
// `scratch` holds 32 floats; the caller must put a barrier between two uses of one scratch.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = (blockDim.x + 31) >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < nwarps; ++w) r = fmaxf(r, scratch[w]);
  return r;
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = (blockDim.x + 31) >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < nwarps; ++w) r += scratch[w];
  return r;
}

// Sum of exp(v - shift) over a thread's held row piece (the accesses k with held(k)), given
// shift_log2e = shift * log2(e). v becomes those exps for softmax; log-softmax keeps x, which
// its epilogue needs. Shared by the block and cluster kernels that hold rows in registers.
template <int kPerThread, int kVec, class Held>
__device__ __forceinline__ float exp_sum_in_place(float (&v)[kPerThread][kVec], float shift_log2e,
                                                  bool log_softmax, Held held) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    if (held(k)) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float e = exp_shifted(v[k][j], shift_log2e);
        s += e;
        if (!log_softmax) v[k][j] = e;
      }
    }
  }
  return s;
}

// A partial row: s = sum of exp(x - m) over its elements. An empty part, or one whose finite
// elements are all -inf, has m = -inf and s in {0, NaN} (NaN when it saw a NaN): its exps were
// taken with shift 0, so -inf contributes 0 and NaN stays NaN. That keeps the textbook results
// for non-finite rows (all -inf -> NaN, any NaN or +inf -> NaN) when partials are merged.
struct MaxSum {
  float m;
  float s;
};

// The online rule m = max(ma, mb), s = sa e^(ma-m) + sb e^(mb-m), with s == 0 terms dropped so
// that an empty/-inf part never turns a finite row into NaN through (-inf) - (-inf).
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  const float ta = a.s == 0.0f ? 0.0f : a.s * exp2f((a.m - m) * kLog2e);
  const float tb = b.s == 0.0f ? 0.0f : b.s * exp2f((b.m - m) * kLog2e);
  return {m, ta + tb};
}

// The shift used for a part's exps: its max, or 0 when its max is -inf (see MaxSum).
__device__ __forceinline__ float part_shift(float m) { return m == -INFINITY ? 0.0f : m; }

// ---- epilogue --------------------------------------------------------------------------------

// The row's final numbers, computed once per row from its max M and sum S.
struct RowScale {
  float max_log2e;   // M * log2(e), the shift for exp_shifted
  float scale;       // 1/S (times the dropout scale when dropout is on)
  float log_offset;  // M + log(S), for log-softmax
};

__device__ __forceinline__ RowScale row_scale(float M, float S, const RowEpilogue& ep,
                                              bool dropout) {
  RowScale r;
  r.max_log2e = M * kLog2e;
  const float inv = 1.0f / S;
  r.scale = dropout ? inv * ep.keep_scale : inv;
  r.log_offset = M + logf(S);
  return r;
}

// Dropout on kVec consecutive elements starting at flat index `flat`. With kVec >= 4 the
// caller guarantees flat % 4 == 0 (cols % kVec == 0), so each Philox block serves exactly 4
// elements; the scalar path (kVec == 1) evaluates the element's group and picks its bit.
template <int kVec>
__device__ __forceinline__ void apply_dropout(float (&v)[kVec], uint64_t flat, const RowEpilogue& ep,
                                              uint8_t (&keep)[kVec]) {
  if constexpr (kVec == 1) {
    const unsigned bits = dropout_keep4(ep.seed, ep.offset, flat >> 2, ep.p);
    keep[0] = (bits >> (flat & 3u)) & 1u;
    if (!keep[0]) v[0] = 0.0f;
  } else {
#pragma unroll
    for (int g = 0; g < kVec / 4; ++g) {
      const unsigned bits = dropout_keep4(ep.seed, ep.offset, (flat >> 2) + g, ep.p);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        keep[4 * g + j] = (bits >> j) & 1u;
        if (!keep[4 * g + j]) v[4 * g + j] = 0.0f;
      }
    }
  }
}

template <int kVec>
__device__ __forceinline__ void store_mask(uint8_t* mask, const uint8_t (&keep)[kVec]) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<uint32_t*>(mask) = keep[0] | keep[1] << 8 | keep[2] << 16 | uint32_t(keep[3]) << 24;
  } else if constexpr (kVec == 8) {
    uint2 q;
    q.x = keep[0] | keep[1] << 8 | keep[2] << 16 | uint32_t(keep[3]) << 24;
    q.y = keep[4] | keep[5] << 8 | keep[6] << 16 | uint32_t(keep[7]) << 24;
    *reinterpret_cast<uint2*>(mask) = q;
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) mask[j] = keep[j];
  }
}

// Turns kVec elements into outputs and stores them. `v` holds exp(x - M) for softmax (already
// computed in the sum pass) or x itself for log-softmax.
template <class T, bool kDropout, int kVec>
__device__ __forceinline__ void finish_chunk(float (&v)[kVec], T* y, uint64_t flat,
                                             const RowScale& rs, const RowEpilogue& ep) {
  if (ep.log_softmax) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = v[j] - rs.log_offset;
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] *= rs.scale;
  }
  if constexpr (kDropout) {
    uint8_t keep[kVec];
    apply_dropout<kVec>(v, flat, ep, keep);
    if (ep.keep_mask != nullptr) store_mask<kVec>(ep.keep_mask + flat, keep);
  }
  Chunk<T, kVec>::store(y + flat, v);
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
