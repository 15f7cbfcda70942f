// SPDX-License-Identifier: Apache-2.0
// Dropout keep bytes without Highway: Philox4x32-10 for many groups of 4 elements at once, one
// group per 64-bit lane of a vector. The rounds are plain vector code (GCC vector extensions,
// philox_x86_body.h) compiled once per x86 level (SSE2, AVX2, AVX-512) and picked at run time;
// elsewhere, and in builds without per-level code (clang, sanitizers), the scalar code. Bit for
// bit dropout_keep() of backends/common/philox.h (the scalar code also handles the ragged ends;
// the tests compare every element).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/target_clones.h"

#if SOFTMAX_CPU_X86_LEVELS
#include <immintrin.h>

namespace softmax_internal {
namespace cpu {
namespace philox_levels {

#pragma GCC push_options
#pragma GCC target("avx512f")
#define SOFTMAX_PHILOX_LEVEL avx512
#define SOFTMAX_PHILOX_BYTES 64
#define SOFTMAX_PHILOX_MUL_EVEN _mm512_mul_epu32
#include "backends/cpu/philox_x86_body.h"
#undef SOFTMAX_PHILOX_LEVEL
#undef SOFTMAX_PHILOX_BYTES
#undef SOFTMAX_PHILOX_MUL_EVEN
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
#define SOFTMAX_PHILOX_LEVEL avx2
#define SOFTMAX_PHILOX_BYTES 32
#define SOFTMAX_PHILOX_MUL_EVEN _mm256_mul_epu32
#include "backends/cpu/philox_x86_body.h"
#undef SOFTMAX_PHILOX_LEVEL
#undef SOFTMAX_PHILOX_BYTES
#undef SOFTMAX_PHILOX_MUL_EVEN
#pragma GCC pop_options

#define SOFTMAX_PHILOX_LEVEL sse2
#define SOFTMAX_PHILOX_BYTES 16
#define SOFTMAX_PHILOX_MUL_EVEN _mm_mul_epu32
#include "backends/cpu/philox_x86_body.h"
#undef SOFTMAX_PHILOX_LEVEL
#undef SOFTMAX_PHILOX_BYTES
#undef SOFTMAX_PHILOX_MUL_EVEN

}  // namespace philox_levels
}  // namespace cpu
}  // namespace softmax_internal
#endif

namespace softmax_internal {
namespace cpu {

namespace {

using WholeGroupsFn = void (*)(const uint32_t* k0, const uint32_t* k1, uint64_t offset, int64_t threshold,
                               uint64_t g_begin, uint64_t g_end, uint8_t* keep);

#if SOFTMAX_CPU_X86_LEVELS
WholeGroupsFn whole_groups_for_this_cpu() {
  static const WholeGroupsFn fn = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return &philox_levels::avx512::whole_groups;
    if (__builtin_cpu_supports("avx2")) return &philox_levels::avx2::whole_groups;
    return &philox_levels::sse2::whole_groups;
  }();
  return fn;
}
#endif

}  // namespace

void dropout_keep_bytes_portable(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first, int64_t n,
                                 uint8_t* keep) {
#if SOFTMAX_CPU_X86_LEVELS
  keep_bytes_by_groups(seed, offset, threshold, first, n, keep, [&](uint64_t g0, uint64_t g1, uint8_t* out) {
    uint32_t k0[10], k1[10];
    uint32_t ka = static_cast<uint32_t>(seed), kb = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r, ka += 0x9E3779B9u, kb += 0xBB67AE85u) {
      k0[r] = ka;
      k1[r] = kb;
    }
    whole_groups_for_this_cpu()(k0, k1, offset, threshold, g0, g1, out);
  });
#else
  dropout_keep_bytes_scalar(seed, offset, threshold, first, n, keep);
#endif
}

}  // namespace cpu
}  // namespace softmax_internal
