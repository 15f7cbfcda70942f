// The dropout keep decision of backends/common/philox.h, computed on the device with one
// 32x32->64-bit multiply (IMAD.WIDE) per Philox multiplication instead of separate low and
// high halves (__umulhi plus a*b), and the 3-input XORs left to LOP3: about half the integer
// instructions per Philox round. Philox is what bounds fused softmax+dropout on the H200, not
// memory. The function is the same bit for bit: the CUDA tests compare every mask element
// with philox.h and with the CPU backend, and philox.h with cuRAND itself.
#pragma once

#include <cstdint>

#include "backends/common/philox.h"

namespace softmax_internal {
namespace cuda_kernels {

__device__ __forceinline__ void mul_wide(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;  // mul.wide.u32
  *lo = static_cast<uint32_t>(p);
  *hi = static_cast<uint32_t>(p >> 32);
}

__device__ __forceinline__ PhiloxBlock philox_wide(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mul_wide(kMul0, ctr.v[0], &hi0, &lo0);
    mul_wide(kMul1, ctr.v[2], &hi1, &lo1);
    ctr = PhiloxBlock{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return ctr;
}

// dropout_keep4 of philox.h: bit j set when flat element 4*group+j is kept.
__device__ __forceinline__ unsigned dropout_keep4_fast(uint64_t seed, uint64_t offset, uint64_t group,
                                                      float p) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const PhiloxBlock ctr = philox_group_counter(group, offset);
  const PhiloxBlock a = philox_wide(ctr, k0, k1);
  const unsigned phase = static_cast<unsigned>(offset & 3u);
  unsigned bits = 0;
  if (phase == 0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) bits |= (philox_word_to_uniform(a.v[j]) > p ? 1u : 0u) << j;
    return bits;
  }
  const PhiloxBlock b = philox_wide(philox_counter_next(ctr), k0, k1);
  // Words phase .. phase+3 of the 8 (a then b), selected without a run-time array index
  // (which would put the words in local memory).
  uint32_t w[4];
  if (phase == 1) {
    w[0] = a.v[1], w[1] = a.v[2], w[2] = a.v[3], w[3] = b.v[0];
  } else if (phase == 2) {
    w[0] = a.v[2], w[1] = a.v[3], w[2] = b.v[0], w[3] = b.v[1];
  } else {
    w[0] = a.v[3], w[1] = b.v[0], w[2] = b.v[1], w[3] = b.v[2];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) bits |= (philox_word_to_uniform(w[j]) > p ? 1u : 0u) << j;
  return bits;
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
