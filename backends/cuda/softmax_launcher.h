// The CUDA backend's one launcher: picks a strategy for a call and launches it.
#pragma once

#include "backends/cuda/launch_args.h"

namespace softmax_internal {

// Fills a.vector_ok and launches warp-per-row, cluster-row or split-row (see the table in
// softmax_launcher.cu). Asynchronous on a.stream; no host synchronisation.
Outcome launch_softmax(LaunchArgs a);

}  // namespace softmax_internal
