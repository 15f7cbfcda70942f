// SPDX-License-Identifier: Apache-2.0
// The backward kernel family (softmax_rows_backward and the sharded backward). The layout is y's
// type (y and dy), in 8-byte chunks (Narrow) when y is 16-bit and dx f32; dx is stored as x.
// Same-type rows get the full set of shapes; mixed types a reduced one; anything with f64 the
// generic kernels.
#include "backends/cuda/launch_ops.h"
#include "backends/cuda/storage_types.h"

#include <type_traits>

namespace softmax_internal {
namespace {

using namespace cuda_kernels;

template <class T, class Y, class A, Backward kOp>
struct Launches {
  const BackwardArgs& a;
  const LaunchEnv& env;
  static constexpr int V = kChunkElems<T>;
  static constexpr const char* kName = "softmax backward kernel launch";
  template <int K, int R>
  Outcome segment(const Plan& plan) const {
    return launch_register(register_rows_backward<T, Y, A, kOp, K, R, false>, a, a.rows, a.cols, plan, env, kName,
                           Looping::WhenAlone, kDropoutOrBackwardWaves<T>);
  }
  template <int K>
  Outcome block(const Plan& plan) const {
    return launch_register(register_rows_backward<T, Y, A, kOp, K, 1, true>, a, a.rows, a.cols, plan, env, kName);
  }
  Outcome split() const {
    constexpr int kTileChunks = kSplitThreads * (kSplitK / 2);
    const int64_t bytes_per_col = 2 * (kGeneric<T> ? dtype_bytes(a.y_dtype) : Elem<T>::kBytes);
    if constexpr (kOp == Backward::Full) {
      bool launched = false;
      if (Outcome o = launch_resident_split(resident_split_rows_backward<T, Y, A, kOp>, a, a.rows, a.cols, V,
                                            kTileChunks, 2 * kHeldWords<ResidentBackwardHeld<T, A>>, bytes_per_col,
                                            env, kName, &launched);
          !o.good() || launched)
        return o;
    }
    return launch_split<Sums<A, 1>>(split_rows_backward<T, Y, A, kOp>, a, a.rows, a.cols, V, kTileChunks,
                                    bytes_per_col, split_work(kOp == Backward::FromStats, kOp == Backward::Stats),
                                    env, kName);
  }
};

// The largest cluster of the default plan (KernelFamily::max_cluster): the full backward's split
// rows are resident in shared memory, and 16-bit rows past one block, f32 (and 16-bit y with f32
// dx) rows past a cluster of four run as split rows.
template <class T, Backward kOp>
constexpr int kBackwardMaxCluster = kOp != Backward::Full ? 8 : kChunkElems<T> == 8 ? 1 : kChunkElems<T> == 4 ? 4 : 8;

template <class T, class Y, class A, Backward kOp, bool kFull>
Outcome launch_family(const BackwardArgs& a, const LaunchEnv& env) {
  return launch_plan_of<kChunkElems<T>, 2, kFull, true, false, max_chunks(kChunkElems<T>, 2), kBackwardMaxCluster<T, kOp>,
                        SmallBlockClusters::None, 0, false, false>(
      a.cols, Launches<T, Y, A, kOp>{a, env}, env);
}

// Same types get every shape.
template <Backward kOp>
struct Family {
  const BackwardArgs& a;
  const LaunchEnv& env;
  template <class T, class Y>
  Outcome run() const {
    constexpr bool kFull = kOp == Backward::Full && std::is_same_v<T, Y>;
    return launch_family<HeldLayout<T, Y>, Y, float, kOp, kFull>(a, env);
  }
};

template <Backward kOp>
Outcome by_dtypes(const BackwardArgs& a, const LaunchEnv& env) {
  constexpr bool kSpeed = kOp == Backward::Full;
  const Family<kOp> family{a, env};
  if constexpr (kOp == Backward::Stats) {  // no output, and never f64
    return with_types(a.y_dtype, a.y_dtype, family);
  } else {
    if (a.y_dtype == SOFTMAX_DTYPE_F64 || a.dx_dtype == SOFTMAX_DTYPE_F64) {
      if constexpr (kSpeed) return launch_family<AnyDtype, AnyDtype, double, kOp, false>(a, env);
      return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "row statistics are never f64");
    }
    return with_types(a.y_dtype, a.dx_dtype, family);
  }
}

}  // namespace

Outcome launch_backward(const BackwardArgs& a, Backward op, const LaunchEnv& env) {
  switch (op) {
    case Backward::Full: return by_dtypes<Backward::Full>(a, env);
    case Backward::Stats: return by_dtypes<Backward::Stats>(a, env);
    case Backward::FromStats: return by_dtypes<Backward::FromStats>(a, env);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "launch_backward: unknown operation");
}

}  // namespace softmax_internal
