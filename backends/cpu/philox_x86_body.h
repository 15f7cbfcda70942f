/* SPDX-License-Identifier: Apache-2.0 */
// The keep-byte Philox kernel of dropout_keep_bytes_portable.cpp for one x86 vector width, written
// once with GCC vector extensions and included once per level inside a `#pragma GCC target`
// region (so each copy is compiled for its level). The including file defines:
//   SOFTMAX_PHILOX_LEVEL      the namespace of this copy (sse2, avx2, avx512)
//   SOFTMAX_PHILOX_BYTES      the vector width in bytes (16, 32, 64)
//   SOFTMAX_PHILOX_MUL_EVEN   the intrinsic for 32x32->64 products of the low halves of 64-bit
//                             lanes (_mm_mul_epu32 and its wider forms), the one operation GCC
//                             does not produce from plain code (it emulates 64-bit products).
// No include guard: meant to be included several times.

namespace SOFTMAX_PHILOX_LEVEL {

using Lanes64 = uint64_t __attribute__((vector_size(SOFTMAX_PHILOX_BYTES)));
using Raw = long long __attribute__((vector_size(SOFTMAX_PHILOX_BYTES)));
constexpr size_t kLanes = SOFTMAX_PHILOX_BYTES / 8;
// Independent sets of vectors per step, for the multiply latency (as in highway_philox-inl.h).
constexpr size_t kSets = SOFTMAX_PHILOX_BYTES == 64 ? 4 : SOFTMAX_PHILOX_BYTES == 32 ? 3 : 2;

inline __attribute__((always_inline)) Lanes64 mul_even(Lanes64 a, Lanes64 b) {
  return reinterpret_cast<Lanes64>(SOFTMAX_PHILOX_MUL_EVEN(reinterpret_cast<Raw>(a), reinterpret_cast<Raw>(b)));
}

struct Block {
  Lanes64 w0, w1, w2, w3;
};

inline __attribute__((always_inline)) Lanes64 splat(uint64_t v) {
  Lanes64 r;
  for (size_t i = 0; i < kLanes; ++i) r[i] = v;
  return r;
}

using Signed64 = long long __attribute__((vector_size(SOFTMAX_PHILOX_BYTES)));
using Packed32 = uint32_t __attribute__((vector_size(SOFTMAX_PHILOX_BYTES / 2)));

// Word j (0..3) of each group's draw at phase kPhase: words [kPhase, 4) of block a, then [0,
// kPhase) of block b (the next counter's).
template <unsigned kPhase>
inline __attribute__((always_inline)) Lanes64 word(const Block& a, const Block& b, unsigned j) {
  const unsigned w = kPhase + j;
  const Block& src = w < 4 ? a : b;
  return w % 4 == 0 ? src.w0 : w % 4 == 1 ? src.w1 : w % 4 == 2 ? src.w2 : src.w3;
}

// Whole groups g_begin .. g_end-1 into keep: Philox on kSets vectors of groups (phase 0) or on
// their blocks at this and the next counter (phase != 0), then the keep bytes of each group, in
// element order, as one little-endian u32.
template <unsigned kPhase>
inline __attribute__((always_inline)) void whole_groups_phase(const uint32_t* k0, const uint32_t* k1,
                                                              uint64_t offset, int64_t threshold, uint64_t g_begin,
                                                              uint64_t g_end, uint8_t* keep) {
  constexpr size_t kVecs = kPhase == 0 ? kSets : (kSets / 2 > 0 ? kSets / 2 : 1), kPerStep = kVecs * kLanes;
  constexpr size_t kBlocks = kPhase == 0 ? kVecs : 2 * kVecs;
  const uint64_t lo = offset >> 2, lo_next = lo + 1, carry = lo_next == 0 ? 1 : 0;
  const Lanes64 mul0 = splat(0xD2511F53u), mul1 = splat(0xCD9E8D57u), low32 = splat(0xffffffffu);
  const Signed64 thr = reinterpret_cast<Signed64>(splat(static_cast<uint64_t>(threshold)));
  Lanes64 lane_index, key0[10], key1[10];
  for (size_t i = 0; i < kLanes; ++i) lane_index[i] = i;
  for (int r = 0; r < 10; ++r) {
    key0[r] = splat(k0[r]);
    key1[r] = splat(k1[r]);
  }
  Packed32 packed[kVecs];
  for (uint64_t g = g_begin; g < g_end; g += kPerStep) {
    Block b[kBlocks];
    for (size_t v = 0; v < kVecs; ++v) {
      const Lanes64 grp = splat(g + v * kLanes) + lane_index;
      b[v] = Block{splat(lo & 0xffffffffu), splat(lo >> 32), grp & low32, grp >> 32};
      if (kPhase != 0) {
        const Lanes64 next = grp + splat(carry);
        b[kBlocks - kVecs + v] = Block{splat(lo_next & 0xffffffffu), splat(lo_next >> 32), next & low32, next >> 32};
      }
    }
    for (int r = 0; r < 10; ++r) {
      const Lanes64 ka = key0[r], kb = key1[r];
      for (size_t s = 0; s < kBlocks; ++s) {
        const Lanes64 p0 = mul_even(mul0, b[s].w0), p1 = mul_even(mul1, b[s].w2);
        b[s].w0 = (p1 >> 32) ^ b[s].w1 ^ ka;
        b[s].w2 = (p0 >> 32) ^ b[s].w3 ^ kb;
        b[s].w1 = p1;
        b[s].w3 = p0;
      }
    }
    for (size_t v = 0; v < kVecs; ++v) {
      Lanes64 bytes = splat(0);
      for (unsigned j = 0; j < 4; ++j) {
        const Signed64 w = reinterpret_cast<Signed64>(word<kPhase>(b[v], b[kBlocks - kVecs + v], j) & low32);
        bytes |= reinterpret_cast<Lanes64>(w > thr) & splat(uint64_t{1} << (8 * j));
      }
      packed[v] = __builtin_convertvector(bytes, Packed32);
    }
    const size_t groups = static_cast<size_t>(g_end - g < kPerStep ? g_end - g : kPerStep);
    std::memcpy(keep + 4 * (g - g_begin), packed, 4 * groups);
  }
}

inline void whole_groups(const uint32_t* k0, const uint32_t* k1, uint64_t offset, int64_t threshold,
                         uint64_t g_begin, uint64_t g_end, uint8_t* keep) {
  switch (offset & 3u) {
    case 0:
      return whole_groups_phase<0>(k0, k1, offset, threshold, g_begin, g_end, keep);
    case 1:
      return whole_groups_phase<1>(k0, k1, offset, threshold, g_begin, g_end, keep);
    case 2:
      return whole_groups_phase<2>(k0, k1, offset, threshold, g_begin, g_end, keep);
    default:
      return whole_groups_phase<3>(k0, k1, offset, threshold, g_begin, g_end, keep);
  }
}

}  // namespace SOFTMAX_PHILOX_LEVEL
