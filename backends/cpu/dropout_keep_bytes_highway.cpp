// Dropout keep bytes with Google Highway: Philox4x32-10 evaluated for many groups of 4 elements
// at once, compiled for every x86 target via foreach_target.h and picked at run time. The result
// is bit for bit dropout_keep() of backends/common/philox.h (the scalar definition handles the
// ragged ends, and the tests compare every element on every target).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/dropout_keep_bytes_highway.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/common/philox.h"
#include "backends/cpu/dropout_keep_bytes.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Largest 32-bit Philox word x whose uniform u(x) = x * 2^-32 + 2^-33 (as philox.h rounds it) is
// <= p, or -1 if none: u is non-decreasing in x, so keep = u(x) > p is exactly x > threshold,
// an integer compare per word instead of a conversion and a float compare.
inline int64_t KeepThreshold(float p) {
  // One call of softmax_dropout asks for the same p once per chunk (per row for short rows):
  // remember the last answer per thread instead of redoing the 32-step search.
  thread_local float cached_p = -1.0f;
  thread_local int64_t cached_threshold = 0;
  if (p == cached_p) return cached_threshold;
  int64_t lo = -1, hi = int64_t{1} << 32;  // u(lo) <= p (virtually), u(hi) > p (virtually)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (philox_word_to_uniform(static_cast<uint32_t>(mid)) <= p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  cached_p = p;
  cached_threshold = lo;
  return lo;
}

#if HWY_TARGET != HWY_SCALAR
using D64 = hn::ScalableTag<uint64_t>;
using V64 = hn::Vec<D64>;

// Ten Philox rounds on Lanes(D64) counters at once, one 32-bit word per 64-bit lane so that
// MulEven gives the full 32x32->64 products.
HWY_INLINE void PhiloxRounds(V64& c0, V64& c1, V64& c2, V64& c3, uint32_t k0, uint32_t k1) {
  const D64 d64;
  const hn::Repartition<uint32_t, D64> d32;
  const V64 mul0 = hn::Set(d64, 0xD2511F53u), mul1 = hn::Set(d64, 0xCD9E8D57u);
  const V64 low32 = hn::Set(d64, 0xffffffffu);
  for (int round = 0; round < 10; ++round) {
    const V64 p0 = hn::MulEven(hn::BitCast(d32, mul0), hn::BitCast(d32, c0));
    const V64 p1 = hn::MulEven(hn::BitCast(d32, mul1), hn::BitCast(d32, c2));
    const V64 n0 = hn::Xor(hn::Xor(hn::ShiftRight<32>(p1), c1), hn::Set(d64, k0));
    const V64 n2 = hn::Xor(hn::Xor(hn::ShiftRight<32>(p0), c3), hn::Set(d64, k1));
    c1 = hn::And(p1, low32);
    c3 = hn::And(p0, low32);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
#endif

// keep[j] for flat elements first .. first+n-1, bit for bit dropout_keep() of philox.h: the
// ragged head and tail groups through the scalar definition, whole groups Lanes(D64) at a time.
void KeepBytes(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n, uint8_t* keep) {
#if HWY_TARGET == HWY_SCALAR
  dropout_keep_bytes(seed, offset, p, first, n, keep);
#else
  if (n <= 0) return;
  const uint64_t end = first + uint64_t(n);
  const uint64_t body_begin = (first + 3) & ~uint64_t{3}, body_end = end & ~uint64_t{3};
  if (body_begin >= body_end) {
    dropout_keep_bytes(seed, offset, p, first, n, keep);
    return;
  }
  dropout_keep_bytes(seed, offset, p, first, int64_t(body_begin - first), keep);
  dropout_keep_bytes(seed, offset, p, body_end, int64_t(end - body_end), keep + (body_end - first));

  const D64 d64;
  const hn::RebindToSigned<D64> di64;
  const size_t L = hn::Lanes(d64);
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  // Counter of group g: (lo64 = offset / 4, hi64 = g); curand_uniform4 at phase offset % 4 reads
  // words [phase, 4) of that block and the rest from the next counter (lo64 + 1, with carry).
  const uint64_t lo = offset >> 2, lo_next = lo + 1;
  const unsigned phase = static_cast<unsigned>(offset & 3u);
  const uint64_t carry = lo_next == 0 ? 1 : 0;
  const V64 low32 = hn::Set(d64, 0xffffffffu);
  const auto threshold = hn::Set(di64, KeepThreshold(p));
  const V64 one = hn::Set(d64, 1);
  HWY_ALIGN uint64_t packed[hn::MaxLanes(D64())];
  uint8_t* out = keep + (body_begin - first);
  for (uint64_t g = body_begin / 4; g < body_end / 4; g += L) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(L, body_end / 4 - g));
    const V64 group = hn::Iota(d64, g);
    V64 a0 = hn::Set(d64, lo & 0xffffffffu), a1 = hn::Set(d64, lo >> 32);
    V64 a2 = hn::And(group, low32), a3 = hn::ShiftRight<32>(group);
    PhiloxRounds(a0, a1, a2, a3, k0, k1);
    V64 words[8] = {a0, a1, a2, a3, a0, a1, a2, a3};
    if (phase != 0) {
      const V64 group_next = hn::Add(group, hn::Set(d64, carry));
      V64 b0 = hn::Set(d64, lo_next & 0xffffffffu), b1 = hn::Set(d64, lo_next >> 32);
      V64 b2 = hn::And(group_next, low32), b3 = hn::ShiftRight<32>(group_next);
      PhiloxRounds(b0, b1, b2, b3, k0, k1);
      words[4] = b0;
      words[5] = b1;
      words[6] = b2;
      words[7] = b3;
    }
    // Four keep bytes per group, packed little-endian into the low 32 bits of its lane.
    V64 bytes = hn::Zero(d64);
    for (unsigned j = 0; j < 4; ++j) {
      const auto kept = hn::RebindMask(d64, hn::Gt(hn::BitCast(di64, words[phase + j]), threshold));
      bytes = hn::Or(bytes, hn::ShiftLeftSame(hn::IfThenElseZero(kept, one), int(8 * j)));
    }
    hn::Store(bytes, d64, packed);
    for (size_t l = 0; l < count; ++l) std::memcpy(out + 4 * l, &packed[l], 4);
    out += 4 * count;
  }
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

void dropout_keep_bytes_highway(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n,
                                uint8_t* keep) {
  HWY_DYNAMIC_DISPATCH(KeepBytes)(seed, offset, p, first, n, keep);
}

}  // namespace cpu
}  // namespace softmax_internal
#endif  // HWY_ONCE
