/* SPDX-License-Identifier: Apache-2.0 */
// How the CPU kernels' exp keeps results exact at the bottom of the floating-point range.
//
// Softmax needs y = e^(x - max) * factor (factor = 1/sum, times the dropout scale). Computing
// e = e^(x - max) as a float first would round it into float's subnormal range whenever
// x - max < -87.3 and then round again in the product, so results near and below the smallest
// subnormal could come out one step off, or nonzero where the exact result rounds to +0. Instead
// every exp returns e * 2^kExpScaleLog2, which is a normal number for every argument the kernels
// see, and the single rounding into the subnormal range is the final product:
//   y = (e * 2^64) * (factor * 2^-64),  one rounding when factor * 2^-64 is normal (factor >= 2^-62;
//                                        fp64: 2^128 and 2^-894).
// The drivers keep every factor in that range: a short row's factor is 1/sum >= 1/cols, and a
// chunk whose factor exp(m_c - M) / S would be smaller is finished with shift M instead of its own
// max m_c (chunk_merge.h), so its factor is 1/S again. A smaller factor that reaches a kernel
// anyway is applied in two steps, ((e * 2^64) * 2^-64) * factor, at most one subnormal step off.
// Sums of the scaled values are the scaled sums exactly (powers of two), unscaled at the end.
//
// Arguments below the clamp are replaced by the clamp: the largest factor is the dropout scale
// 1/(1-p) <= 2^24 (p is a float below 1) times a softmax factor <= 1, so an element whose
// e^(x - max) is at most e^clamp contributes less than half the smallest subnormal to y (fp32:
// e^-126 * 2^24 < 2^-157; fp64: e^-770 * 2^24 < 2^-1086), i.e. it comes out exactly +0, as does
// exp(-inf); and nothing below the clamp can move a sum that holds the row's maximum (e^0).
// The scale keeps every clamped result normal and below the largest float:
//   fp32: n = round((x - max) / ln2) in [-182, 0], 2^(n + 64) in [2^-118, 2^64];
//   fp64: n in [-1111, 0], 2^(n + 128) in [2^-983, 2^128].
#pragma once

namespace softmax_internal {
namespace cpu {

constexpr float kExpClampF32 = -126.0f;
constexpr int kExpScaleLog2 = 64;
constexpr float kExpUnscaleF32 = 0x1p-64f;

constexpr double kExpClampF64 = -770.0;
constexpr int kExpScaleLog2F64 = 128;
constexpr double kExpUnscaleF64 = 0x1p-128;

// Whether y = e_scaled * (factor * 2^-64) rounds once (factor * 2^-64 is a normal float). False
// for NaN, which the two-step form propagates just as well.
inline bool exp_factor_fits_once(float factor) { return factor >= 0x1p-62f; }
inline bool exp_factor_fits_once(double factor) { return factor >= 0x1p-894; }

}  // namespace cpu
}  // namespace softmax_internal
