// SPDX-License-Identifier: Apache-2.0
// Dropout keep bytes with Google Highway: Philox4x32-10 evaluated for many groups of 4 elements
// at once (highway_philox-inl.h), compiled for every x86 target via foreach_target.h and picked at
// run time. The result is bit for bit dropout_keep() of backends/common/philox.h (the scalar code
// handles the ragged ends, and the tests compare every element on every target).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/dropout_keep_bytes_highway.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/highway.h>

// Per-target helpers (re-included for every target by foreach_target.h).
#include "backends/cpu/highway_philox-inl.h"

#include <cstdint>
#include <cstring>

#include "backends/cpu/dropout_keep_bytes.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// Whole groups g_begin .. g_end-1 into keep (4 bytes per group, keep[0] is group g_begin's first).
template <unsigned kPhase>
HWY_INLINE void WholeGroups(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t g_begin, uint64_t g_end,
                            uint8_t* keep) {
  PhiloxKeepStream<kPhase> stream(seed, offset, threshold, g_begin);
  const size_t per_step = stream.GroupsPerStep();
  uint64_t g = g_begin;
  uint8_t* out = keep;
  for (; g + per_step <= g_end; g += per_step, out += 4 * per_step) stream.Step(out);
  if (g < g_end) {
    // The last few groups: one more step into a buffer.
    HWY_ALIGN uint8_t tail[4 * PhiloxKeepStream<kPhase>::kMaxGroupsPerStep];
    stream.Step(tail);
    std::memcpy(out, tail, 4 * size_t(g_end - g));
  }
}
#endif

// keep[j] for flat elements first .. first+n-1, bit for bit dropout_keep() of philox.h: the
// ragged head and tail groups through the scalar code, whole groups vectorised.
void KeepBytes(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first, int64_t n, uint8_t* keep) {
#if HWY_TARGET == HWY_SCALAR
  dropout_keep_bytes_scalar(seed, offset, threshold, first, n, keep);
#else
  keep_bytes_by_groups(seed, offset, threshold, first, n, keep, [&](uint64_t g0, uint64_t g1, uint8_t* out) {
    switch (offset & 3u) {
      case 0:
        return WholeGroups<0>(seed, offset, threshold, g0, g1, out);
      case 1:
        return WholeGroups<1>(seed, offset, threshold, g0, g1, out);
      case 2:
        return WholeGroups<2>(seed, offset, threshold, g0, g1, out);
      default:
        return WholeGroups<3>(seed, offset, threshold, g0, g1, out);
    }
  });
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace softmax_internal {
namespace cpu {

HWY_EXPORT(KeepBytes);

void dropout_keep_bytes_highway(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first,
                                int64_t n, uint8_t* keep) {
  HWY_DYNAMIC_DISPATCH(KeepBytes)(seed, offset, threshold, first, n, keep);
}

}  // namespace cpu
}  // namespace softmax_internal
#endif  // HWY_ONCE
