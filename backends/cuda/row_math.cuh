// SPDX-License-Identifier: Apache-2.0
// Arithmetic shared by every kernel: exp relative to a shift that is exact for any finite
// magnitude, the (max, sum) partials and their merge, and reductions over a row group (lanes of
// a warp, the warps of a block, the blocks of a cluster).
//
// exp(x - m) is exp2(fma(x - s, log2e, -c)), one rounding of the exponent either way:
//   |m| < 2^20  s = 0, c = m*log2e rounded. The rounding of c makes every value
//               exp(x - m) * 2^delta with delta = m*log2e - c, which fma gives exactly;
//               partials are converted back by 2^-delta, so nothing of the rounding survives
//               (delta stays below 2^-4 here, far from overflow).
//   otherwise   s = m, c = 0: x - m is the textbook's own rounding (for m at 1e10, c would be
//               off by up to 512 in the exponent).
// Both are the same FADD, FFMA and MUFU with per-thread operands: a per-thread choice between
// two instruction sequences compiles to both, predicated, and both issue for every element.
// The MUFU exp2 flushes results below 2^-126 to zero (the float64 result rounds to the same
// zero or to a subnormal; outputs below the smallest normal are therefore 0 or accurate).
// fp64 arithmetic (f64 storage) uses the accurate exp of libdevice.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/row_layout.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#define SOFTMAX_CUDA_CLUSTERS 1
#else
#define SOFTMAX_CUDA_CLUSTERS 0
#endif

namespace softmax_internal {
namespace cuda_kernels {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kFastShiftLimit = 1048576.0f;  // 2^20

__device__ __forceinline__ float ex2(float t) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}

// exp(x - m) for one thread's elements, see the header comment.
template <class A>
struct Shift;

template <>
struct Shift<float> {
  float m;     // the shift itself (0 for a part with no finite maximum)
  float s;     // subtracted from x first (m, or 0 in the fast form)
  float c;     // subtracted after the product (m * log2e rounded, or 0)
  float to_m;  // 2^-delta: converts a value of the fast form to exp(x - m)
  __device__ __forceinline__ explicit Shift(float max) {
    m = max == -INFINITY ? 0.0f : max;
    const bool fast = fabsf(m) < kFastShiftLimit;
    s = fast ? 0.0f : m;
    c = fast ? m * kLog2e : 0.0f;
    to_m = fast ? ex2(-fmaf(m, kLog2e, -c)) : 1.0f;
  }
  __device__ __forceinline__ float exp(float x) const { return ex2(fmaf(x - s, kLog2e, -c)); }
};

template <>
struct Shift<double> {
  double m;
  static constexpr double to_m = 1.0;
  __device__ __forceinline__ explicit Shift(double max) : m(max == -INFINITY ? 0.0 : max) {}
  __device__ __forceinline__ double exp(double x) const { return ::exp(x - m); }
};

// 1/s rounded to nearest (MUFU.RCP and one Newton step, without the division's slow path).
__device__ __forceinline__ float reciprocal(float s) { return __frcp_rn(s); }
__device__ __forceinline__ double reciprocal(double s) { return 1.0 / s; }

// exp(y) of a log-probability y <= 0 (the log-softmax backward).
__device__ __forceinline__ float exp_of(float y) { return ex2(y * kLog2e); }
__device__ __forceinline__ double exp_of(double y) { return ::exp(y); }

// exp(a - b) for two shifts (a <= b or NaN), the weight of a partial taken at a in the merge.
__device__ __forceinline__ float exp_diff(float a, float b) { return ex2((a - b) * kLog2e); }
__device__ __forceinline__ double exp_diff(double a, double b) { return ::exp(a - b); }

__device__ __forceinline__ float fmax_(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double fmax_(double a, double b) { return fmax(a, b); }

// ---- partials --------------------------------------------------------------------------------

// N sums taken relative to a shift m: s[i] = sum of exp(x - m) * w_i(x). An empty part, or one
// whose elements are all -inf, has m = -inf and s[0] = 0 (NaN when it saw a NaN or +inf): such
// terms are dropped in the merge, so an empty part never turns a finite row into NaN through
// (-inf) - (-inf), while a row of all -inf still comes out NaN (S = 0) as the textbook's.
template <class A, int N>
struct Weighted {
  A m;
  A s[N];
};

template <class A, int N>
__device__ __forceinline__ Weighted<A, N> merge(const Weighted<A, N>& a, const Weighted<A, N>& b) {
  Weighted<A, N> r;
  r.m = fmax_(a.m, b.m);
  const A wa = a.s[0] == A(0) ? A(0) : exp_diff(a.m, r.m);
  const A wb = b.s[0] == A(0) ? A(0) : exp_diff(b.m, r.m);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const A ta = a.s[0] == A(0) ? A(0) : a.s[i] * wa;
    const A tb = b.s[0] == A(0) ? A(0) : b.s[i] * wb;
    r.s[i] = ta + tb;
  }
  return r;
}

// Plain sums (the backward's dot products).
template <class A, int N>
struct Sums {
  A s[N];
};

template <class A, int N>
__device__ __forceinline__ Sums<A, N> merge(const Sums<A, N>& a, const Sums<A, N>& b) {
  Sums<A, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.s[i] = a.s[i] + b.s[i];
  return r;
}

template <class A>
__device__ __forceinline__ A shfl_xor(A v, int mask, int width) {
  return __shfl_xor_sync(kFullMask, v, mask, width);
}

template <class A>
__device__ __forceinline__ A lanes_max(A v, int width) {
  for (int o = 1; o < width; o <<= 1) v = fmax_(v, shfl_xor(v, o, width));
  return v;
}
template <class A>
__device__ __forceinline__ A lanes_sum(A v, int width) {
  for (int o = 1; o < width; o <<= 1) v += shfl_xor(v, o, width);
  return v;
}

// Merge over the `width` lanes of each segment (the same xor trees on every call, so every lane
// and every call get the same bits). Weighted partials take their maximum first, then each lane
// rescales its sums to it (one exp per lane, not one per tree step) and the sums are added.
template <class A, int N>
__device__ __forceinline__ void lanes_merge(Weighted<A, N>& p, int width) {
  const A M = lanes_max(p.m, width);
  const A w = p.s[0] == A(0) ? A(0) : exp_diff(p.m, M);
#pragma unroll
  for (int i = 0; i < N; ++i) p.s[i] = lanes_sum(p.s[0] == A(0) ? A(0) : p.s[i] * w, width);
  p.m = M;
}
template <class A, int N>
__device__ __forceinline__ void lanes_merge(Sums<A, N>& p, int width) {
#pragma unroll
  for (int i = 0; i < N; ++i) p.s[i] = lanes_sum(p.s[i], width);
}

template <class P>
struct Identity;
template <class A, int N>
struct Identity<Weighted<A, N>> {
  __device__ __forceinline__ static Weighted<A, N> value() {
    Weighted<A, N> p;
    p.m = A(-INFINITY);
#pragma unroll
    for (int i = 0; i < N; ++i) p.s[i] = A(0);
    return p;
  }
};
template <class A, int N>
struct Identity<Sums<A, N>> {
  __device__ __forceinline__ static Sums<A, N> value() {
    Sums<A, N> p;
#pragma unroll
    for (int i = 0; i < N; ++i) p.s[i] = A(0);
    return p;
  }
};

template <class P, int R>
__device__ __forceinline__ void lane_reduce(P (&p)[R], int width) {
#pragma unroll
  for (int r = 0; r < R; ++r) lanes_merge(p[r], width);
}

// Scratch for reductions across the warps of a block (and the blocks of a cluster): two
// generations, so that one barrier per reduction suffices (a warp that races ahead to the next
// reduction writes the other generation).
template <class P, int R>
struct BlockScratch {
  P warp[2][32][R];
  P block[2][R];  // this block's result, read by the other blocks of its cluster
};

// A barrier over the blocks of a cluster. Every barrier.cluster instruction is executed by whole
// warps (.aligned). With `publish`, warp 0 (which holds thread 0, the writer of the block's
// shared-memory slot) fences with release semantics before its arrival so that the slot is
// visible to the other blocks after the wait; no other warp pays for the fence, which waits for
// the thread's outstanding memory operations. The arrival itself is the same instruction for
// every warp: with two arrivals on the two sides of a branch, ptxas kept the dropout kernels'
// Philox round keys out of the uniform registers (two extra moves per round).
__device__ __forceinline__ void cluster_barrier(bool publish = false) {
#if SOFTMAX_CUDA_CLUSTERS
  if (publish && threadIdx.x < 32) asm volatile("fence.release.cluster;" ::: "memory");
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  (void)publish;
#endif
}

// Merge over all threads of the block, then over the `cluster` blocks of the cluster; every
// thread gets the same result. Each level is one lanes_merge: the warps' partials, then the
// blocks', are taken up by the lanes of every warp (lane i the i-th), so no thread folds a list.
template <class P, int R>
__device__ __forceinline__ void block_reduce(P (&p)[R], BlockScratch<P, R>& sm, int gen, int cluster) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  lane_reduce(p, 32);
  if (nwarps > 1) {  // a one-warp block (a row of a warp) has its result here already
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) sm.warp[gen][warp][r] = p[r];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r) p[r] = lane < nwarps ? sm.warp[gen][lane][r] : Identity<P>::value();
    lane_reduce(p, 32);
  }
#if SOFTMAX_CUDA_CLUSTERS
  if (cluster > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) sm.block[gen][r] = p[r];
    }
    cluster_barrier(true);
#pragma unroll
    for (int r = 0; r < R; ++r) p[r] = lane < cluster ? *cl.map_shared_rank(&sm.block[gen][r], lane) : Identity<P>::value();
    lane_reduce(p, 32);
  }
#else
  (void)cluster;
  (void)warp;
#endif
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
