// Block-per-row and cluster-per-row softmax for medium and long rows (1K to 128K columns): the
// row is held in registers (16 or 32 elements per thread), spread over one block or over a
// thread-block cluster of up to 8 blocks on 8 SMs, so global memory is read once and written
// once. The cluster's blocks exchange their block max and block sum through distributed shared
// memory (DSMEM), which costs two cluster barriers per row instead of a second pass over
// memory. Splitting a long row over a cluster, rather than giving one block a huge row, also
// keeps several blocks resident per SM, so one block's loads overlap another's reductions and
// stores. Measured on the H200 (fp32, 1 GiB, run-4 sweep): 4K columns on one 128-thread block
// 3.9 TB/s (94% of copy), 8K on a cluster of 2 3.5, 16K on 4 3.1, 32K on 8 2.8, 64K on 8
// 256-thread blocks 2.4: each cluster barrier stalls all of its blocks, so long rows still
// fall short of the copy rate.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "backends/cuda/cluster_barrier.cuh"
#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/launch_args.h"
#include "backends/cuda/row_math.cuh"

namespace cg = cooperative_groups;

namespace softmax_internal {
namespace cuda_kernels {

// Thread 0 stores `value` into this block's slot; after the call every block of the cluster
// may read every block's slot.
__device__ __forceinline__ void publish_to_cluster(float* slot, float value) {
  if (threadIdx.x == 0) *slot = value;
  cluster_sync_after_publish();
}

// Each block owns `slice` consecutive columns of its row (a multiple of kVec; the last block
// may own fewer); thread t holds accesses t, t + blockDim, ... of the slice. The cluster size
// comes from the launch attribute (1 when launched without clusters). One row per cluster
// (the row loop only matters past 2^30 clusters). A persistent variant that looped clusters
// over rows with a single (max, sum) exchange per row was tried: the device run that carried
// it (with other changes) hung, the cause was not isolated, and it was withdrawn.
template <class T, bool kDropout, int kVec, int kElemsPerThread>
__global__ void __launch_bounds__(kClusterMaxThreads)
    cluster_row_softmax(const T* x, T* y, int64_t rows, int64_t cols, int64_t slice, RowEpilogue ep) {
  constexpr int kPerThread = kElemsPerThread / kVec;
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];
  __shared__ float cluster_slot[2];  // this block's max and sum, read by the other blocks

  cg::cluster_group cluster = cg::this_cluster();
  const int csize = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t begin = rank * slice;
  const int64_t end = min(begin + slice, cols);
  const int64_t first_row = blockIdx.x / csize, row_stride = gridDim.x / csize;

  for (int64_t row = first_row; row < rows; row += row_stride) {
    const int64_t row_start = row * cols;
    float v[kPerThread][kVec];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t col = begin + (threadIdx.x + int64_t{k} * blockDim.x) * kVec;
      if (col < end) {
        Chunk<T, kVec>::load(x + row_start + col, v[k]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) m = fmaxf(m, v[k][j]);
      }
    }
    m = block_max(m, max_scratch);
    if (csize > 1) {
      publish_to_cluster(&cluster_slot[0], m);
      m = *cluster.map_shared_rank(&cluster_slot[0], 0);
      for (int r = 1; r < csize; ++r) m = fmaxf(m, *cluster.map_shared_rank(&cluster_slot[0], r));
    }
    const float m_log2e = m * kLog2e;

    float s = exp_sum_in_place(v, m_log2e, ep.log_softmax, [&](int k) {
      return begin + (threadIdx.x + int64_t{k} * blockDim.x) * kVec < end;
    });
    s = block_sum(s, sum_scratch);
    if (csize > 1) {
      // Safe to overwrite: every block read slot 0 before arriving at the barrier below.
      publish_to_cluster(&cluster_slot[1], s);
      s = *cluster.map_shared_rank(&cluster_slot[1], 0);
      for (int r = 1; r < csize; ++r) s += *cluster.map_shared_rank(&cluster_slot[1], r);
      // "Done reading the others' slots": paired with the wait after the stores below, so
      // nobody overwrites a slot (next row) or exits while a peer may still read it, without
      // a full barrier between this row's stores and the next row (or the exit).
      cluster_arrive_relaxed();
    }

    const RowScale rs = row_scale(m, s, ep, kDropout);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t col = begin + (threadIdx.x + int64_t{k} * blockDim.x) * kVec;
      if (col < end) finish_chunk<T, kDropout, kVec>(v[k], y, row_start + col, rs, ep);
    }
    if (csize > 1) cluster_wait();
  }
}

template <class T, bool kDropout, int kVec, int kElemsPerThread>
Outcome launch_shape(const LaunchArgs& a, int cluster, int threads) {
  const int64_t slice = ((a.cols + cluster - 1) / cluster + kVec - 1) / kVec * kVec;
  // Rows beyond ~2^30 clusters are taken by the kernel's row loop.
  const int64_t clusters = std::min<int64_t>(a.rows, (int64_t{1} << 30) / cluster);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * cluster));
  cfg.blockDim = dim3(threads);
  cfg.stream = a.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 1 : 0;
  const cudaError_t err =
      cudaLaunchKernelEx(&cfg, cluster_row_softmax<T, kDropout, kVec, kElemsPerThread>, static_cast<const T*>(a.x),
                         static_cast<T*>(a.y), a.rows, a.cols, slice, a.ep);
  if (err != cudaSuccess) return cuda_failure("cluster_row_softmax launch", err);
  return cuda_launch_outcome("cluster_row_softmax launch");
}

// The scalar variant (kVec = 1) exists with 16 elements per thread only (32 would spill).
template <class T, bool kDropout, int kElemsPerThread>
Outcome launch_typed(const LaunchArgs& a, int cluster, int threads) {
  if (a.vector_ok) return launch_shape<T, kDropout, Storage<T>::kVec, kElemsPerThread>(a, cluster, threads);
  if constexpr (kElemsPerThread == 16) return launch_shape<T, kDropout, 1, 16>(a, cluster, threads);
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "cluster_row_softmax: scalar path holds 16 elements per thread");
}

template <class T>
Outcome launch_dtype(const LaunchArgs& a, int cluster, int threads, int elems_per_thread) {
  if (elems_per_thread == 32 && a.vector_ok) {
    return a.dropout ? launch_typed<T, true, 32>(a, cluster, threads)
                     : launch_typed<T, false, 32>(a, cluster, threads);
  }
  return a.dropout ? launch_typed<T, true, 16>(a, cluster, threads)
                   : launch_typed<T, false, 16>(a, cluster, threads);
}

}  // namespace cuda_kernels

Outcome launch_cluster_row(const LaunchArgs& a, int cluster, int threads, int elems_per_thread) {
  using namespace cuda_kernels;
  switch (a.dtype) {
    case SOFTMAX_DTYPE_F32: return launch_dtype<float>(a, cluster, threads, elems_per_thread);
    case SOFTMAX_DTYPE_F16: return launch_dtype<__half>(a, cluster, threads, elems_per_thread);
    case SOFTMAX_DTYPE_BF16: return launch_dtype<__nv_bfloat16>(a, cluster, threads, elems_per_thread);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "cluster_row_softmax: unknown dtype");
}

}  // namespace softmax_internal
