/* SPDX-License-Identifier: Apache-2.0 */
// The portable vector kernels, written once as templates over the arithmetic type T (float for
// the fp32 table, double for the fp64 one): the max and exp-sum passes on GCC/clang generic
// vectors with independent accumulators and a branch-free exp, everything else plain loops that
// GCC auto-vectorises (conversions in separate simple loops). The including file wraps each entry
// in a function cloned per x86 level with target_clones; everything here is forced inline into
// those clones, so it is compiled once per level, and lives in an anonymous namespace (each
// including file gets its own copy).
//
// Arithmetic contract: vector_kernels.h. Range handling of exp: exp_range.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/backend.h"
#include "backends/common/double_to_half.h"
#include "backends/common/half_bits.h"
#include "backends/cpu/exp_range.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#define SOFTMAX_CPU_PORTABLE_STREAMS 1
#else
#define SOFTMAX_CPU_PORTABLE_STREAMS 0
#endif

#define SOFTMAX_CPU_INLINE inline __attribute__((always_inline))
// For lambdas that take or return vectors: inlined at every optimisation level. Called, such a
// lambda (compiled without the clone's target) would take the vectors by another ABI than an
// AVX clone passes them in (ymm registers), and -O0 builds crash.
#define SOFTMAX_CPU_INLINE_LAMBDA __attribute__((always_inline))

namespace softmax_internal {
namespace cpu {
namespace {

// The constants of exp_scaled<T> (see there).
template <class T>
struct Arith;

template <>
struct Arith<float> {
  using Bits = uint32_t;
  static constexpr int kMantissaBits = 23, kExponentBias = 127, kScaleLog2 = kExpScaleLog2;
  static constexpr float kClamp = kExpClampF32, kUnscale = kExpUnscaleF32;
  static constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693145751953125f;  // 15 significant bits: n * kLn2Hi exact
  static constexpr float kLn2Lo = 1.428606820309417232e-06f;
  // e^r on |r| <= ln2/2: 1 + r + c2 r^2 + ... + c5 r^5, coefficients fitted for minimax relative
  // error (1.05e-7, under one fp32 ulp); the same as the Highway kernels'.
  // X: float or a vector of floats.
  template <class X>
  static SOFTMAX_CPU_INLINE X exp_reduced(X r) {
    X p = 0.00831252709031105f * r + 0.041890114545822144f;
    p = p * r + 0.16667114198207855f;
    p = p * r + 0.499992311000824f;
    p = p * r + 1.0f;
    return p * r + 1.0f;
  }
};

template <>
struct Arith<double> {
  using Bits = uint64_t;
  static constexpr int kMantissaBits = 52, kExponentBias = 1023, kScaleLog2 = kExpScaleLog2F64;
  static constexpr double kClamp = kExpClampF64, kUnscale = kExpUnscaleF64;
  static constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr double kLog2e = 1.4426950408889634074;
  static constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 32 significant bits
  static constexpr double kLn2Lo = 1.90821492927058770002e-10;
  // e^r on |r| <= ln2/2 by its Taylor polynomial of degree 13 (truncation error below 5e-18).
  template <class X>
  static SOFTMAX_CPU_INLINE X exp_reduced(X r) {
    X p = 1.0 / 6227020800.0 * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    return p * r + 1.0;
  }
};

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// The clamp of exp_scaled as a value the optimiser cannot see: were it a known constant, GCC
// would evaluate exp of the clamped arguments at compile time and turn the clamp into a branch
// around the whole exp, and a loop with such a branch is not vectorised. Call it outside loops.
template <class T>
SOFTMAX_CPU_INLINE T opaque_exp_clamp() {
  T clamp = Arith<T>::kClamp;
  __asm__("" : "+m"(clamp));
  return clamp;
}

// e^x * 2^kScaleLog2 for x in [-inf, 0] (exp_range.h): clamp (keeping NaN), n = round(x / ln2)
// by the magic-number trick (which leaves n in the low mantissa bits of t), Cody-Waite reduction
// r = x - n ln2, e^r by a polynomial, times 2^(n + kScaleLog2) built in the exponent field.
// `clamp` is opaque_exp_clamp<T>().
template <class T>
SOFTMAX_CPU_INLINE T exp_scaled(T x, T clamp) {
  using A = Arith<T>;
  using Bits = typename A::Bits;
  x = x < clamp ? clamp : x;  // NaN compares false and stays
  const T t = x * A::kLog2e + A::kMagic;
  const T n = t - A::kMagic;
  T r = x - n * A::kLn2Hi;
  r = r - n * A::kLn2Lo;
  const Bits scale = (__builtin_bit_cast(Bits, t) + Bits(A::kExponentBias + A::kScaleLog2)) << A::kMantissaBits;
  return A::exp_reduced(r) * __builtin_bit_cast(T, scale);
}

// y = e * factor for a scaled e (exp_range.h): one rounding when factor * 2^-scale is normal.
template <class T>
struct ScaledFactor {
  T first, second;
  bool two_steps;
  explicit ScaledFactor(T factor)
      : first(exp_factor_fits_once(factor) ? factor * Arith<T>::kUnscale : Arith<T>::kUnscale),
        second(factor),
        two_steps(!exp_factor_fits_once(factor)) {}
};

// v where keep is 1, +0 where it is 0. The select is done on the bits (an all-ones or zero mask
// from the keep byte): written as a conditional, GCC made it a branch per element instead of
// vector code; and NaN * 0 would be NaN, hence no multiply by the byte.
template <class T>
SOFTMAX_CPU_INLINE T keep_or_zero(T v, uint8_t keep) {
  using Bits = typename Arith<T>::Bits;
  return __builtin_bit_cast(T, __builtin_bit_cast(Bits, v) & (Bits{0} - Bits{keep}));
}

// ---- storage ----------------------------------------------------------------------------------

inline size_t storage_size(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64 ? 8 : t == SOFTMAX_DTYPE_F32 ? 4 : 2;
}

template <class T>
constexpr softmax_dtype kDtypeOf = std::is_same<T, float>::value ? SOFTMAX_DTYPE_F32 : SOFTMAX_DTYPE_F64;

// Whether p can be used as a T* in place (the caller's pointer need not be element aligned).
template <class T>
SOFTMAX_CPU_INLINE bool usable_as(const void* p, softmax_dtype t) {
  return t == kDtypeOf<T> && reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0;
}

template <class From>
SOFTMAX_CPU_INLINE From read_raw(const unsigned char* p, size_t i) {
  From v;
  std::memcpy(&v, p + i * sizeof(From), sizeof(From));
  return v;
}

// n elements of x (type t) as T in `out`.
template <class T>
SOFTMAX_CPU_INLINE void convert_in(const void* x, softmax_dtype t, size_t n, T* __restrict out) {
  const unsigned char* p = static_cast<const unsigned char*>(x);
  switch (t) {
    case SOFTMAX_DTYPE_F32:
      for (size_t i = 0; i < n; ++i) out[i] = T(read_raw<float>(p, i));
      break;
    case SOFTMAX_DTYPE_F64:
      for (size_t i = 0; i < n; ++i) out[i] = T(read_raw<double>(p, i));
      break;
    case SOFTMAX_DTYPE_F16:
      for (size_t i = 0; i < n; ++i) out[i] = T(f16_to_float(read_raw<uint16_t>(p, i)));
      break;
    default:
      for (size_t i = 0; i < n; ++i) out[i] = T(bf16_to_float(read_raw<uint16_t>(p, i)));
      break;
  }
}

// x as a T array: the caller's pointer when it already is one, else converted into the thread's
// Input buffer.
template <class T>
SOFTMAX_CPU_INLINE const T* as_arith(const void* x, softmax_dtype t, size_t n) {
  if (usable_as<T>(x, t)) return static_cast<const T*>(x);
  T* buf = static_cast<T*>(thread_scratch(ScratchSlot::Input, n * sizeof(T)));
  convert_in<T>(x, t, n, buf);
  return buf;
}

// One T value in storage type t, rounded once.
template <class T>
SOFTMAX_CPU_INLINE uint16_t to_half_bits(T v, softmax_dtype t) {
  if (std::is_same<T, double>::value)
    return t == SOFTMAX_DTYPE_F16 ? double_to_f16(double(v)) : double_to_bf16(double(v));
  return t == SOFTMAX_DTYPE_F16 ? float_to_f16(float(v)) : float_to_bf16(float(v));
}

// n finished T values to y in its storage type t.
template <class T>
SOFTMAX_CPU_INLINE void convert_out(const T* __restrict src, void* dst, softmax_dtype t, size_t n) {
  unsigned char* p = static_cast<unsigned char*>(dst);
  switch (t) {
    case SOFTMAX_DTYPE_F32:
      for (size_t i = 0; i < n; ++i) {
        const float v = float(src[i]);
        std::memcpy(p + 4 * i, &v, 4);
      }
      break;
    case SOFTMAX_DTYPE_F64:
      for (size_t i = 0; i < n; ++i) {
        const double v = double(src[i]);
        std::memcpy(p + 8 * i, &v, 8);
      }
      break;
    case SOFTMAX_DTYPE_F16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = to_half_bits(src[i], SOFTMAX_DTYPE_F16);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    default:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = to_half_bits(src[i], SOFTMAX_DTYPE_BF16);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
  }
}

// Where finished T values go: y itself when it is a T array, else the thread's Output buffer
// (then written out by finish_out). Ordinary stores: only f32 short rows on x86-64-v3 stream
// their output (see "non-temporal stores" below); 16-byte non-temporal stores from an L1 buffer
// measured slower here than the read-for-ownership they save.
template <class T>
SOFTMAX_CPU_INLINE T* out_buffer(void* y, softmax_dtype t, size_t n) {
  if (usable_as<T>(y, t)) return static_cast<T*>(y);
  return static_cast<T*>(thread_scratch(ScratchSlot::Output, n * sizeof(T)));
}

template <class T>
SOFTMAX_CPU_INLINE void finish_out(const T* out, void* y, softmax_dtype t, size_t n) {
  if (static_cast<const void*>(out) != y) convert_out<T>(out, y, t, n);
}

// ---- reductions, on generic vectors ------------------------------------------------------------

// The max and exp-sum passes are written on GCC/clang generic vectors (32 bytes: what the
// compiler lowers to one AVX2 / half an AVX-512 register, or two SSE2 ones), not left to the loop
// vectoriser: with arrays of accumulators GCC reloaded and stored them every step and went
// through memory for the final reductions, which made short rows 2-3x slower than Highway's.
template <class T>
struct Simd;

template <>
struct Simd<float> {
  typedef float V __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
  static constexpr size_t kLanes = 8;
};

template <>
struct Simd<double> {
  typedef double V __attribute__((vector_size(32)));
  typedef uint64_t U __attribute__((vector_size(32)));
  static constexpr size_t kLanes = 4;
};

template <class T>
SOFTMAX_CPU_INLINE typename Simd<T>::V splat_v(T v) {
  // Lane by lane (the compiler makes it one broadcast), not V{} + v, which would turn -0 into +0:
  // log-softmax subtracts a row max of -0 and must keep the sign of a zero result.
  typename Simd<T>::V r;
#pragma GCC unroll 8
  for (size_t j = 0; j < Simd<T>::kLanes; ++j) r[j] = v;
  return r;
}

// Loads and stores of whole vectors (any alignment), and of the first n < kLanes lanes.
template <class T>
SOFTMAX_CPU_INLINE typename Simd<T>::V load_v(const T* p) {
  typename Simd<T>::V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Element by element (unrolled): a memcpy of n elements would be a library call.
template <class T>
SOFTMAX_CPU_INLINE typename Simd<T>::V load_first(const T* p, size_t n, T pad) {
  typename Simd<T>::V v = splat_v(pad);
#pragma GCC unroll 8
  for (size_t j = 0; j < Simd<T>::kLanes; ++j)
    if (j < n) v[j] = p[j];
  return v;
}
template <class T>
SOFTMAX_CPU_INLINE void store_v(T* p, typename Simd<T>::V v) {
  std::memcpy(p, &v, sizeof v);
}
// Where the compiler has a shuffle builtin: in pieces of half, a quarter, ... of a vector, taken
// from registers (at most three stores, whose branches depend only on n, the same for every row
// of a call); else lane by lane.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SOFTMAX_CPU_HAVE_SHUFFLEVECTOR 1
#else
#define SOFTMAX_CPU_HAVE_SHUFFLEVECTOR 0
#endif

template <class T>
SOFTMAX_CPU_INLINE void store_first(T* p, typename Simd<T>::V v, size_t n) {
#if SOFTMAX_CPU_HAVE_SHUFFLEVECTOR
  if constexpr (Simd<T>::kLanes == 8) {
    if (n & 4) {
      const auto half = __builtin_shufflevector(v, v, 0, 1, 2, 3);
      std::memcpy(p, &half, sizeof half);
      v = __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7);
      p += 4;
    }
  }
  if (n & 2) {
    const auto pair = __builtin_shufflevector(v, v, 0, 1);
    std::memcpy(p, &pair, sizeof pair);
    if constexpr (Simd<T>::kLanes == 8) {
      v = __builtin_shufflevector(v, v, 2, 3, 2, 3, 2, 3, 2, 3);
    } else {
      v = __builtin_shufflevector(v, v, 2, 3, 2, 3);
    }
    p += 2;
  }
  if (n & 1) p[0] = v[0];
#else
#pragma GCC unroll 8
  for (size_t j = 0; j < Simd<T>::kLanes; ++j)
    if (j < n) p[j] = v[j];
#endif
}

// A lane mask (all ones where true) of the lanes below n, for selects of T vectors.
template <class T>
SOFTMAX_CPU_INLINE auto lanes_below(size_t n) {
  using Signed = std::make_signed_t<typename Arith<T>::Bits>;
  typedef Signed S __attribute__((vector_size(sizeof(typename Simd<T>::V))));
  S lane{};
#pragma GCC unroll 8
  for (size_t j = 0; j < Simd<T>::kLanes; ++j) lane[j] = Signed(j);
  return lane < Signed(n);
}

// load_first where a whole vector may be read at p (it stays inside the caller's buffer): one
// load and a select instead of a load per lane.
template <class T>
SOFTMAX_CPU_INLINE typename Simd<T>::V load_first_reading_past(const T* p, size_t n, T pad) {
  return lanes_below<T>(n) ? load_v(p) : splat_v(pad);
}

// ---- non-temporal stores -------------------------------------------------------------------

// Large outputs (the drivers' `stream`) can go out with non-temporal stores straight from the
// registers that hold the finished values, so y's lines are never read for ownership. The row
// kernels take a store policy, Out:
//   OrdinaryStores  no non-temporal stores (every clone, and every machine but x86-64);
//   Streams32       32-byte AVX stores, for code compiled for x86-64-v3 and run only there (the
//                   including file dispatches). Written as inline asm: GCC will not inline the
//                   AVX intrinsic through these target-neutral templates into a v3 function.
// There is no 16-byte (SSE2) form for older CPUs: on Zen 3, 16-byte non-temporal stores made
// 32-column rows 1.5x slower than ordinary stores, while 32-byte ones made them faster.
struct OrdinaryStores {
  static constexpr bool kNonTemporal = false;
  static constexpr size_t kAlign = 1;
  template <class T>
  static SOFTMAX_CPU_INLINE void store(T* p, typename Simd<T>::V v, size_t bytes) {
    std::memcpy(p, &v, bytes);
  }
};

struct Streams32 {
  static constexpr bool kNonTemporal = SOFTMAX_CPU_PORTABLE_STREAMS == 1;
  static constexpr size_t kAlign = 32;
  // One whole vector v to p (32-byte aligned; `bytes` is 32).
  template <class T>
  static SOFTMAX_CPU_INLINE void store(T* p, typename Simd<T>::V v, size_t bytes) {
#if SOFTMAX_CPU_PORTABLE_STREAMS
    (void)bytes;
    __asm__("vmovntps %1, %0" : "=m"(*reinterpret_cast<typename Simd<T>::V*>(p)) : "x"(v));
#else
    std::memcpy(p, &v, bytes);
#endif
  }
};

// Whether finished rows of `cols` T values can be streamed straight to y with policy Out: y is a
// T array on an Out::kAlign boundary and so is every row.
template <class T, class Out>
SOFTMAX_CPU_INLINE bool stream_rows_to(const void* y, softmax_dtype t, int64_t cols) {
  return Out::kNonTemporal && t == kDtypeOf<T> && reinterpret_cast<uintptr_t>(y) % Out::kAlign == 0 &&
         (size_t(cols) * sizeof(T)) % Out::kAlign == 0;
}

// Makes this thread's non-temporal stores visible to other threads (before a barrier).
SOFTMAX_CPU_INLINE void stream_fence() {
#if SOFTMAX_CPU_PORTABLE_STREAMS
  _mm_sfence();
#endif
}

// y[i..] = g(i, m) vector by vector for n T values (n * sizeof(T) and y aligned for Out) with
// Out's non-temporal stores; m is the number of lanes that count (kLanes but at the end).
template <class T, class Out, class G>
SOFTMAX_CPU_INLINE void stream_out(T* y, size_t n, G g) {
  constexpr size_t L = Simd<T>::kLanes;
  size_t i = 0;
  for (; i + L <= n; i += L) Out::template store<T>(y + i, g(i, L), sizeof(typename Simd<T>::V));
  if (i < n) Out::template store<T>(y + i, g(i, n - i), (n - i) * sizeof(T));
}

// a > b ? a : b per lane. NaN may or may not survive: the exp pass catches it.
template <class V>
SOFTMAX_CPU_INLINE V max_v(V a, V b) {
  return a > b ? a : b;
}

// Lanes folded in halves (a fixed tree: t[j] = op(t[j], t[j + w]) for w = kLanes/2, ..., 1) with
// op. Done on whole vectors where the compiler has a shuffle builtin: each level is one shuffle
// and one vector op, and lane 0 goes through exactly the scalar tree's operations.

template <class T, class Op>
SOFTMAX_CPU_INLINE T fold_lanes(typename Simd<T>::V v, Op op) {
#if SOFTMAX_CPU_HAVE_SHUFFLEVECTOR
  if constexpr (Simd<T>::kLanes == 8) {
    v = op(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));
    return op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6))[0];
  } else {
    static_assert(Simd<T>::kLanes == 4, "fold_lanes: 4 or 8 lanes");
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
    return op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2))[0];
  }
#else
  T t[Simd<T>::kLanes];
  std::memcpy(t, &v, sizeof v);
#pragma GCC unroll 4
  for (size_t w = Simd<T>::kLanes / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
    for (size_t j = 0; j < w; ++j) t[j] = op(t[j], t[j + w]);
  return t[0];
#endif
}
template <class T>
SOFTMAX_CPU_INLINE T sum_lanes(typename Simd<T>::V v) {
  return fold_lanes<T>(v, [](auto a, auto b) SOFTMAX_CPU_INLINE_LAMBDA { return a + b; });
}
template <class T>
SOFTMAX_CPU_INLINE T max_lanes(typename Simd<T>::V v) {
  return fold_lanes<T>(v, [](auto a, auto b) SOFTMAX_CPU_INLINE_LAMBDA { return b > a ? b : a; });
}

// exp_scaled on a vector: the same steps, lane by lane.
template <class T>
SOFTMAX_CPU_INLINE typename Simd<T>::V exp_scaled_v(typename Simd<T>::V x, typename Simd<T>::V clamp) {
  using A = Arith<T>;
  using V = typename Simd<T>::V;
  using U = typename Simd<T>::U;
  x = x < clamp ? clamp : x;  // NaN compares false and stays
  const V t = x * A::kLog2e + A::kMagic;
  const V n = t - A::kMagic;
  V r = x - n * A::kLn2Hi;
  r = r - n * A::kLn2Lo;
  const U scale = (__builtin_bit_cast(U, t) + typename A::Bits(A::kExponentBias + A::kScaleLog2)) << A::kMantissaBits;
  return A::exp_reduced(r) * __builtin_bit_cast(V, scale);
}

// Accumulator vectors per pass: enough to hide the add latency on long rows, fewer on short ones,
// whose time goes to the final reductions. Depends only on n, so results do too.
template <class T>
SOFTMAX_CPU_INLINE size_t accumulators_for(size_t n) {
  return n <= 8 * Simd<T>::kLanes ? 1 : n <= 32 * Simd<T>::kLanes ? 2 : 4;
}

// Max of n values.
template <class T, size_t kAcc>
SOFTMAX_CPU_INLINE T row_max_with(const T* x, size_t n) {
  using V = typename Simd<T>::V;
  constexpr size_t L = Simd<T>::kLanes;
  V m[kAcc];
  for (size_t k = 0; k < kAcc; ++k) m[k] = splat_v(kNegInf<T>);
  size_t i = 0;
  for (; i + kAcc * L <= n; i += kAcc * L)
    for (size_t k = 0; k < kAcc; ++k) m[k] = max_v(m[k], load_v(x + i + k * L));
  for (; i + L <= n; i += L) m[0] = max_v(m[0], load_v(x + i));
  if (i < n) m[kAcc - 1] = max_v(m[kAcc - 1], load_first(x + i, n - i, kNegInf<T>));
  for (size_t k = 1; k < kAcc; ++k) m[0] = max_v(m[0], m[k]);
  return max_lanes<T>(m[0]);
}

template <class T>
SOFTMAX_CPU_INLINE T row_max(const T* x, size_t n) {
  switch (accumulators_for<T>(n)) {
    case 1:
      return row_max_with<T, 1>(x, n);
    case 2:
      return row_max_with<T, 2>(x, n);
    default:
      return row_max_with<T, 4>(x, n);
  }
}

template <class T>
SOFTMAX_CPU_INLINE bool any_nan(const T* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(x[i])) return true;
  return false;
}

// Sum of the scaled e_i = exp_scaled(x_i - shift), optionally storing them in e (which may be x:
// each vector is read before its e is written). Padding lanes of the last vector hold
// exp_scaled(-inf), a tiny normal number that cannot move a sum holding exp_scaled(0).
template <class T, bool kStore, size_t kAcc>
SOFTMAX_CPU_INLINE T exp_sum_with(const T* x, size_t n, T shift, T* e) {
  using V = typename Simd<T>::V;
  constexpr size_t L = Simd<T>::kLanes;
  const V clamp = splat_v(opaque_exp_clamp<T>()), vs = splat_v(shift);
  V a[kAcc];
  for (size_t k = 0; k < kAcc; ++k) a[k] = V{};
  size_t i = 0;
  for (; i + kAcc * L <= n; i += kAcc * L) {
    for (size_t k = 0; k < kAcc; ++k) {
      const V v = exp_scaled_v<T>(load_v(x + i + k * L) - vs, clamp);
      if (kStore) store_v(e + i + k * L, v);
      a[k] += v;
    }
  }
  for (; i + L <= n; i += L) {
    const V v = exp_scaled_v<T>(load_v(x + i) - vs, clamp);
    if (kStore) store_v(e + i, v);
    a[0] += v;
  }
  if (i < n) {
    const V v = exp_scaled_v<T>(load_first(x + i, n - i, kNegInf<T>) - vs, clamp);
    if (kStore) store_first(e + i, v, n - i);
    a[kAcc - 1] += v;
  }
  for (size_t k = 1; k < kAcc; ++k) a[0] += a[k];
  return sum_lanes<T>(a[0]);
}

template <class T, bool kStore>
SOFTMAX_CPU_INLINE T exp_sum(const T* x, size_t n, T shift, T* e) {
  switch (accumulators_for<T>(n)) {
    case 1:
      return exp_sum_with<T, kStore, 1>(x, n, shift, e);
    case 2:
      return exp_sum_with<T, kStore, 2>(x, n, shift, e);
    default:
      return exp_sum_with<T, kStore, 4>(x, n, shift, e);
  }
}

template <class T>
SOFTMAX_CPU_INLINE void scale_in_place(T* v, size_t n, const ScaledFactor<T>& f) {
  if (f.two_steps) {
    for (size_t i = 0; i < n; ++i) v[i] = v[i] * f.first * f.second;
  } else {
    for (size_t i = 0; i < n; ++i) v[i] = v[i] * f.first;
  }
}

// Softmax (or log-softmax) of one row of n <= kChunkElems values into out (which may be x).
// NaN, +inf or all -inf make the sum NaN (exp propagates NaN), hence the whole row NaN.
template <class T>
SOFTMAX_CPU_INLINE void row_softmax(const T* x, T* out, size_t n, bool log_softmax) {
  const T max = row_max(x, n);
  if (log_softmax) {
    const T s = exp_sum<T, false>(x, n, max, nullptr);
    const T ls = T(std::log(double(s * Arith<T>::kUnscale)));
    for (size_t i = 0; i < n; ++i) out[i] = (x[i] - max) - ls;
  } else {
    const T s = exp_sum<T, true>(x, n, max, out);
    // 1 / s is the row's factor times 2^-scale, normal for every s (at most n * 2^scale).
    const T f = T(1) / s;
    for (size_t i = 0; i < n; ++i) out[i] *= f;
  }
}

// row_softmax into y with Out's non-temporal stores (stream_rows_to<T, Out> holds): the e_i
// wait in `scratch` (L1, n values) and the scaling pass streams them out. Same arithmetic, so
// the same bits.
template <class T, class Out>
SOFTMAX_CPU_INLINE void row_softmax_streamed(const T* x, T* y, T* scratch, size_t n, bool log_softmax) {
  using V = typename Simd<T>::V;
  const T max = row_max(x, n);
  if (log_softmax) {
    const T s = exp_sum<T, false>(x, n, max, nullptr);
    const T ls = T(std::log(double(s * Arith<T>::kUnscale)));
    const V vm = splat_v(max), vl = splat_v(ls);
    stream_out<T, Out>(y, n, [&](size_t i, size_t m) SOFTMAX_CPU_INLINE_LAMBDA {
      return ((m == Simd<T>::kLanes ? load_v(x + i) : load_first(x + i, m, T(0))) - vm) - vl;
    });
  } else {
    const V f = splat_v(T(1) / exp_sum<T, true>(x, n, max, scratch));
    stream_out<T, Out>(y, n, [&](size_t i, size_t) SOFTMAX_CPU_INLINE_LAMBDA { return load_v(scratch + i) * f; });
  }
}

// Rows of at most kVecs vectors (kRegisterRowVecs at most), held in registers from load to store:
// no loops over the row and no second read of it, so a short row costs little more than its
// two cross-lane reductions. The same operations in the same order as row_softmax (one
// accumulator, the last vector padded with -inf), so the same bits. Out is the store policy (with
// non-temporal stores, stream_rows_to<T, Out> holds). With kReadPast, a whole last vector may be
// read (more of the buffer follows the row).
constexpr size_t kRegisterRowVecs = 8;

template <class T, size_t kVecs, class Out, bool kReadPast>
SOFTMAX_CPU_INLINE void row_in_registers(const T* x, T* y, size_t n, bool log_softmax) {
  using V = typename Simd<T>::V;
  constexpr size_t L = Simd<T>::kLanes;
  const size_t last = n - (kVecs - 1) * L;  // lanes of the last vector that count, 1..L
  const T* x_last = x + (kVecs - 1) * L;
  // Vector k of the row (padded with -inf); loaded again for log-softmax's output, from L1, so
  // that the input need not stay in registers beside the exps.
  const auto load = [&](size_t k) SOFTMAX_CPU_INLINE_LAMBDA {
    if (k + 1 < kVecs || last == L) return load_v(x + k * L);
    return kReadPast ? load_first_reading_past(x_last, last, kNegInf<T>) : load_first(x_last, last, kNegInf<T>);
  };
  V v[kVecs];
#pragma GCC unroll 8
  for (size_t k = 0; k < kVecs; ++k) v[k] = load(k);
  V m = splat_v(kNegInf<T>);
#pragma GCC unroll 8
  for (size_t k = 0; k < kVecs; ++k) m = max_v(m, v[k]);
  const V vmax = splat_v(max_lanes<T>(m));
  const V clamp = splat_v(opaque_exp_clamp<T>());
  V e[kVecs];
  V a = V{};
#pragma GCC unroll 8
  for (size_t k = 0; k < kVecs; ++k) {
    e[k] = exp_scaled_v<T>(v[k] - vmax, clamp);
    a += e[k];
  }
  const T s = sum_lanes<T>(a);
  if (log_softmax) {
    const V ls = splat_v(T(std::log(double(s * Arith<T>::kUnscale))));
#pragma GCC unroll 8
    for (size_t k = 0; k < kVecs; ++k) e[k] = (load(k) - vmax) - ls;
  } else {
    // The padding lanes hold exp_scaled(-inf), a tiny normal number that the scaling below could
    // make subnormal, which is slow on some CPUs (AMD Zen among them): zeroed first, as they are
    // never stored.
    if (last != L) e[kVecs - 1] = lanes_below<T>(last) ? e[kVecs - 1] : V{};
    const V f = splat_v(T(1) / s);
#pragma GCC unroll 8
    for (size_t k = 0; k < kVecs; ++k) e[k] *= f;
  }
  if constexpr (Out::kNonTemporal) {
#pragma GCC unroll 8
    for (size_t k = 0; k + 1 < kVecs; ++k) Out::template store<T>(y + k * L, e[k], sizeof(V));
    Out::template store<T>(y + (kVecs - 1) * L, e[kVecs - 1], last * sizeof(T));
  } else {
#pragma GCC unroll 8
    for (size_t k = 0; k + 1 < kVecs; ++k) store_v(y + k * L, e[k]);
    if (last == L) {
      store_v(y + (kVecs - 1) * L, e[kVecs - 1]);
    } else {
      store_first(y + (kVecs - 1) * L, e[kVecs - 1], last);
    }
  }
}

template <class T, size_t kVecs, class Out>
SOFTMAX_CPU_INLINE void rows_in_registers_with(const T* x, T* y, int64_t rows, int64_t cols, bool log_softmax) {
  // Rows whose last vector, read whole, ends inside x's rows of this call; then the rest.
  const int64_t total = rows * cols, reach = int64_t(kVecs * Simd<T>::kLanes);
  int64_t r = 0;
  for (; r < rows && r * cols + reach <= total; ++r)
    row_in_registers<T, kVecs, Out, true>(x + r * cols, y + r * cols, size_t(cols), log_softmax);
  for (; r < rows; ++r)
    row_in_registers<T, kVecs, Out, false>(x + r * cols, y + r * cols, size_t(cols), log_softmax);
}

template <class T, class Out>
SOFTMAX_CPU_INLINE void rows_in_registers(const T* x, T* y, int64_t rows, int64_t cols, bool log_softmax) {
  switch ((size_t(cols) + Simd<T>::kLanes - 1) / Simd<T>::kLanes) {
    case 1:
      return rows_in_registers_with<T, 1, Out>(x, y, rows, cols, log_softmax);
    case 2:
      return rows_in_registers_with<T, 2, Out>(x, y, rows, cols, log_softmax);
    case 3:
      return rows_in_registers_with<T, 3, Out>(x, y, rows, cols, log_softmax);
    case 4:
      return rows_in_registers_with<T, 4, Out>(x, y, rows, cols, log_softmax);
    case 5:
      return rows_in_registers_with<T, 5, Out>(x, y, rows, cols, log_softmax);
    case 6:
      return rows_in_registers_with<T, 6, Out>(x, y, rows, cols, log_softmax);
    case 7:
      return rows_in_registers_with<T, 7, Out>(x, y, rows, cols, log_softmax);
    default:
      return rows_in_registers_with<T, 8, Out>(x, y, rows, cols, log_softmax);
  }
}

// ---- the table entries ------------------------------------------------------------------------

constexpr int64_t kTileElems = 8192;

// With `stream`, rows that Out can stream go out with its non-temporal stores.
template <class T, class Out = OrdinaryStores>
SOFTMAX_CPU_INLINE void short_rows(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols,
                                   bool log_softmax, bool stream) {
  const size_t xs = storage_size(dtype.x), ys = storage_size(dtype.y);
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  unsigned char* yb = static_cast<unsigned char*>(y);
  const bool direct = usable_as<T>(x, dtype.x) && usable_as<T>(y, dtype.y);
  const bool streamed = stream && direct && stream_rows_to<T, Out>(y, dtype.y, cols);
  if (direct && size_t(cols) <= kRegisterRowVecs * Simd<T>::kLanes) {
    if (streamed) {
      rows_in_registers<T, Out>(static_cast<const T*>(x), static_cast<T*>(y), rows, cols, log_softmax);
    } else {
      rows_in_registers<T, OrdinaryStores>(static_cast<const T*>(x), static_cast<T*>(y), rows, cols, log_softmax);
    }
    return;
  }
  if (streamed) {
    // Scratch with room for a whole vector past the row (the scaling pass reads whole vectors).
    T* scratch = static_cast<T*>(thread_scratch(ScratchSlot::Output, size_t(cols) * sizeof(T)));
    for (int64_t r = 0; r < rows; ++r)
      row_softmax_streamed<T, Out>(static_cast<const T*>(x) + r * cols, static_cast<T*>(y) + r * cols, scratch,
                                   size_t(cols), log_softmax);
    return;
  }
  if (direct) {
    // Rows finished straight in y; in place is fine (each element is read before its position
    // is written, and the max pass reads the whole row first).
    for (int64_t r = 0; r < rows; ++r)
      row_softmax<T>(static_cast<const T*>(x) + r * cols, static_cast<T*>(y) + r * cols, size_t(cols),
                     log_softmax);
    return;
  }
  // A tile of rows finished in the Output buffer, then converted to y in one sweep (all its rows
  // read before any is written: in place with equal element sizes is fine too).
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  T* tile = static_cast<T*>(thread_scratch(ScratchSlot::Output, size_t(tile_rows * cols) * sizeof(T)));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      const T* xr = as_arith<T>(xb + size_t((r0 + r) * cols) * xs, dtype.x, size_t(cols));
      row_softmax<T>(xr, tile + r * cols, size_t(cols), log_softmax);
    }
    convert_out<T>(tile, yb + size_t(r0 * cols) * ys, dtype.y, size_t(nr * cols));
  }
}

template <class T>
SOFTMAX_CPU_INLINE ChunkPartial chunk_partial(const void* x, Dtypes dtype, int64_t n, void* exp_out) {
  const T* xc = as_arith<T>(x, dtype.x, size_t(n));
  T* e = static_cast<T*>(exp_out);
  const T max = row_max(xc, size_t(n));
  if (max == kNegInf<T>) {
    // All -inf (or -inf and NaN): contributes nothing to a finite row, but a NaN must still
    // poison the row, and exp(x - max) would be NaN for the -inf elements, so look directly.
    if (e != nullptr) std::fill(e, e + n, T(0));
    return ChunkPartial{double(max), 0.0, any_nan(xc, size_t(n))};
  }
  const T s = e != nullptr ? exp_sum<T, true>(xc, size_t(n), max, e) : exp_sum<T, false>(xc, size_t(n), max, nullptr);
  // A NaN sum means a NaN or a +inf in the chunk: either way the row is NaN.
  return ChunkPartial{double(max), double(s * Arith<T>::kUnscale), std::isnan(s)};
}

template <class T>
SOFTMAX_CPU_INLINE void finish_recompute(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f) {
  const T* xc = as_arith<T>(x, dtype.x, size_t(n));
  T* out = out_buffer<T>(y, dtype.y, size_t(n));
  const T shift = T(f.shift);
  const ScaledFactor<T> sf(T(f.factor));
  const T clamp = opaque_exp_clamp<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = exp_scaled(xc[i] - shift, clamp);
  scale_in_place(out, size_t(n), sf);
  finish_out<T>(out, y, dtype.y, size_t(n));
}

template <class T>
SOFTMAX_CPU_INLINE void finish_stored(const void* e, void* y, Dtypes dtype, int64_t n, double factor) {
  const T* ec = static_cast<const T*>(e);
  T* out = out_buffer<T>(y, dtype.y, size_t(n));
  const ScaledFactor<T> sf(static_cast<T>(factor));
  if (sf.two_steps) {
    for (int64_t i = 0; i < n; ++i) out[i] = ec[i] * sf.first * sf.second;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = ec[i] * sf.first;
  }
  finish_out<T>(out, y, dtype.y, size_t(n));
}

template <class T>
SOFTMAX_CPU_INLINE void finish_log(const void* x, void* y, Dtypes dtype, int64_t n, double max, double log_sum) {
  const T* xc = as_arith<T>(x, dtype.x, size_t(n));
  T* out = out_buffer<T>(y, dtype.y, size_t(n));
  const T m = T(max), ls = T(log_sum);
  for (int64_t i = 0; i < n; ++i) out[i] = (xc[i] - m) - ls;
  finish_out<T>(out, y, dtype.y, size_t(n));
}

// Phase 2 of a chunk straight into y with Out's non-temporal stores, for x (or e) a T array and
// stream_rows_to<T, Out>(y, t, n) true (so n is whole vectors): the arithmetic of
// finish_recompute, finish_stored and finish_log, vector by vector, so the same bits.
template <class T, class Out>
SOFTMAX_CPU_INLINE void finish_recompute_streamed(const T* x, T* y, int64_t n, ChunkFinish f) {
  using V = typename Simd<T>::V;
  const V vs = splat_v(T(f.shift)), clamp = splat_v(opaque_exp_clamp<T>());
  const ScaledFactor<T> sf(T(f.factor));
  const V first = splat_v(sf.first), second = splat_v(sf.second);
  if (sf.two_steps) {
    stream_out<T, Out>(y, size_t(n), [&](size_t i, size_t) SOFTMAX_CPU_INLINE_LAMBDA {
      return exp_scaled_v<T>(load_v(x + i) - vs, clamp) * first * second;
    });
  } else {
    stream_out<T, Out>(y, size_t(n), [&](size_t i, size_t) SOFTMAX_CPU_INLINE_LAMBDA {
      return exp_scaled_v<T>(load_v(x + i) - vs, clamp) * first;
    });
  }
}

template <class T, class Out>
SOFTMAX_CPU_INLINE void finish_stored_streamed(const T* e, T* y, int64_t n, double factor) {
  using V = typename Simd<T>::V;
  const ScaledFactor<T> sf(static_cast<T>(factor));
  const V first = splat_v(sf.first), second = splat_v(sf.second);
  if (sf.two_steps) {
    stream_out<T, Out>(y, size_t(n),
                       [&](size_t i, size_t) SOFTMAX_CPU_INLINE_LAMBDA { return load_v(e + i) * first * second; });
  } else {
    stream_out<T, Out>(y, size_t(n),
                       [&](size_t i, size_t) SOFTMAX_CPU_INLINE_LAMBDA { return load_v(e + i) * first; });
  }
}

template <class T, class Out>
SOFTMAX_CPU_INLINE void finish_log_streamed(const T* x, T* y, int64_t n, double max, double log_sum) {
  using V = typename Simd<T>::V;
  const V m = splat_v(T(max)), ls = splat_v(T(log_sum));
  stream_out<T, Out>(y, size_t(n),
                     [&](size_t i, size_t) SOFTMAX_CPU_INLINE_LAMBDA { return (load_v(x + i) - m) - ls; });
}

template <class T>
SOFTMAX_CPU_INLINE void finish_dropout(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f,
                                       const uint8_t* keep) {
  const T* xc = as_arith<T>(x, dtype.x, size_t(n));
  T* out = out_buffer<T>(y, dtype.y, size_t(n));
  const T shift = T(f.shift);
  const ScaledFactor<T> sf(T(f.factor));
  const T clamp = opaque_exp_clamp<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = exp_scaled(xc[i] - shift, clamp);
  scale_in_place(out, size_t(n), sf);
  for (int64_t i = 0; i < n; ++i) out[i] = keep_or_zero(out[i], keep[i]);
  finish_out<T>(out, y, dtype.y, size_t(n));
}

// dst = keep ? e * f : 0 for n scaled e values (dst may be e).
template <class T>
SOFTMAX_CPU_INLINE void apply_keep(const T* e, const uint8_t* keep, size_t n, const ScaledFactor<T>& f, T* dst) {
  if (f.two_steps) {
    for (size_t i = 0; i < n; ++i) dst[i] = keep_or_zero(e[i] * f.first * f.second, keep[i]);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = keep_or_zero(e[i] * f.first, keep[i]);
  }
}

template <class T>
SOFTMAX_CPU_INLINE void finish_dropout_stored(const void* e, void* y, Dtypes dtype, int64_t n, double factor,
                                              const uint8_t* keep) {
  T* out = out_buffer<T>(y, dtype.y, size_t(n));
  apply_keep(static_cast<const T*>(e), keep, size_t(n), ScaledFactor<T>(static_cast<T>(factor)), out);
  finish_out<T>(out, y, dtype.y, size_t(n));
}

// Keep bytes of flat elements first .. first+n-1 under a word threshold (dropout_keep_bytes.h).
using KeepBytesFn = void (*)(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first, int64_t n,
                             uint8_t* keep);

// Dropout of whole rows (cols <= kChunkElems): per tile of rows, the keep bytes in one go, then per
// row max, exp + store + sum, and y = keep ? e * scale / sum : 0 (factor formed as chunk_finish
// forms it for one chunk).
template <class T>
SOFTMAX_CPU_INLINE void short_rows_dropout(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols,
                                           uint64_t first, const DropoutRule& rule, uint8_t* mask,
                                           KeepBytesFn keep_bytes) {
  const size_t xs = storage_size(dtype.x), ys = storage_size(dtype.y);
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  unsigned char* yb = static_cast<unsigned char*>(y);
  const bool direct = usable_as<T>(x, dtype.x) && usable_as<T>(y, dtype.y);
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  uint8_t* keep = static_cast<uint8_t*>(thread_scratch(ScratchSlot::Keep, size_t(tile_rows * cols)));
  T* tile = direct ? nullptr
                   : static_cast<T*>(thread_scratch(ScratchSlot::Output, size_t(tile_rows * cols) * sizeof(T)));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    keep_bytes(rule.seed, rule.offset, rule.threshold, first + uint64_t(r0 * cols), nr * cols, keep);
    if (mask != nullptr) std::memcpy(mask + r0 * cols, keep, size_t(nr * cols));
    for (int64_t r = 0; r < nr; ++r) {
      const T* xr = direct ? static_cast<const T*>(x) + (r0 + r) * cols
                           : as_arith<T>(xb + size_t((r0 + r) * cols) * xs, dtype.x, size_t(cols));
      T* out = direct ? static_cast<T*>(y) + (r0 + r) * cols : tile + r * cols;
      const T max = row_max(xr, size_t(cols));
      const T s = exp_sum<T, true>(xr, size_t(cols), max, out);
      const double sum = double(s * Arith<T>::kUnscale);
      apply_keep(out, keep + r * cols, size_t(cols), ScaledFactor<T>(static_cast<T>(1.0 / sum * rule.scale)), out);
    }
    if (!direct) convert_out<T>(tile, yb + size_t(r0 * cols) * ys, dtype.y, size_t(nr * cols));
  }
}

}  // namespace
}  // namespace cpu
}  // namespace softmax_internal
