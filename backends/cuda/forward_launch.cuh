/* SPDX-License-Identifier: Apache-2.0 */
// The forward kernel family: which instantiation serves which storage types and plan.
//   x and y f32, or both 16-bit, or 16-bit x with f32 y  the full set of shapes (the speed paths;
//                                                        f32 y twice: rows on 16-byte vectors or not)
//   f32 x with 16-bit y                                   a reduced set
//   any f64                                               the generic kernels, fp64 arithmetic
// Instantiated per operation in forward_launch.cu (softmax, statistics) and
// dropout_forward_launch.cu (softmax_dropout): the two halves compile in parallel.
#pragma once

#include <type_traits>

#include "backends/cuda/launch_ops.h"
#include "backends/cuda/storage_types.h"

namespace softmax_internal {
namespace forward_family {

using namespace cuda_kernels;

// Dropout's Philox state leaves 16-bit rows half the chunks per thread (two arrays' worth).
template <class T, Forward kOp>
constexpr int kForwardArrays = kOp == Forward::Dropout && Elem<T>::kBytes == 2 ? 2 : 1;

template <class T, class Y, class A, Forward kOp>
struct Launches {
  const ForwardArgs& a;
  const LaunchEnv& env;
  static constexpr int V = kChunkElems<T>;
  static constexpr const char* kName = "softmax forward kernel launch";
  template <int K, int R>
  Outcome segment(const Plan& plan) const {
    return launch_register(register_rows_forward<T, Y, A, kOp, K, R, false>, a, a.rows, a.cols, plan, env, kName);
  }
  // softmax_dropout's blocks ran slower on a looping grid (launch_register).
  template <int K>
  Outcome block(const Plan& plan) const {
    return launch_register(register_rows_forward<T, Y, A, kOp, K, 1, true>, a, a.rows, a.cols, plan, env, kName,
                           kOp != Forward::Dropout);
  }
  Outcome split() const {
    const int64_t bytes_per_col = kGeneric<T> ? dtype_bytes(a.x_dtype) : Elem<T>::kBytes;
    return launch_split<Weighted<A, 1>>(split_rows_forward<T, Y, A, kOp>, a, a.rows, a.cols, V, int(kSplitTile),
                                        bytes_per_col, kOp != Forward::FromStats, env, kName);
  }
};

template <class T, class Y, class A, Forward kOp, bool kFull>
Outcome launch_family(const ForwardArgs& a, const LaunchEnv& env) {
  return launch_plan_of<kChunkElems<T>, kForwardArrays<T, kOp>, kFull>(a.cols, Launches<T, Y, A, kOp>{a, env}, env);
}

// Same types, and 16-bit x with f32 y (mixed-precision attention), get every shape. A y wider
// than x whose rows do not all start on a 16-byte boundary gets the kernels with the realigning
// store (Unaligned).
template <Forward kOp>
struct Family {
  const ForwardArgs& a;
  const LaunchEnv& env;
  template <class X, class Y>
  Outcome run() const {
    constexpr bool kFull =
        (kOp == Forward::Softmax || kOp == Forward::Dropout) && (std::is_same_v<X, Y> || std::is_same_v<Y, float>);
    if constexpr (Elem<Y>::kBytes > Elem<X>::kBytes) {
      if (!rows_on_vectors(a.y, a.cols, Elem<Y>::kBytes)) return launch_family<X, Unaligned<Y>, float, kOp, kFull>(a, env);
    }
    return launch_family<X, Y, float, kOp, kFull>(a, env);
  }
};

template <Forward kOp>
Outcome by_dtypes(const ForwardArgs& a, const LaunchEnv& env) {
  constexpr bool kSpeed = kOp == Forward::Softmax || kOp == Forward::Dropout;
  if constexpr (kOp == Forward::Stats) {  // no output, and never f64
    return with_types(a.x_dtype, a.x_dtype, Family<kOp>{a, env});
  } else {
    if (a.x_dtype == SOFTMAX_DTYPE_F64 || a.y_dtype == SOFTMAX_DTYPE_F64) {
      if constexpr (kSpeed) return launch_family<AnyDtype, AnyDtype, double, kOp, false>(a, env);
      return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "row statistics are never f64");
    }
    return with_types(a.x_dtype, a.y_dtype, Family<kOp>{a, env});
  }
}

}  // namespace forward_family

// softmax_dropout's share of launch_forward (dropout_forward_launch.cu).
Outcome launch_forward_dropout(const cuda_kernels::ForwardArgs& a, const LaunchEnv& env);

}  // namespace softmax_internal
