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

// The most blocks a cluster has (16 with a non-portable launch).
constexpr int kMaxClusterBlocks = 16;

// Scratch for reductions across the warps of a block (and the blocks of a cluster): two
// generations, so that one barrier per reduction suffices (a warp that races ahead to the next
// reduction writes the other generation).
template <class P, int R>
struct BlockScratch {
  P warp[2][32][R];
  // block[g][i]: the result of the cluster's block i. Each block stores its result into every block
  // of the cluster (st.async), and each store counts its bytes on the receiving block's
  // arrived[g], so a block waits on its own shared memory for its peers' results: no barrier over
  // the cluster per row, none at the end (a block leaves once it has what it waited for, and no
  // peer reads its shared memory), and no fence (H200: backends/cuda/TUNING.md).
  P block[2][kMaxClusterBlocks][R];
  uint64_t arrived[2];
};

#if SOFTMAX_CUDA_CLUSTERS
// The instructions of the cluster exchange (sm_90 PTX): shared-memory addresses, the block's rank in
// its cluster, a location in another block of the cluster, the counted store and the mbarrier's
// expected bytes and phase wait.
namespace cluster_ops {
__device__ __forceinline__ uint32_t smem(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The address of shared-memory location `local` in block `to` of the cluster.
__device__ __forceinline__ uint32_t in_block(uint32_t local, uint32_t to) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local), "r"(to));
  return r;
}
// Stores a word into a block of the cluster, counting its 4 bytes on that block's mbarrier.
__device__ __forceinline__ void store_counted(uint32_t remote, uint32_t word, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote), "r"(word),
               "r"(remote_bar)
               : "memory");
}
__device__ __forceinline__ void expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wait_phase(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred done;\n"
      "wait_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
      "@!done bra wait_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
}  // namespace cluster_ops
#endif

// Sets up the cluster exchange (BlockScratch::arrived) at the start of a block kernel that calls
// cluster_reduce; every thread of the block calls this. The cluster barrier's arrival here is
// waited for in the first cluster_reduce, so that no store reaches an mbarrier before its block
// has set it up, and the wait costs nothing by then. Both are issued whatever the cluster size (a
// launch without clusters is a cluster of one block): as a branch on it at the kernel's start,
// ptxas gave the 16-bit dropout backward 8 registers more, or spills under its register cap.
template <class P, int R>
__device__ __forceinline__ void cluster_exchange_setup(BlockScratch<P, R>& sm) {
#if SOFTMAX_CUDA_CLUSTERS
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(cluster_ops::smem(&sm.arrived[0])) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(cluster_ops::smem(&sm.arrived[1])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#else
  (void)sm;
#endif
}

// A barrier over the cluster at the end of the block kernels that take the row statistics as
// given and so exchange nothing (FromStats): not needed for their results, but without it ptxas
// (CUDA 13.0) gave them 8-16 registers more and spills of 8-40 bytes.
__device__ __forceinline__ void cluster_barrier_at_exit(int cluster) {
#if SOFTMAX_CUDA_CLUSTERS
  if (cluster > 1) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  }
#else
  (void)cluster;
#endif
}

// Merge over all threads of the block; every thread gets the result. Each level is one
// lanes_merge: the warps' partials are taken up by the lanes of every warp (lane i the i-th), so
// no thread folds a list. `gen` (0 or 1) picks the scratch generation.
template <class P, int R>
__device__ __forceinline__ void block_reduce(P (&p)[R], BlockScratch<P, R>& sm, int gen) {
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
}

// block_reduce, then the merge over the `cluster` blocks of the cluster (1: none), the same way.
// For block kernels that called cluster_exchange_setup; `round` counts their reductions from 0
// (its parity picks the scratch generation), and every block of a cluster makes the same rounds.
template <class P, int R>
__device__ __forceinline__ void cluster_reduce(P (&p)[R], BlockScratch<P, R>& sm, int round, int cluster) {
  const int gen = round & 1;
  block_reduce(p, sm, gen);
#if SOFTMAX_CUDA_CLUSTERS
  if (round == 0) asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");  // every block set up
  if (cluster > 1) {
    static_assert(sizeof(P) % 4 == 0, "partials are stored as 32-bit words");
    const int lane = threadIdx.x & 31;
    const uint32_t bar = cluster_ops::smem(&sm.arrived[gen]);
    if (threadIdx.x == 0) cluster_ops::expect_bytes(bar, uint32_t(cluster * R * sizeof(P)));
    if (threadIdx.x < unsigned(cluster)) {  // lanes of warp 0, one block of the cluster each
      const uint32_t to = threadIdx.x;
      const uint32_t slot = cluster_ops::in_block(cluster_ops::smem(&sm.block[gen][cluster_ops::rank()][0]), to);
      const uint32_t remote_bar = cluster_ops::in_block(bar, to);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint32_t* src = reinterpret_cast<const uint32_t*>(&p[r]);
#pragma unroll
        for (int w = 0; w < int(sizeof(P) / 4); ++w)
          cluster_ops::store_counted(slot + uint32_t(r * sizeof(P) + 4 * w), src[w], remote_bar);
      }
    }
    cluster_ops::wait_phase(bar, uint32_t(round >> 1) & 1u);
#pragma unroll
    for (int r = 0; r < R; ++r) p[r] = lane < cluster ? sm.block[gen][lane][r] : Identity<P>::value();
    lane_reduce(p, 32);
  }
#else
  (void)round;
  (void)cluster;
#endif
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
