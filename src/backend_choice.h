/* SPDX-License-Identifier: Apache-2.0 */
// Picks the backend for a call: the caller's explicit choice, or AUTO by where the pointers live,
// and checks that the pointers live where the chosen backend can reach them.
#pragma once

#include <initializer_list>

#include "backends/backend.h"

namespace softmax_internal {

struct NamedPointer {
  const char* name;
  const void* ptr;  // nullptr: an optional array the call does not use
};

// On success *chosen is the backend to run. `stream`: the call's options.stream.
Outcome choose_backend(softmax_backend requested, void* stream, std::initializer_list<NamedPointer> pointers,
                       const Backend** chosen);

}  // namespace softmax_internal
