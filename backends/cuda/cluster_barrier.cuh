// Cluster barriers for the (max, sum) exchange through distributed shared memory, shared by
// cluster_row and prefetch_row.
//
// Every barrier.cluster instruction here is executed by whole warps together (.aligned), never
// from a divergent branch. Earlier versions arrived with release semantics from thread 0 alone
// (`if (threadIdx.x == 0) arrive.release; else arrive.relaxed;`), and every device run that
// carried that form hung at its first cluster shapes (H200, 2026-11-30: the test suite and the
// bench stalled; the warp-uniform .aligned form below passed the same runs): a warp split over
// two arrive instructions does not arrive once. Only warp 0 (which holds thread 0, the slot's
// writer) needs release semantics; the other warps arrive relaxed, so they never wait for their
// earlier global stores to become visible.
#pragma once

namespace softmax_internal {
namespace cuda_kernels {

// After thread 0 wrote this block's slot: when this returns, every block's slot of the
// cluster may be read.
__device__ __forceinline__ void cluster_sync_after_publish() {
  __syncwarp();
  if (threadIdx.x < 32) {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  } else {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // acquire
}

// The two halves of a barrier that needs no memory ordering of its own ("I am done reading my
// peers' slots"), split so that independent work (the row's stores) runs in between.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  __syncwarp();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  __syncwarp();
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // acquire
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
