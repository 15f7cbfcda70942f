/* SPDX-License-Identifier: Apache-2.0 */
// 64-byte aligned host arrays of the CPU section (freed with std::free; exit code 2 when the
// machine has not got the memory).
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace bench {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBytes = std::unique_ptr<unsigned char, FreeDeleter>;

inline HostBytes host_alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) & ~size_t(63));
  if (!p) {
    std::fprintf(stderr, "softmax_bench: out of host memory (%zu bytes)\n", bytes);
    std::exit(2);
  }
  return HostBytes(static_cast<unsigned char*>(p));
}

}  // namespace bench
