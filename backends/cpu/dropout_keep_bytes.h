// The dropout keep decisions of a run of flat elements as 0/1 bytes, straight from the shared
// Philox definition (backends/common/philox.h), so the CPU mask is the CUDA mask bit for bit.
#pragma once

#include <cstdint>

namespace softmax_internal {
namespace cpu {

// keep[j] = dropout_keep(seed, offset, first + j, p) for j in [0, n). `first` need not be a
// multiple of 4: Philox groups (4 elements each) may straddle chunk and row boundaries.
void dropout_keep_bytes(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n,
                        uint8_t* keep);

#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
// The same bytes, computed with Highway for many Philox groups at once (runtime dispatch).
void dropout_keep_bytes_highway(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n,
                                uint8_t* keep);
#endif

}  // namespace cpu
}  // namespace softmax_internal
