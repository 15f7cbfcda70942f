// The host Philox4x32-10 in backends/common/philox.h against the Random123 known-answer vectors
// (kat_vectors, philox4x32_10), and the dropout keep decision against its definition through
// cuRAND's curand_init / curand_uniform4 semantics, spelled out here independently.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/common/philox.h"

namespace {

using softmax_internal::PhiloxBlock;
using softmax_internal::philox4x32_10;

void expect_block(PhiloxBlock ctr, uint32_t k0, uint32_t k1, const uint32_t (&want)[4]) {
  const PhiloxBlock got = philox4x32_10(ctr, k0, k1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want[i]) << "word " << i;
}

TEST(Philox, Random123KnownAnswers) {
  expect_block(PhiloxBlock{{0, 0, 0, 0}}, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  expect_block(PhiloxBlock{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
               {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  expect_block(PhiloxBlock{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
               {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

// cuRAND's device API, restated the slow way: curand_init(seed, subsequence, offset) sets
// counter = (0, 0, subsequence) in 64-bit halves, key = seed, then skips `offset` 32-bit outputs;
// curand_uniform4 returns the next four outputs, x * 2^-32 + 2^-33 each.
struct SlowCurandPhilox {
  uint64_t ctr_lo, ctr_hi;
  uint32_t k0, k1;
  uint32_t buf[4];
  unsigned pos;  // next unused word of buf
  SlowCurandPhilox(uint64_t seed, uint64_t subsequence, uint64_t offset)
      : ctr_lo(0), ctr_hi(subsequence), k0(uint32_t(seed)), k1(uint32_t(seed >> 32)), pos(4) {
    for (uint64_t i = 0; i < offset; ++i) next();
  }
  uint32_t next() {
    if (pos == 4) {
      const PhiloxBlock b = philox4x32_10(
          PhiloxBlock{{uint32_t(ctr_lo), uint32_t(ctr_lo >> 32), uint32_t(ctr_hi), uint32_t(ctr_hi >> 32)}}, k0, k1);
      for (int i = 0; i < 4; ++i) buf[i] = b.v[i];
      if (++ctr_lo == 0) ++ctr_hi;
      pos = 0;
    }
    return buf[pos++];
  }
};

TEST(Philox, KeepDecisionMatchesCurandDefinition) {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x123456789abcdefull}}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{5}, uint64_t{13}}) {
      for (uint64_t i = 0; i < 64; ++i) {
        SlowCurandPhilox s(seed, i / 4, offset);
        uint32_t w[4];
        for (int j = 0; j < 4; ++j) w[j] = s.next();
        const float u = float(w[i % 4]) * 2.3283064e-10f + 2.3283064e-10f / 2.0f;
        for (const float p : {0.1f, 0.5f, 0.9f}) {
          EXPECT_EQ(softmax_internal::dropout_keep(seed, offset, i, p), u > p)
              << "seed " << seed << " offset " << offset << " i " << i << " p " << p;
        }
      }
    }
  }
}

TEST(Philox, UniformsLieInHalfOpenUnitInterval) {
  EXPECT_GT(softmax_internal::philox_word_to_uniform(0), 0.0f);
  EXPECT_EQ(softmax_internal::philox_word_to_uniform(0xffffffffu), 1.0f);
  // p = 1 drops everything, p = 0 keeps everything, with no special case.
  EXPECT_FALSE(softmax_internal::dropout_keep(1, 0, 0, 1.0f) && softmax_internal::dropout_keep(1, 0, 1, 1.0f));
}

}  // namespace
