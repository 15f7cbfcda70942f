// SPDX-License-Identifier: Apache-2.0
// softmax and log-softmax, row statistics and rows from statistics (forward_launch.cuh has the
// family); softmax_dropout's kernels are instantiated in dropout_forward_launch.cu.
#include "backends/cuda/forward_launch.cuh"

namespace softmax_internal {

using cuda_kernels::Forward;
using cuda_kernels::ForwardArgs;

Outcome launch_forward(const ForwardArgs& a, Forward op, const LaunchEnv& env) {
  switch (op) {
    case Forward::Softmax: return forward_family::by_dtypes<Forward::Softmax>(a, env);
    case Forward::Dropout: return launch_forward_dropout(a, env);
    case Forward::Stats: return forward_family::by_dtypes<Forward::Stats>(a, env);
    case Forward::FromStats: return forward_family::by_dtypes<Forward::FromStats>(a, env);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "launch_forward: unknown operation");
}

}  // namespace softmax_internal
