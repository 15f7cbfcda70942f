// The vector kernels written with Google Highway: this file is compiled once per x86 target that
// Highway knows (SSSE3 ... AVX-512) via foreach_target.h, and HWY_DYNAMIC_DISPATCH picks the best
// one the running CPU supports. No -march flag is needed or used.
//
// Softmax on this class of machine is bound by exp, not memory, so the kernels are built around
// computing exp once per element while the row (or chunk) is still in L1:
//   max pass -> exp + store + sum pass (4 independent accumulators) -> scale pass (reciprocal
//   multiply) -> one write of the finished tile to y, with non-temporal stores for big outputs
//   so y's lines are not read from memory before being overwritten.
// Arithmetic contract shared with the other implementation: vector_kernels.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/vector_kernels_highway.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/common/half_bits.h"
#include "backends/common/philox.h"
#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Output tile: rows are finished here, then written to y in one sweep (see WriteTile).
constexpr int64_t kTileElems = 8192;

// exp(x) for x in [-inf, 0], the only arguments softmax needs (x - max), in 11-13 vector ops:
//   clamp at -88 (so -inf and everything below e^-87.7 flush to exactly +0),
//   n = round(x / ln2) by the 1.5 * 2^23 magic-number trick, which also leaves n in the low
//     mantissa bits of t (no float->int conversion needed),
//   Cody-Waite reduction r = x - n ln2 with ln2 split in two (n * kLn2Hi exact for |n| <= 128),
//   e^r on |r| <= ln2/2 by a degree-5 polynomial 1 + r + c2 r^2 + ... + c5 r^5 whose
//     coefficients were fitted here for minimax relative error (1.05e-7, under one fp32 ulp),
//   times 2^n: vscalefps on AVX-512 (one op), elsewhere built in the exponent field,
//     (bits(t) + 127) << 23 == (n + 127) << 23, where n = -127 gives a zero field, i.e. +0.
// x = 0 gives exactly 1. NaN propagates (exp(NaN) is NaN): the clamp keeps NaN, so a NaN
// anywhere in a row (or x - max = inf - inf, NaN, for +inf or all -inf rows) makes the row's sum
// NaN, and the row comes out NaN through 1 / sum without any test in the loops.
constexpr float kExpMagic = 12582912.0f;  // 1.5 * 2^23
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.428606820309417232e-06f;
constexpr float kExpC2 = 0.499992311000824f, kExpC3 = 0.16667114198207855f;
constexpr float kExpC4 = 0.041890114545822144f, kExpC5 = 0.00831252709031105f;

// max(-88, x) that returns x when x is NaN. On x86, max_ps(a, b) returns its second operand
// when either is NaN; Highway's scalar targets drop NaN, so they test for it.
HWY_INLINE VF ClampBelowKeepNaN(DF d, VF x) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Max(x, hn::Set(d, -88.0f)));
#else
  return hn::Max(hn::Set(d, -88.0f), x);
#endif
}

HWY_INLINE VF ExpNonPositive(DF d, VF x) {
  x = ClampBelowKeepNaN(d, x);
  const VF t = hn::MulAdd(x, hn::Set(d, kLog2e), hn::Set(d, kExpMagic));
  const VF n = hn::Sub(t, hn::Set(d, kExpMagic));
  VF r = hn::NegMulAdd(n, hn::Set(d, kLn2Hi), x);
  r = hn::NegMulAdd(n, hn::Set(d, kLn2Lo), r);
  VF p = hn::MulAdd(hn::Set(d, kExpC5), r, hn::Set(d, kExpC4));
  p = hn::MulAdd(p, r, hn::Set(d, kExpC3));
  p = hn::MulAdd(p, r, hn::Set(d, kExpC2));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // n >= -127 after the clamp: scalef gives the same +0 / normal results as the bit trick
  // below except for n = -127 with p > 1, where it keeps the subnormal instead of 0.
  return VF{_mm512_scalef_ps(p.raw, n.raw)};
#else
  const hn::RebindToSigned<DF> di;
  const auto scale_bits = hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, t), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, scale_bits));
#endif
}

// Loads of the last n < Lanes elements, padded with `pad`; memcpy because the caller's float
// pointer need not be 4-byte aligned and we must not read past the end of the buffer.
HWY_INLINE VF LoadTail(DF d, const float* p, size_t n, float pad) {
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = pad;
  std::memcpy(buf, p, n * sizeof(float));
  return hn::Load(d, buf);
}

HWY_INLINE void StoreTail(DF d, VF v, float* p, size_t n) {
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(float));
}

// Max of a row or chunk with four independent accumulators. NaN elements may or may not show
// in the result (x86 max drops them in some operand orders): the exp pass catches them.
// Software prefetch into L2. The max pass is the first touch of a row and runs straight into
// memory latency: the hardware prefetcher stops running ahead while the core spends the exp pass
// on data already in L1, so every kernel asks for the next row (or chunk) while it works on this
// one. A prefetch never faults, so running past the end of x is harmless.
HWY_INLINE void PrefetchL2(const void* p) { __builtin_prefetch(p, 0, 2); }

HWY_INLINE void PrefetchSpan(const float* p, size_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t b = 0; b < n * sizeof(float); b += 64) PrefetchL2(c + b);
}

// `ahead` > 0: also prefetch the elements `ahead` past each one read.
HWY_INLINE float RowMax(const float* x, size_t n, size_t ahead = 0) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF m0 = hn::Set(d, -std::numeric_limits<float>::infinity()), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    if (ahead != 0) {
      for (size_t b = 0; b < 4 * N * sizeof(float); b += 64)
        PrefetchL2(reinterpret_cast<const char*>(x + i + ahead) + b);
    }
    m0 = hn::Max(m0, hn::LoadU(d, x + i));
    m1 = hn::Max(m1, hn::LoadU(d, x + i + N));
    m2 = hn::Max(m2, hn::LoadU(d, x + i + 2 * N));
    m3 = hn::Max(m3, hn::LoadU(d, x + i + 3 * N));
  }
  if (ahead != 0 && i < n) PrefetchSpan(x + i + ahead, n - i);
  for (; i + N <= n; i += N) m0 = hn::Max(m0, hn::LoadU(d, x + i));
  if (i < n) m1 = hn::Max(m1, LoadTail(d, x + i, n - i, -std::numeric_limits<float>::infinity()));
  return hn::GetLane(hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3))));
}

HWY_INLINE bool AnyNaN(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, x + i, sizeof v);
    if (std::isnan(v)) return true;
  }
  return false;
}

// Sum of e_i = exp(x_i - shift) with four independent accumulators (fixed tree: the result
// depends only on n and the data), optionally storing the e_i.
template <bool kStore>
HWY_INLINE float ExpSum(const float* x, size_t n, float shift, float* e) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, shift);
  VF a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const VF e0 = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i), vs));
    const VF e1 = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i + N), vs));
    const VF e2 = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i + 2 * N), vs));
    const VF e3 = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i + 3 * N), vs));
    if (kStore) {
      hn::StoreU(e0, d, e + i);
      hn::StoreU(e1, d, e + i + N);
      hn::StoreU(e2, d, e + i + 2 * N);
      hn::StoreU(e3, d, e + i + 3 * N);
    }
    a0 = hn::Add(a0, e0);
    a1 = hn::Add(a1, e1);
    a2 = hn::Add(a2, e2);
    a3 = hn::Add(a3, e3);
  }
  for (; i + N <= n; i += N) {
    const VF e0 = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i), vs));
    if (kStore) hn::StoreU(e0, d, e + i);
    a0 = hn::Add(a0, e0);
  }
  if (i < n) {
    // -inf padding: exp(-inf - shift) is exactly 0, so the padding adds nothing.
    const VF v = LoadTail(d, x + i, n - i, -std::numeric_limits<float>::infinity());
    const VF e0 = ExpNonPositive(d, hn::Sub(v, vs));
    if (kStore) StoreTail(d, e0, e + i, n - i);
    a1 = hn::Add(a1, e0);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

HWY_INLINE void ScaleInPlace(float* v, size_t n, float factor) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF f = hn::Set(d, factor);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, v + i), f), d, v + i);
  for (; i < n; ++i) v[i] *= factor;
}

// y = (x - max) - log_sum: two roundings, each relative to a small value, so large-magnitude
// inputs (1e4) keep full accuracy (x - (max + log_sum) would not).
HWY_INLINE void LogOut(const float* x, float* out, size_t n, float max, float log_sum) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vm = hn::Set(d, max), vl = hn::Set(d, log_sum);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vm), vl), d, out + i);
  if (i < n) StoreTail(d, hn::Sub(hn::Sub(LoadTail(d, x + i, n - i, 0.0f), vm), vl), out + i, n - i);
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
      const size_t vec_bytes = N * sizeof(float);
      const size_t head = std::min(n, ((vec_bytes - addr % vec_bytes) % vec_bytes) / sizeof(float));
      std::memcpy(p, src, head * sizeof(float));
      i = head;
      float* y = reinterpret_cast<float*>(p);
      for (; i + N <= n; i += N) hn::Stream(hn::LoadU(d, src + i), d, y + i);
    } else {
      for (; i + N <= n; i += N) hn::StoreU(hn::LoadU(d, src + i), d, reinterpret_cast<float*>(p) + i);
    }
    std::memcpy(p + 4 * i, src + i, (n - i) * sizeof(float));
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

// Where a chunk's finished fp32 values go: straight into y when it is f32, 4-byte aligned and
// not streamed, else into the thread's Output buffer for WriteTile.
HWY_INLINE float* ChunkOut(void* y, softmax_dtype dtype, int64_t n, bool stream) {
  if (dtype == SOFTMAX_DTYPE_F32 && !stream && reinterpret_cast<uintptr_t>(y) % sizeof(float) == 0)
    return static_cast<float*>(y);
  return thread_scratch_floats(ScratchSlot::Output, size_t(n));
}

HWY_INLINE void FinishChunkOut(float* out, void* y, softmax_dtype dtype, int64_t n, bool stream) {
  if (out != y) WriteTile(out, y, dtype, size_t(n), stream);
}

// ---- the table entries ---------------------------------------------------------------------

// Softmax (or log-softmax) of one row of n <= kChunkElems fp32 values into `out`. A row with a
// NaN, a +inf, or only -inf has a NaN sum (see ExpNonPositive), so 1/sum and log(sum) are NaN and
// the whole row comes out NaN with no extra test.
// Rows are read in order, so the data `ahead` elements on (the next row, or 4 KiB for short
// rows) is what comes next.
HWY_INLINE size_t RowPrefetchDistance(size_t n) { return std::max<size_t>(n, 1024); }

HWY_INLINE void RowInL1(const float* x, float* out, size_t n, bool log_softmax) {
  const float max = RowMax(x, n, RowPrefetchDistance(n));
  if (log_softmax) {
    const float s = ExpSum<false>(x, n, max, nullptr);
    LogOut(x, out, n, max, static_cast<float>(std::log(double(s))));
  } else {
    const float s = ExpSum<true>(x, n, max, out);
    ScaleInPlace(out, n, 1.0f / s);
  }
}

// Rows of at most kVecs vectors (up to 128 floats on AVX-512), held in registers from load to store: no
// loops, no re-reads, no tile pass. Tiny rows are dominated by per-row overhead and by the
// latency of the two cross-lane reductions, so this path keeps the instruction count per row
// small and lets out-of-order execution overlap consecutive rows. Masked loads and stores
// (which never touch memory outside the mask on AVX2/AVX-512) handle the partial last vector.
// With kStream, `out` is y itself, vector-aligned, and n == kVecs * N: the finished vectors
// go out with non-temporal stores.
template <size_t kVecs, bool kStream = false>
HWY_INLINE void RowInRegisters(const float* x, float* out, size_t n, bool log_softmax) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const size_t last = n - (kVecs - 1) * N;  // 1..N valid lanes in the last vector
  PrefetchSpan(x + RowPrefetchDistance(n), n);
  const auto last_mask = hn::FirstN(d, last);
  VF v[kVecs];
  for (size_t k = 0; k + 1 < kVecs; ++k) v[k] = hn::LoadU(d, x + k * N);
  v[kVecs - 1] = hn::IfThenElse(last_mask, hn::MaskedLoad(last_mask, d, x + (kVecs - 1) * N), neg_inf);
  VF m = v[0];
  for (size_t k = 1; k < kVecs; ++k) m = hn::Max(m, v[k]);
  m = hn::MaxOfLanes(d, m);
  VF e[kVecs];
  VF sum = hn::Zero(d);
  for (size_t k = 0; k < kVecs; ++k) {
    e[k] = ExpNonPositive(d, hn::Sub(v[k], m));
    sum = hn::Add(sum, e[k]);
  }
  const float s = hn::GetLane(hn::SumOfLanes(d, sum));
  if (log_softmax) {
    const VF ls = hn::Set(d, static_cast<float>(std::log(double(s))));
    for (size_t k = 0; k < kVecs; ++k) e[k] = hn::Sub(hn::Sub(v[k], m), ls);
  } else {
    const VF f = hn::Set(d, 1.0f / s);
    for (size_t k = 0; k < kVecs; ++k) e[k] = hn::Mul(e[k], f);
  }
  if (kStream) {
    for (size_t k = 0; k < kVecs; ++k) hn::Stream(e[k], d, out + k * N);
    return;
  }
  for (size_t k = 0; k + 1 < kVecs; ++k) hn::StoreU(e[k], d, out + k * N);
  hn::BlendedStore(e[kVecs - 1], last_mask, d, out + (kVecs - 1) * N);
}

// RowInL1 for a vector-aligned f32 row of y whose length is a multiple of the vector: the e_i
// wait in `scratch` (L1) and the scale pass writes them straight to y with non-temporal stores,
// so the output costs one sweep and no separate copy.
HWY_INLINE void RowInL1Streamed(const float* x, float* y, float* scratch, size_t n, bool log_softmax) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const float max = RowMax(x, n, RowPrefetchDistance(n));
  if (log_softmax) {
    const float s = ExpSum<false>(x, n, max, nullptr);
    const VF vm = hn::Set(d, max), vl = hn::Set(d, static_cast<float>(std::log(double(s))));
    for (size_t i = 0; i < n; i += N) hn::Stream(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vm), vl), d, y + i);
  } else {
    const float s = ExpSum<true>(x, n, max, scratch);
    const VF f = hn::Set(d, 1.0f / s);
    for (size_t i = 0; i < n; i += N) hn::Stream(hn::Mul(hn::Load(d, scratch + i), f), d, y + i);
  }
}

// Whether RowInRegisters is safe here: it needs masked loads that do not fault.
constexpr bool kHaveFaultFreeMaskedLoad =
    HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2;

// kVecs > 0: rows of at most kVecs vectors, in registers; 0: any row up to kChunkElems.
template <size_t kVecs>
HWY_INLINE void ShortRowsWith(const void* x, void* y, softmax_dtype dtype, int64_t rows, int64_t cols,
                              bool log_softmax, bool stream) {
  const size_t esize = dtype == SOFTMAX_DTYPE_F32 ? 4 : 2;
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  unsigned char* yb = static_cast<unsigned char*>(y);
  if (dtype == SOFTMAX_DTYPE_F32 && !stream && reinterpret_cast<uintptr_t>(y) % sizeof(float) == 0) {
    // Output that stays in cache: finish each row straight into y. In place is fine: every
    // routine reads an element (or the whole row) before it writes the same position.
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = reinterpret_cast<const float*>(xb + size_t(r * cols) * esize);
      float* yr = reinterpret_cast<float*>(yb + size_t(r * cols) * esize);
      if (kVecs > 0) {
        RowInRegisters<kVecs == 0 ? 1 : kVecs>(xr, yr, size_t(cols), log_softmax);
      } else {
        RowInL1(xr, yr, size_t(cols), log_softmax);
      }
    }
    return;
  }
  const size_t N = hn::Lanes(DF());
  if (dtype == SOFTMAX_DTYPE_F32 && stream && size_t(cols) % N == 0 &&
      reinterpret_cast<uintptr_t>(y) % (N * sizeof(float)) == 0) {
    // Every row of y starts on a vector boundary: finish rows straight into y with
    // non-temporal stores (the same arithmetic as the other branches).
    float* scratch = kVecs > 0 ? nullptr : thread_scratch_floats(ScratchSlot::Output, size_t(cols));
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = reinterpret_cast<const float*>(xb + size_t(r * cols) * esize);
      float* yr = reinterpret_cast<float*>(yb + size_t(r * cols) * esize);
      if (kVecs > 0) {
        RowInRegisters<kVecs == 0 ? 1 : kVecs, true>(xr, yr, size_t(cols), log_softmax);
      } else {
        RowInL1Streamed(xr, yr, scratch, size_t(cols), log_softmax);
      }
    }
    return;
  }
  // Otherwise finish a tile of rows in L1 and write it out in one sweep: with non-temporal
  // stores for big outputs (y's lines are not read before being overwritten), and converted
  // for 16-bit storage.
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  float* tile = thread_scratch_floats(ScratchSlot::Output, size_t(tile_rows * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      const float* xr = AsF32(xb + size_t((r0 + r) * cols) * esize, dtype, size_t(cols));
      if (kVecs > 0) {
        RowInRegisters<kVecs == 0 ? 1 : kVecs>(xr, tile + r * cols, size_t(cols), log_softmax);
      } else {
        RowInL1(xr, tile + r * cols, size_t(cols), log_softmax);
      }
    }
    WriteTile(tile, yb + size_t(r0 * cols) * esize, dtype, size_t(nr * cols), stream);
  }
}

void ShortRows(const void* x, void* y, softmax_dtype dtype, int64_t rows, int64_t cols,
               bool log_softmax, bool stream) {
  const int64_t N = int64_t(hn::Lanes(DF()));
  if (kHaveFaultFreeMaskedLoad && cols <= 8 * N) {
    if (cols <= N) return ShortRowsWith<1>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 2 * N) return ShortRowsWith<2>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 3 * N) return ShortRowsWith<3>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 4 * N) return ShortRowsWith<4>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 5 * N) return ShortRowsWith<5>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 6 * N) return ShortRowsWith<6>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 7 * N) return ShortRowsWith<7>(x, y, dtype, rows, cols, log_softmax, stream);
    return ShortRowsWith<8>(x, y, dtype, rows, cols, log_softmax, stream);
  }
  ShortRowsWith<0>(x, y, dtype, rows, cols, log_softmax, stream);
}

ChunkPartial ChunkPartialOf(const void* x, softmax_dtype dtype, int64_t n, float* exp_out) {
  const float* xc = AsF32(x, dtype, size_t(n));
  // Chunks are visited in memory order: prefetch the next one (f32: xc is x itself).
  const float max = RowMax(xc, size_t(n), dtype == SOFTMAX_DTYPE_F32 ? size_t(n) : 0);
  if (max == -std::numeric_limits<float>::infinity()) {
    // All -inf (or -inf and NaN): contributes nothing to a finite row, but a NaN must still
    // poison the row, and exp(x - max) would be NaN for the -inf elements, so look directly.
    if (exp_out != nullptr) std::fill(exp_out, exp_out + n, 0.0f);
    return ChunkPartial{max, 0.0f, AnyNaN(xc, size_t(n))};
  }
  const float s = exp_out != nullptr ? ExpSum<true>(xc, size_t(n), max, exp_out)
                                     : ExpSum<false>(xc, size_t(n), max, nullptr);
  // A NaN sum means a NaN or a +inf in the chunk: either way the row is NaN.
  return ChunkPartial{max, s, std::isnan(s)};
}

// A streamed f32 chunk that starts on a vector boundary and is whole vectors long can be
// written to y directly with non-temporal stores, skipping the Output buffer and its copy.
HWY_INLINE bool StreamDirect(const void* y, softmax_dtype dtype, int64_t n, bool stream) {
  const size_t N = hn::Lanes(DF());
  return stream && dtype == SOFTMAX_DTYPE_F32 && size_t(n) % N == 0 &&
         reinterpret_cast<uintptr_t>(y) % (N * sizeof(float)) == 0;
}

void FinishRecompute(const void* x, void* y, softmax_dtype dtype, int64_t n, ChunkFinish f,
                     bool stream) {
  const float* xc = AsF32(x, dtype, size_t(n));
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, f.shift), vf = hn::Set(d, f.factor);
  if (StreamDirect(y, dtype, n, stream)) {
    float* yf = static_cast<float*>(y);
    for (size_t i = 0; i < size_t(n); i += N)
      hn::Stream(hn::Mul(ExpNonPositive(d, hn::Sub(hn::LoadU(d, xc + i), vs)), vf), d, yf + i);
    return;
  }
  float* out = ChunkOut(y, dtype, n, stream);
  size_t i = 0;
  for (; i + N <= size_t(n); i += N)
    hn::StoreU(hn::Mul(ExpNonPositive(d, hn::Sub(hn::LoadU(d, xc + i), vs)), vf), d, out + i);
  if (i < size_t(n)) {
    const VF v = LoadTail(d, xc + i, size_t(n) - i, 0.0f);
    StoreTail(d, hn::Mul(ExpNonPositive(d, hn::Sub(v, vs)), vf), out + i, size_t(n) - i);
  }
  FinishChunkOut(out, y, dtype, n, stream);
}

void FinishStored(const float* e, void* y, softmax_dtype dtype, int64_t n, float factor, bool stream) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vf = hn::Set(d, factor);
  if (StreamDirect(y, dtype, n, stream)) {
    float* yf = static_cast<float*>(y);
    for (size_t i = 0; i < size_t(n); i += N) hn::Stream(hn::Mul(hn::LoadU(d, e + i), vf), d, yf + i);
    return;
  }
  float* out = ChunkOut(y, dtype, n, stream);
  size_t i = 0;
  for (; i + N <= size_t(n); i += N) hn::StoreU(hn::Mul(hn::LoadU(d, e + i), vf), d, out + i);
  for (; i < size_t(n); ++i) out[i] = e[i] * factor;
  FinishChunkOut(out, y, dtype, n, stream);
}

void FinishLog(const void* x, void* y, softmax_dtype dtype, int64_t n, float max, float log_sum,
               bool stream) {
  const float* xc = AsF32(x, dtype, size_t(n));
  if (StreamDirect(y, dtype, n, stream)) {
    const DF d;
    const size_t N = hn::Lanes(d);
    const VF vm = hn::Set(d, max), vl = hn::Set(d, log_sum);
    float* yf = static_cast<float*>(y);
    for (size_t i = 0; i < size_t(n); i += N) hn::Stream(hn::Sub(hn::Sub(hn::LoadU(d, xc + i), vm), vl), d, yf + i);
    return;
  }
  float* out = ChunkOut(y, dtype, n, stream);
  LogOut(xc, out, size_t(n), max, log_sum);
  FinishChunkOut(out, y, dtype, n, stream);
}

void FinishDropout(const void* x, void* y, softmax_dtype dtype, int64_t n, ChunkFinish f,
                   const uint8_t* keep) {
  const float* xc = AsF32(x, dtype, size_t(n));
  float* out = thread_scratch_floats(ScratchSlot::Output, size_t(n));
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint8_t, DF> du8;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, f.shift), vf = hn::Set(d, f.factor);
  size_t i = 0;
  for (; i + N <= size_t(n); i += N) {
    const VF v = hn::Mul(ExpNonPositive(d, hn::Sub(hn::LoadU(d, xc + i), vs)), vf);
    const auto kept = hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, hn::LoadU(du8, keep + i)), hn::Zero(du)));
    hn::StoreU(hn::IfThenElseZero(kept, v), d, out + i);
  }
  if (i < size_t(n)) {
    HWY_ALIGN float tail[hn::MaxLanes(DF())];
    const VF v = LoadTail(d, xc + i, size_t(n) - i, 0.0f);
    hn::Store(hn::Mul(ExpNonPositive(d, hn::Sub(v, vs)), vf), d, tail);
    for (size_t j = 0; i + j < size_t(n); ++j) out[i + j] = keep[i + j] ? tail[j] : 0.0f;
  }
  WriteTile(out, y, dtype, size_t(n), false);
}

// ---- dropout keep bytes: Philox4x32-10 on many groups at once ---------------------------------

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

void StreamFence() { hwy::FlushStream(); }

const char* ChosenTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace softmax_internal {
namespace cpu {

HWY_EXPORT(ShortRows);
HWY_EXPORT(ChunkPartialOf);
HWY_EXPORT(FinishRecompute);
HWY_EXPORT(FinishStored);
HWY_EXPORT(FinishLog);
HWY_EXPORT(FinishDropout);
HWY_EXPORT(KeepBytes);
HWY_EXPORT(StreamFence);
HWY_EXPORT(ChosenTargetName);

namespace {

void short_rows(const void* x, void* y, softmax_dtype dtype, int64_t rows, int64_t cols,
                bool log_softmax, bool stream) {
  HWY_DYNAMIC_DISPATCH(ShortRows)(x, y, dtype, rows, cols, log_softmax, stream);
}
ChunkPartial chunk_partial(const void* x, softmax_dtype dtype, int64_t n, float* exp_out) {
  return HWY_DYNAMIC_DISPATCH(ChunkPartialOf)(x, dtype, n, exp_out);
}
void finish_recompute(const void* x, void* y, softmax_dtype dtype, int64_t n, ChunkFinish f, bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishRecompute)(x, y, dtype, n, f, stream);
}
void finish_stored(const float* e, void* y, softmax_dtype dtype, int64_t n, float factor, bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishStored)(e, y, dtype, n, factor, stream);
}
void finish_log(const void* x, void* y, softmax_dtype dtype, int64_t n, float max, float log_sum,
                bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishLog)(x, y, dtype, n, max, log_sum, stream);
}
void finish_dropout(const void* x, void* y, softmax_dtype dtype, int64_t n, ChunkFinish f,
                    const uint8_t* keep) {
  HWY_DYNAMIC_DISPATCH(FinishDropout)(x, y, dtype, n, f, keep);
}
void keep_bytes(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n, uint8_t* keep) {
  HWY_DYNAMIC_DISPATCH(KeepBytes)(seed, offset, p, first, n, keep);
}
void stream_fence() { HWY_DYNAMIC_DISPATCH(StreamFence)(); }

}  // namespace

const VectorKernels& highway_vector_kernels() {
  static const VectorKernels kernels{HWY_DYNAMIC_DISPATCH(ChosenTargetName)(),
                                     short_rows,
                                     chunk_partial,
                                     finish_recompute,
                                     finish_stored,
                                     finish_log,
                                     finish_dropout,
                                     keep_bytes,
                                     stream_fence};
  return kernels;
}

}  // namespace cpu
}  // namespace softmax_internal
#endif  // HWY_ONCE
