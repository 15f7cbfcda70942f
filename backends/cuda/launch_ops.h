/* SPDX-License-Identifier: Apache-2.0 */
// The CUDA backend's operations as the backend table sees them: one validated call, turned into
// kernel arguments and launched by its plan. Asynchronous on env.stream; nothing synchronises.
#pragma once

#include "backends/backend.h"
#include "backends/cuda/backward_kernels.cuh"
#include "backends/cuda/dropout_backward_kernels.cuh"
#include "backends/cuda/forward_kernels.cuh"
#include "backends/cuda/kernel_launch.cuh"

namespace softmax_internal {

// softmax, log-softmax, dropout, row statistics, rows from statistics (forward_launch.cu).
Outcome launch_forward(const cuda_kernels::ForwardArgs& args, cuda_kernels::Forward op, const LaunchEnv& env);

// softmax_rows_backward and the sharded backward (backward_launch.cu).
Outcome launch_backward(const cuda_kernels::BackwardArgs& args, cuda_kernels::Backward op, const LaunchEnv& env);

// softmax_dropout_backward (dropout_backward_launch.cu).
Outcome launch_dropout_backward(const cuda_kernels::DropoutBackwardArgs& args, const LaunchEnv& env);

}  // namespace softmax_internal
