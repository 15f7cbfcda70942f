// Prefetching row softmax for long rows (past 4K fp32 / 1K 16-bit columns, up to 128K, 16-byte
// aligned): a persistent grid of blocks (or clusters of up to 8 blocks, each owning a slice of
// the row) loops over rows, and while it reduces and writes one row, the next rows are already
// on their way into a shared-memory ring: one bulk copy per block and row by the copy engine
// (TMA), completing on an mbarrier, or per-thread 16-byte cp.async copies (the launcher picks:
// bulk for softmax, cp.async for dropout, from the sweep in bench/RESULTS.md).
//
// Why: the cluster_row kernel holds a row in registers and issues its loads only when the block
// starts the row; between the loads and the stores it waits for block and cluster barriers,
// and during those waits its SM has nothing in flight unless other blocks happen to be loading.
// Measured on the H200 (fp32, 1 GiB) that left long rows at 2.2-3.1 TB/s (8K-64K columns) and
// 16-bit rows at 1.1-2.7 TB/s, where a block's row holds half the bytes; prefetch_row runs them
// at 2.6-3.4 and 2.4-3.3. With cp.async each thread copies exactly the 16-byte pieces it will
// later read itself, so that ring needs no block barrier at all: cp.async.wait_group orders a
// thread's own copies, and a slot is refilled only after the same thread has consumed what it
// held. The bulk ring is refilled by thread 0 after the block barrier inside block_max.
//
// Cluster exchange: one (max, sum) pair per block and row through distributed shared memory
// and a single cluster barrier per row (the cluster_row kernel needs two): each block sums its
// exps against its own max, and the pairs are merged with the online rule in rank order, the
// same order in every block, so all blocks scale by bit-identical numbers.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/cluster_barrier.cuh"
#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/launch_args.h"
#include "backends/cuda/resident_grid.h"
#include "backends/cuda/row_math.cuh"

namespace cg = cooperative_groups;

namespace softmax_internal {
namespace cuda_kernels {

// ---- cp.async (sm_80+): 16-byte global -> shared copies that complete asynchronously ----------
__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // .cg: cached in L2 only; the row is read once from global memory, L1 would only be polluted.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void commit_async_copies() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_async_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// ---- bulk copies (sm_90): one thread moves a whole slice, completion counted on an mbarrier --
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Generic-proxy accesses to shared memory before this are ordered before later bulk copies.
__device__ __forceinline__ void async_proxy_fence() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Thread 0: arm `bar` for `bytes` and start copying them from global `src` into shared `dst`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
}
// Waits until the phase with parity `phase` of `bar` has completed (the copy has landed).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned phase) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(phase)
        : "memory");
  } while (!done);
}

// Each block owns `slice` consecutive columns (a multiple of the vector width; the last block
// may own fewer); thread t holds vectors t, t + blockDim, ... of the slice, kPerThread of them.
// Cluster c takes rows c, c + clusters, ...; every block of a cluster sees the same rows, so
// all of them arrive at every cluster barrier.
//
// kBulk: thread 0 fills a stage with one bulk copy of the block's slice (the ring's layout is
// the slice's own: piece k * blockDim + t), completing on the stage's mbarrier, `stages` deep
// (run-time: waits on mbarriers take no immediate). Otherwise every thread copies its own
// pieces with cp.async, kPrefetchStages deep.
template <class T, bool kDropout, bool kBulk>
__global__ void __launch_bounds__(kPrefetchMaxThreads)
    prefetch_row_softmax(const T* x, T* y, int64_t rows, int64_t cols, int64_t slice, int stages,
                         RowEpilogue ep) {
  constexpr int kVec = Storage<T>::kVec;
  constexpr int kPerThread = kPrefetchElemsPerThread / kVec;
  extern __shared__ uint4 ring[];  // [stages][kPerThread][blockDim.x] 16-byte pieces
  __shared__ uint64_t landed[kPrefetchMaxStages];  // kBulk: one mbarrier per stage
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];
  __shared__ float2 exchange[2];  // this block's (max, sum), by row parity (see below)

  cg::cluster_group cluster = cg::this_cluster();
  const int csize = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t begin = rank * slice;
  const int64_t end = min(begin + slice, cols);
  const int64_t first_row = blockIdx.x / csize, row_stride = gridDim.x / csize;
  const int threads = blockDim.x;

  // Column of the thread's k-th vector, and its ring slot in a stage. Consecutive threads own
  // consecutive 16-byte pieces, in global memory (coalesced) and in shared memory (no conflicts).
  auto column = [&](int k) { return begin + (threadIdx.x + int64_t{k} * threads) * kVec; };
  auto slot = [&](int stage, int k) { return ring + (stage * kPerThread + k) * threads + threadIdx.x; };
  // Every call commits one group, empty past the last row, so that "group i holds the i-th row
  // this thread handles" and the fixed wait count below stays right.
  auto prefetch = [&](int64_t row, int stage) {
    if (row < rows) {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int64_t col = column(k);
        if (col < end) copy_async_16(slot(stage, k), x + row * cols + col);
      }
    }
    commit_async_copies();
  };

  if constexpr (!kBulk) stages = kPrefetchStages;
  const unsigned slice_bytes = static_cast<unsigned>((end - begin) * sizeof(T));
  // kBulk, thread 0 only: the row's slice into `stage`, or nothing past the last row.
  auto bulk_prefetch = [&](int64_t row, int stage) {
    if (row < rows) bulk_copy(slot(stage, 0), x + row * cols + begin, slice_bytes, &landed[stage]);
  };
  if constexpr (kBulk) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < stages; ++s) mbarrier_init(&landed[s], 1);
      mbarrier_init_fence();
      for (int s = 0; s < stages; ++s) bulk_prefetch(first_row + s * row_stride, s);
    }
    __syncthreads();  // the barriers are initialised before anyone waits on them
  } else {
#pragma unroll
    for (int s = 0; s < kPrefetchStages; ++s) prefetch(first_row + s * row_stride, s);
  }

  int stage = 0;
  unsigned phase = 0;  // kBulk: parity of the current use of `stage`'s mbarrier
  int parity = 0;
  for (int64_t row = first_row; row < rows; row += row_stride) {
    if constexpr (kBulk) {
      mbarrier_wait(&landed[stage], phase);
    } else {
      wait_async_copies<kPrefetchStages - 1>();  // this row's group has landed
    }
    float v[kPerThread][kVec];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      if (column(k) < end) {
        Storage<T>::load_vec(reinterpret_cast<const T*>(slot(stage, k)), v[k]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) m = fmaxf(m, v[k][j]);
      }
    }
    // The values are in registers (m depends on every one of them), so the slots can take the
    // row `stages` steps ahead. cp.async: only this thread ever reads or fills them. Bulk: the
    // block barrier inside block_max orders every thread's reads before thread 0 refills.
    if constexpr (!kBulk) prefetch(row + kPrefetchStages * row_stride, stage);
    m = block_max(m, max_scratch);
    if constexpr (kBulk) {
      if (threadIdx.x == 0) {
        async_proxy_fence();
        bulk_prefetch(row + stages * row_stride, stage);
      }
    }
    if (++stage == stages) {
      stage = 0;
      phase ^= 1;
    }

    const float shift = part_shift(m);
    const float shift_log2e = shift * kLog2e;
    float s = exp_sum_in_place(v, shift_log2e, ep.log_softmax, [&](int k) { return column(k) < end; });
    s = block_sum(s, sum_scratch);

    // The row's max M and sum S (sum of exp(x - M)), and this block's factor from its own exps
    // to the result: exp(shift - M) / S.
    MaxSum row_ms{m, s};
    if (csize > 1) {
      // Slot `parity` is rewritten two rows later, after the next row's barrier, which every
      // peer reaches only after it has read this row's slots (its stores of this row consume
      // the values read, and they issue before its next arrive): one barrier per row suffices.
      if (threadIdx.x == 0) exchange[parity] = make_float2(m, s);
      cluster_sync_after_publish();
      const float2 first = *cluster.map_shared_rank(&exchange[parity], 0);
      row_ms = {first.x, first.y};
      for (int r = 1; r < csize; ++r) {
        const float2 p = *cluster.map_shared_rank(&exchange[parity], r);
        row_ms = merge(row_ms, {p.x, p.y});
      }
      parity ^= 1;
    }
    // Non-finite rows come out as the textbook says (see MaxSum): an all -inf row has M = -inf
    // and S = 0, so 0 * (1/0) = NaN; a NaN or +inf anywhere makes S NaN, hence every factor.
    float factor;
    if (m == row_ms.m) {
      factor = 1.0f / row_ms.s;
    } else if (m == -INFINITY) {
      factor = 0.0f * (1.0f / row_ms.s);  // this part's exps are 0 (or NaN): 0 unless S is NaN
    } else {
      factor = exp2f((shift - row_ms.m) * kLog2e) / row_ms.s;
    }
    RowScale rs;
    rs.max_log2e = shift_log2e;
    rs.scale = kDropout ? factor * ep.keep_scale : factor;
    rs.log_offset = row_ms.m + logf(row_ms.s);

    const int64_t row_start = row * cols;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t col = column(k);
      if (col < end) finish_chunk<T, kDropout, kVec>(v[k], y, row_start + col, rs, ep);
    }
  }
  // Nobody may leave while a peer can still read its exchange slot.
  if (csize > 1) {
    cluster_arrive_relaxed();
    cluster_wait();
  }
}

template <class T, bool kDropout, bool kBulk>
Outcome launch_typed(const LaunchArgs& a, int cluster, int threads, int stages) {
  constexpr int kPerThread = kPrefetchElemsPerThread / Storage<T>::kVec;
  const auto kernel = prefetch_row_softmax<T, kDropout, kBulk>;
  const int stage_bytes = kPerThread * threads * 16;
  // As deep as asked, within what one block may hold (1 KB left for the static arrays).
  stages = kBulk ? std::max(2, std::min(stages, (a.limits->max_smem_per_block_optin - 1024) / stage_bytes))
                 : kPrefetchStages;
  const int smem = stages * stage_bytes;
  int resident = 0;
  const ResidentQuery q{reinterpret_cast<const void*>(kernel), a.device, threads, cluster, smem,
                        a.limits->max_smem_per_block_optin};
  if (Outcome o = resident_clusters(q, a.limits->sm_count, &resident); !o.good()) return o;
  if (resident <= 0) {
    return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                         "prefetch_row_softmax: the chosen block shape cannot run on this device");
  }
  const int64_t clusters = std::min<int64_t>(a.rows, resident);
  const int64_t vec = Storage<T>::kVec;
  const int64_t slice = ((a.cols + cluster - 1) / cluster + vec - 1) / vec * vec;

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * cluster));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = a.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x),
                                             static_cast<T*>(a.y), a.rows, a.cols, slice, stages, a.ep);
  if (err != cudaSuccess) return cuda_failure("prefetch_row_softmax launch", err);
  return cuda_launch_outcome("prefetch_row_softmax launch");
}

template <class T>
Outcome launch_dtype(const LaunchArgs& a, int cluster, int threads, int stages) {
  if (stages > 0) {
    return a.dropout ? launch_typed<T, true, true>(a, cluster, threads, stages)
                     : launch_typed<T, false, true>(a, cluster, threads, stages);
  }
  return a.dropout ? launch_typed<T, true, false>(a, cluster, threads, 0)
                   : launch_typed<T, false, false>(a, cluster, threads, 0);
}

}  // namespace cuda_kernels

Outcome launch_prefetch_row(const LaunchArgs& a, int cluster, int threads, int bulk_stages) {
  using namespace cuda_kernels;
  if (!a.vector_ok) {
    return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                         "prefetch_row_softmax needs 16-byte aligned rows");
  }
  switch (a.dtype) {
    case SOFTMAX_DTYPE_F32: return launch_dtype<float>(a, cluster, threads, bulk_stages);
    case SOFTMAX_DTYPE_F16: return launch_dtype<__half>(a, cluster, threads, bulk_stages);
    case SOFTMAX_DTYPE_BF16: return launch_dtype<__nv_bfloat16>(a, cluster, threads, bulk_stages);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "prefetch_row_softmax: unknown dtype");
}

}  // namespace softmax_internal
