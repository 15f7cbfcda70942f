/* SPDX-License-Identifier: Apache-2.0 */
// cuRAND's device API for Philox4x32-10, restated the slow way and independently of
// backends/common/philox.h, as the yardstick for every dropout mask: curand_init(seed,
// subsequence, offset) sets counter = (0, 0, subsequence) in 64-bit halves and key = seed, then
// skips `offset` 32-bit outputs (whole blocks by advancing the counter, the rest one output at a
// time); curand_uniform4 returns the next four outputs, each x * 2^-32 + 2^-33 as a float.
#pragma once

#include <cstdint>

#include "backends/common/philox.h"

namespace softmax_cpu_test {

struct SlowCurandPhilox {
  uint64_t ctr_lo, ctr_hi;
  uint32_t k0, k1;
  uint32_t buf[4];
  unsigned pos;  // next unused word of buf

  SlowCurandPhilox(uint64_t seed, uint64_t subsequence, uint64_t offset)
      : ctr_lo(0), ctr_hi(subsequence), k0(uint32_t(seed)), k1(uint32_t(seed >> 32)), pos(4) {
    // Skip offset / 4 whole blocks (a 128-bit add), then offset % 4 single outputs.
    const uint64_t blocks = offset / 4;
    ctr_lo += blocks;
    if (ctr_lo < blocks) ++ctr_hi;
    for (uint64_t i = 0; i < offset % 4; ++i) next();
  }

  uint32_t next() {
    if (pos == 4) {
      const softmax_internal::PhiloxBlock b = softmax_internal::philox4x32_10(
          softmax_internal::PhiloxBlock{{uint32_t(ctr_lo), uint32_t(ctr_lo >> 32), uint32_t(ctr_hi),
                                         uint32_t(ctr_hi >> 32)}},
          k0, k1);
      for (int i = 0; i < 4; ++i) buf[i] = b.v[i];
      if (++ctr_lo == 0) ++ctr_hi;
      pos = 0;
    }
    return buf[pos++];
  }
};

// The keep decision of flat element i: curand_uniform4 after curand_init(seed, i / 4, offset),
// component i % 4, compared with p as a float.
inline bool curand_keep(uint64_t seed, uint64_t offset, uint64_t i, float p) {
  SlowCurandPhilox s(seed, i / 4, offset);
  uint32_t w[4];
  for (int j = 0; j < 4; ++j) w[j] = s.next();
  const float u = float(w[i % 4]) * 2.3283064e-10f + 2.3283064e-10f / 2.0f;
  return u > p;
}

}  // namespace softmax_cpu_test
