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
