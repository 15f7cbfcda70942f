/* SPDX-License-Identifier: Apache-2.0 */
// How the Highway kernels touch memory: ragged tails, software prefetch, f16/bf16 <-> fp32
// conversion of inputs and outputs, and the (optionally non-temporal) write of finished values.
// Per-target code: included from a file that is compiled once per Highway target through
// hwy/foreach_target.h, so it uses the include-guard toggle Highway prescribes for -inl.h files.
#if defined(SOFTMAX_CPU_HIGHWAY_MEMORY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SOFTMAX_CPU_HIGHWAY_MEMORY_INL_H_
#undef SOFTMAX_CPU_HIGHWAY_MEMORY_INL_H_
#else
#define SOFTMAX_CPU_HIGHWAY_MEMORY_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/common/half_bits.h"
#include "backends/cpu/thread_scratch.h"
#include <softmax/softmax.h>

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// AVX2 and AVX-512 masked loads and stores of f32 lanes (and AVX-512's of 8- and 16-bit lanes)
// touch no memory outside their mask: no fault past the end of a buffer, no write to a
// neighbour's bytes. A ragged tail is then one masked access; elsewhere it is copied through a
// buffer, which also costs a failed store-to-load forward (a few dozen cycles) per tail.
constexpr bool kMaskedF32Access = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2;
constexpr bool kMaskedNarrowAccess = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3;

// Loads of the last n < Lanes elements, padded with `pad`. The caller's float pointer need not be
// 4-byte aligned and nothing past the end may be read.
HWY_INLINE VF LoadTail(DF d, const float* p, size_t n, float pad) {
  if constexpr (kMaskedF32Access) {
    const auto m = hn::FirstN(d, n);
    return hn::IfThenElse(m, hn::MaskedLoad(m, d, p), hn::Set(d, pad));
  }
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = pad;
  std::memcpy(buf, p, n * sizeof(float));
  return hn::Load(d, buf);
}

HWY_INLINE void StoreTail(DF d, VF v, float* p, size_t n) {
  if constexpr (kMaskedF32Access) {
    hn::BlendedStore(v, hn::FirstN(d, n), d, p);
    return;
  }
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(float));
}

// m <= Lanes elements from p: a whole vector, or LoadTail's zero-padded part of one.
HWY_INLINE VF LoadUpTo(DF d, const float* p, size_t m) {
  return m == hn::Lanes(d) ? hn::LoadU(d, p) : LoadTail(d, p, m, 0.0f);
}

// The keep bytes (0/1) of a vector's elements as a mask over its f32 lanes.
HWY_INLINE hn::Mask<DF> Kept(DF d, const uint8_t* keep) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint8_t, DF> du8;
  return hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, hn::LoadU(du8, keep)), hn::Zero(du)));
}

// The keep bytes of the last n < Lanes(DF) elements as a mask over f32 lanes (lanes past n
// false).
HWY_INLINE hn::Mask<DF> KeptTail(DF d, const uint8_t* keep, size_t n) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint8_t, DF> du8;
  if constexpr (kMaskedNarrowAccess) {
    return hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, hn::MaskedLoad(hn::FirstN(du8, n), du8, keep)), hn::Zero(du)));
  }
  HWY_ALIGN uint8_t k[hn::MaxLanes(DF())] = {};
  std::memcpy(k, keep, n);
  return hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, hn::Load(du8, k)), hn::Zero(du)));
}

// Software prefetch into L2. The max pass is the first touch of a row and runs straight into
// memory latency: the hardware prefetcher stops running ahead while the core spends the exp pass
// on data already in L1, so every kernel asks for the next row (or chunk) while it works on this
// one. A prefetch never faults, so running past the end of x is harmless.
HWY_INLINE void PrefetchL2(const void* p) { __builtin_prefetch(p, 0, 2); }

HWY_INLINE void PrefetchSpan(const float* p, size_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t b = 0; b < n * sizeof(float); b += 64) PrefetchL2(c + b);
}

// ---- storage conversions -------------------------------------------------------------------

HWY_INLINE VF Load16(DF d, softmax_dtype dtype, const unsigned char* p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> du16;
  if (dtype == SOFTMAX_DTYPE_F16) {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(d, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  // bf16 is the upper half of a binary32.
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)))));
}

HWY_INLINE void Store16(DF /*d*/, softmax_dtype dtype, VF v, unsigned char* p) {
  if (dtype == SOFTMAX_DTYPE_F16) {
    // vcvtps2ph (or Highway's emulation) rounds to nearest even, like half_bits.h.
    const hn::Rebind<hwy::float16_t, DF> df16;
    hn::StoreU(hn::DemoteTo(df16, v), df16, reinterpret_cast<hwy::float16_t*>(p));
    return;
  }
  // Highway's f32->bf16 demotion truncates; round to nearest even here, keeping NaN quiet.
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u = hn::BitCast(du, v);
  const auto bias = hn::Add(hn::Set(du, 0x7fffu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, bias));
  const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
  const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, bits)), du16, reinterpret_cast<uint16_t*>(p));
}

// AVX2 and AVX-512 convert f16 in hardware (F16C). Highway 1.0.3's emulation on the older
// targets mishandles inf and NaN, so those use the scalar helpers of half_bits.h instead.
constexpr bool kHardwareF16 = HWY_TARGET <= HWY_AVX2;

// x as fp32: the caller's pointer for f32, else a conversion into the thread's Input buffer.
HWY_INLINE const float* AsF32(const void* x, softmax_dtype dtype, size_t n) {
  if (dtype == SOFTMAX_DTYPE_F32) return static_cast<const float*>(x);
  float* buf = thread_scratch_floats(ScratchSlot::Input, n);
  if (dtype == SOFTMAX_DTYPE_F16 && !kHardwareF16) {
    const unsigned char* p = static_cast<const unsigned char*>(x);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      buf[i] = f16_to_float(h);
    }
    return buf;
  }
  const DF d;
  const size_t N = hn::Lanes(d);
  const unsigned char* p = static_cast<const unsigned char*>(x);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::Store(Load16(d, dtype, p + 2 * i), d, buf + i);
  if (i < n) {
    HWY_ALIGN unsigned char tmp[2 * hn::MaxLanes(DF())] = {};
    std::memcpy(tmp, p + 2 * i, 2 * (n - i));
    hn::Store(Load16(d, dtype, tmp), d, buf + i);
  }
  return buf;
}

// Writes dst[i] = value(i, m) for i < n, where value(i, m) returns the vector of elements i ..
// i + m - 1 (m <= Lanes; lanes past m are ignored): the whole vectors that lie on vector
// boundaries with non-temporal stores, the partial ones at either end with ordinary masked
// stores, so dst needs only 4-byte alignment.
template <class Value>
HWY_INLINE void StreamTo(float* dst, size_t n, Value&& value) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t vec_bytes = N * sizeof(float);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(dst);
  const size_t head = std::min(n, ((vec_bytes - addr % vec_bytes) % vec_bytes) / sizeof(float));
  if (head != 0) StoreTail(d, value(size_t{0}, head), dst, head);
  size_t i = head;
  for (; i + N <= n; i += N) hn::Stream(value(i, N), d, dst + i);
  if (i < n) StoreTail(d, value(i, n - i), dst + i, n - i);
}

// Writes n finished fp32 values to y in its storage type. With `stream`, f32 output goes out
// through non-temporal stores on whole aligned vectors (head and tail with ordinary stores).
HWY_INLINE void WriteTile(const float* src, void* dst, softmax_dtype dtype, size_t n, bool stream) {
  const DF d;
  const size_t N = hn::Lanes(d);
  unsigned char* p = static_cast<unsigned char*>(dst);
  size_t i = 0;
  if (dtype == SOFTMAX_DTYPE_F32) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(dst);
    if (stream && addr % sizeof(float) == 0) {
      StreamTo(reinterpret_cast<float*>(p), n,
               [&](size_t j, size_t m) { return LoadUpTo(d, src + j, m); });
      return;
    }
    for (; i + N <= n; i += N) hn::StoreU(hn::LoadU(d, src + i), d, reinterpret_cast<float*>(p) + i);
    if (i < n) StoreTail(d, LoadTail(d, src + i, n - i, 0.0f), reinterpret_cast<float*>(p + 4 * i), n - i);
    return;
  }
  if (dtype == SOFTMAX_DTYPE_F16 && !kHardwareF16) {
    for (; i < n; ++i) {
      const uint16_t h = float_to_f16(src[i]);
      std::memcpy(p + 2 * i, &h, 2);
    }
    return;
  }
  for (; i + N <= n; i += N) Store16(d, dtype, hn::LoadU(d, src + i), p + 2 * i);
  if (i < n) {
    HWY_ALIGN unsigned char tmp[2 * hn::MaxLanes(DF())];
    Store16(d, dtype, LoadTail(d, src + i, n - i, 0.0f), tmp);
    std::memcpy(p + 2 * i, tmp, 2 * (n - i));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#endif  // SOFTMAX_CPU_HIGHWAY_MEMORY_INL_H_
