// Picks the backend for a call: the caller's explicit choice, or AUTO by where the pointers live,
// and checks that the pointers live where the chosen backend can reach them.
#pragma once

#include "backends/backend.h"

namespace softmax_internal {

// On success *chosen is the backend to run. `mask` may be null.
Outcome choose_backend(softmax_backend requested, const void* x, const void* y, const void* mask,
                       const Backend** chosen);

}  // namespace softmax_internal
