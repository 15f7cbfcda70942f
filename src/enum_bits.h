/* SPDX-License-Identifier: Apache-2.0 */
// Reads a C enum argument as a plain int without an enum-typed load. A C caller may pass any int
// in an enum parameter; in C++ a value outside the enum's range is undefined to load as the enum
// (UBSan's -fsanitize=enum flags it), so the front door looks at the bits before trusting them.
#pragma once

#include <cstring>

namespace softmax_internal {

template <class Enum>
int enum_bits(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "the C ABI's enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace softmax_internal
