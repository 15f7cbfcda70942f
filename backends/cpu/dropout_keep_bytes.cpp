// SPDX-License-Identifier: Apache-2.0
// Keep bytes for a run of flat elements, scalar: one Philox4x32-10 evaluation (two when
// offset % 4 != 0) per group of 4 elements, from the counter layout of backends/common/philox.h,
// and the word threshold that stands for the float compare u > p.
#include "backends/cpu/dropout_keep_bytes.h"

#include "backends/common/philox.h"

namespace softmax_internal {
namespace cpu {

int64_t dropout_word_threshold(float p) {
  int64_t lo = -1, hi = int64_t{1} << 32;  // u(lo) <= p (virtually), u(hi) > p (virtually)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (philox_word_to_uniform(static_cast<uint32_t>(mid)) <= p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

namespace {

// Keep bits of group `group` (bit j: element 4 * group + j), as dropout_keep4 defines them.
unsigned keep4(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t group) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const PhiloxBlock ctr = philox_group_counter(group, offset);
  const PhiloxBlock a = philox4x32_10(ctr, k0, k1);
  const unsigned phase = static_cast<unsigned>(offset & 3u);
  const PhiloxBlock b = phase == 0 ? a : philox4x32_10(philox_counter_next(ctr), k0, k1);
  unsigned bits = 0;
  for (unsigned j = 0; j < 4; ++j) {
    const unsigned w = phase + j;
    const uint32_t word = w < 4 ? a.v[w] : b.v[w - 4];
    bits |= (int64_t{word} > threshold ? 1u : 0u) << j;
  }
  return bits;
}

}  // namespace

void dropout_keep_bytes_scalar(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first,
                               int64_t n, uint8_t* keep) {
  if (n <= 0) return;
  const uint64_t end = first + static_cast<uint64_t>(n);
  uint64_t i = first;
  // A leading partial group.
  if (i % 4 != 0) {
    const unsigned bits = keep4(seed, offset, threshold, i / 4);
    for (; i % 4 != 0 && i < end; ++i) keep[i - first] = (bits >> (i % 4)) & 1u;
  }
  for (; i + 4 <= end; i += 4) {
    const unsigned bits = keep4(seed, offset, threshold, i / 4);
    uint8_t* k = keep + (i - first);
    k[0] = bits & 1u;
    k[1] = (bits >> 1) & 1u;
    k[2] = (bits >> 2) & 1u;
    k[3] = (bits >> 3) & 1u;
  }
  if (i < end) {
    const unsigned bits = keep4(seed, offset, threshold, i / 4);
    for (; i < end; ++i) keep[i - first] = (bits >> (i % 4)) & 1u;
  }
}

}  // namespace cpu
}  // namespace softmax_internal
