/* SPDX-License-Identifier: Apache-2.0 */
// The dropout keep decisions of a run of flat elements as 0/1 bytes, straight from the shared
// Philox definition (backends/common/philox.h), so the CPU mask is the CUDA mask bit for bit.
#pragma once

#include <cstdint>

namespace softmax_internal {
namespace cpu {

// The keep rule u(word) > p as an integer compare on the 32-bit Philox word: the largest word
// whose uniform u(word) = float(word) * 2^-32 + 2^-33 (philox.h) is <= p, or -1 when every word is
// kept. u is non-decreasing in the word (a rounding to float, an exact power-of-two scale and a
// rounded add are each monotone), so keep = u(word) > p is exactly word > threshold.
int64_t dropout_word_threshold(float p);

// keep[j] = dropout_keep(seed, offset, first + j, p) for j in [0, n), i.e. word > threshold with
// threshold = dropout_word_threshold(p). `first` need not be a multiple of 4: Philox groups
// (4 elements each) may straddle chunk and row boundaries. One Philox block per group (two when
// offset % 4 != 0), scalar.
void dropout_keep_bytes_scalar(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first,
                               int64_t n, uint8_t* keep);

// The vector kernels' frame: the ragged head and tail of [first, first + n) (partial Philox
// groups of 4) through the scalar code, and whole_groups(g0, g1, out) for groups g0 .. g1-1,
// whose bytes start at out.
template <class WholeGroups>
inline void keep_bytes_by_groups(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first, int64_t n,
                                 uint8_t* keep, WholeGroups whole_groups) {
  if (n <= 0) return;
  const uint64_t end = first + uint64_t(n);
  const uint64_t body_begin = (first + 3) & ~uint64_t{3}, body_end = end & ~uint64_t{3};
  if (body_begin >= body_end) {
    dropout_keep_bytes_scalar(seed, offset, threshold, first, n, keep);
    return;
  }
  dropout_keep_bytes_scalar(seed, offset, threshold, first, int64_t(body_begin - first), keep);
  dropout_keep_bytes_scalar(seed, offset, threshold, body_end, int64_t(end - body_end), keep + (body_end - first));
  whole_groups(body_begin / 4, body_end / 4, keep + (body_begin - first));
}

// The same bytes from plain C++ that the compiler vectorises (per x86 level, target_clones).
void dropout_keep_bytes_portable(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first,
                                 int64_t n, uint8_t* keep);

#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
// The same bytes, computed with Highway for many Philox groups at once (runtime dispatch).
void dropout_keep_bytes_highway(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first,
                                int64_t n, uint8_t* keep);
#endif

}  // namespace cpu
}  // namespace softmax_internal
