// SPDX-License-Identifier: Apache-2.0
// softmax_dropout's forward kernels (forward_launch.cuh has the family), in a file of their own so
// that they compile beside the others.
#include "backends/cuda/forward_launch.cuh"

namespace softmax_internal {

Outcome launch_forward_dropout(const cuda_kernels::ForwardArgs& a, const LaunchEnv& env) {
  return forward_family::by_dtypes<cuda_kernels::Forward::Dropout>(a, env);
}

}  // namespace softmax_internal
