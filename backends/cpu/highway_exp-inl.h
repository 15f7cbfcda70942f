/* SPDX-License-Identifier: Apache-2.0 */
// exp for softmax (arguments in [-inf, 0]) as Highway vector code, shared by every kernel that
// needs e^(x - max).
// Per-target code: included from a file that is compiled once per Highway target through
// hwy/foreach_target.h, so it uses the include-guard toggle Highway prescribes for -inl.h files.
#if defined(SOFTMAX_CPU_HIGHWAY_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SOFTMAX_CPU_HIGHWAY_EXP_INL_H_
#undef SOFTMAX_CPU_HIGHWAY_EXP_INL_H_
#else
#define SOFTMAX_CPU_HIGHWAY_EXP_INL_H_
#endif

#include <hwy/highway.h>

#include "backends/cpu/exp_range.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// ExpScaled(x) = e^x * 2^kExpScaleLog2 for x in [-inf, 0] (exp_range.h says why the scale), in
// 11-13 vector ops:
//   clamp at kExpClampF32 (below it every result is invisible, see exp_range.h),
//   n = round(x / ln2) by the 1.5 * 2^23 magic-number trick, which also leaves n in the low
//     mantissa bits of t (no float->int conversion needed),
//   Cody-Waite reduction r = x - n ln2 with ln2 split in two (n * kLn2Hi exact for |n| < 512),
//   e^r on |r| <= ln2/2 by a degree-5 polynomial 1 + r + c2 r^2 + ... + c5 r^5 whose
//     coefficients were fitted here for minimax relative error (1.05e-7, under one fp32 ulp),
//   times 2^(n + 64): vscalefps on AVX-512 (one op), elsewhere built in the exponent field,
//     (bits(t) + 127 + 64) << 23, which lies in [9, 191] for n in [-182, 0].
// The result is a normal float for every argument (at least 2^-119), so nothing is rounded into
// the subnormal range here: that happens once, when a kernel multiplies by factor * 2^-64.
// x = 0 gives exactly 2^64. NaN propagates (exp(NaN) is NaN): the clamp keeps NaN, so a NaN
// anywhere in a row (or x - max = inf - inf, NaN, for +inf or all -inf rows) makes the row's sum
// NaN, and the row comes out NaN through 1 / sum without any test in the loops.
constexpr float kExpMagic = 12582912.0f;  // 1.5 * 2^23
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.428606820309417232e-06f;
constexpr float kExpC2 = 0.499992311000824f, kExpC3 = 0.16667114198207855f;
constexpr float kExpC4 = 0.041890114545822144f, kExpC5 = 0.00831252709031105f;

// max(kExpClampF32, x) that returns x when x is NaN. On x86, max_ps(a, b) returns its second
// operand when either is NaN; Highway's scalar targets drop NaN, so they test for it.
HWY_INLINE VF ClampBelowKeepNaN(DF d, VF x) {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Max(x, hn::Set(d, kExpClampF32)));
#else
  return hn::Max(hn::Set(d, kExpClampF32), x);
#endif
}

HWY_INLINE VF ExpScaled(DF d, VF x) {
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
  // p * 2^(n + 64), exact (the product is a normal float), in one op after the add.
  return VF{_mm512_scalef_ps(p.raw, hn::Add(n, hn::Set(d, float(kExpScaleLog2))).raw)};
#else
  const hn::RebindToSigned<DF> di;
  const auto scale_bits =
      hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, t), hn::Set(di, 127 + kExpScaleLog2)));
  return hn::Mul(p, hn::BitCast(d, scale_bits));
#endif
}

// y = e * factor for e = ExpScaled(...), with the one rounding into float's subnormal range
// happening here (see exp_range.h for the two cases).
struct ScaledFactor {
  VF first;   // factor * 2^-64, or 2^-64
  VF second;  // 1, or factor
  bool two_steps;
};

HWY_INLINE ScaledFactor MakeScaledFactor(DF d, float factor) {
  if (exp_factor_fits_once(factor)) return {hn::Set(d, factor * kExpUnscaleF32), hn::Set(d, 1.0f), false};
  return {hn::Set(d, kExpUnscaleF32), hn::Set(d, factor), true};
}

HWY_INLINE VF ApplyFactor(const ScaledFactor& f, VF e) {
  const VF once = hn::Mul(e, f.first);
  return f.two_steps ? hn::Mul(once, f.second) : once;
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#endif  // SOFTMAX_CPU_HIGHWAY_EXP_INL_H_
