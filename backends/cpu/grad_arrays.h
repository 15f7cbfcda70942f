/* SPDX-License-Identifier: Apache-2.0 */
// The callers' arrays as seen by the backward and sharded-row drivers: a chunk of any storage
// type read as work-type values (fp32 or fp64), results computed in the work type and written
// back in the array's storage type, and the kernels of grad_kernels.h overloaded on the work
// type so that the drivers are written once for both.
#pragma once

#include <softmax/softmax.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/grad_kernels.h"
#include "backends/cpu/grad_scratch.h"
#include "backends/cpu/stream_policy.h"

namespace softmax_internal {
namespace cpu {

template <class T>
constexpr softmax_dtype kWorkDtype = std::is_same<T, float>::value ? SOFTMAX_DTYPE_F32 : SOFTMAX_DTYPE_F64;

inline size_t storage_size(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64 ? 8 : t == SOFTMAX_DTYPE_F32 ? 4 : 2;
}

// An input array of a call.
struct InArray {
  const void* base;
  softmax_dtype type;
  const void* at(size_t i) const { return static_cast<const unsigned char*>(base) + i * storage_size(type); }
};

// An output array of a call. `stream`: fp32 results go out through non-temporal stores
// (stream_results decides).
struct OutArray {
  void* base;
  softmax_dtype type;
  bool stream = false;
  void* at(size_t i) const { return static_cast<unsigned char*>(base) + i * storage_size(type); }
};

// Non-temporal stores for f32 results by the forward's rule (stream_policy.h), and not in place:
// an output that overwrites an input finds its lines in cache already.
inline bool stream_results(softmax_dtype out_type, bool fp64, bool in_place, size_t elements) {
  if (out_type != SOFTMAX_DTYPE_F32 || fp64 || in_place) return false;
  return stream_result_bytes(elements * sizeof(float));
}

inline void widen(const void* s, softmax_dtype t, int64_t n, float* d) { widen_f32(s, t, n, d); }
inline void widen(const void* s, softmax_dtype t, int64_t n, double* d) { widen_f64(s, t, n, d); }
inline void narrow(const float* s, void* d, softmax_dtype t, int64_t n) { narrow_f32(s, d, t, n); }
inline void narrow(const double* s, void* d, softmax_dtype t, int64_t n) { narrow_f64(s, d, t, n); }

// Elements [first, first + n) of `a` as T: the caller's memory itself when it is stored as T
// (possibly unaligned: the kernels read through memcpy), else widened into the thread's `slot`.
template <class T>
const T* read_as(const InArray& a, size_t first, int64_t n, GradSlot slot) {
  if (a.type == kWorkDtype<T>) return static_cast<const T*>(a.at(first));
  T* buf = grad_scratch_of<T>(slot, size_t(n));
  widen(a.at(first), a.type, n, buf);
  return buf;
}

// Where n results for elements [first, first + n) of `a` are computed: the caller's memory when
// it is stored as T (and not streamed), else the thread's Out buffer, which write_back then
// narrows or streams into `a`.
template <class T>
T* result_space(const OutArray& a, size_t first, int64_t n) {
  if (a.type == kWorkDtype<T> && !a.stream) return static_cast<T*>(a.at(first));
  return grad_scratch_of<T>(GradSlot::Out, size_t(n));
}

template <class T>
void write_back(const T* results, const OutArray& a, size_t first, int64_t n) {
  if (a.type != kWorkDtype<T>) {
    narrow(results, a.at(first), a.type, n);
  } else if (a.stream) {
    if constexpr (std::is_same<T, float>::value) stream_store_f32(results, a.at(first), n);
  }
}

// Streamed f32 results go straight into the caller's dx (grad_streamed_f32) where the CPU can:
// true when done. Rows of every length, short ones included: against finishing into a buffer
// and copying it out, 14-29% less time at 32 columns and 14-18% at 128 on a 2-core Zen 5 EPYC
// (equal from 256 on). Elements [first, first + rows * cols) of `a`; T is the work type.
// `prefetch` as for grad_streamed_f32.
template <class T>
bool finish_streamed_to_dx(const OutArray& a, const T* y, const T* dy, size_t first, int64_t rows, int64_t cols,
                           const T* row_dot, bool log, FinishPrefetch prefetch) {
  if constexpr (std::is_same<T, float>::value) {
    if (a.stream && a.type == SOFTMAX_DTYPE_F32)
      return grad_streamed_f32(y, dy, static_cast<float*>(a.at(first)), rows, cols, row_dot, log, prefetch);
  }
  return false;
}

// ---- the kernels, by work type -------------------------------------------------------------

inline float grad_dot(const float* y, const float* dy, int64_t n, bool log) { return grad_dot_f32(y, dy, n, log); }
inline double grad_dot(const double* y, const double* dy, int64_t n, bool log) { return grad_dot_f64(y, dy, n, log); }

inline void grad_finish(const float* y, const float* dy, float* dx, int64_t n, float dot, bool log,
                        bool prefetch_preceding = false) {
  grad_finish_f32(y, dy, dx, n, dot, log, prefetch_preceding);
}
inline void grad_finish(const double* y, const double* dy, double* dx, int64_t n, double dot, bool log,
                        bool /*prefetch_preceding*/ = false) {
  grad_finish_f64(y, dy, dx, n, dot, log);
}

inline void grad_rows(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, const float* row_dot,
                      bool log, bool prefetch_following) {
  grad_rows_f32(y, dy, dx, rows, cols, row_dot, log, prefetch_following);
}
inline void grad_rows(const double* y, const double* dy, double* dx, int64_t rows, int64_t cols,
                      const double* row_dot, bool log, bool prefetch_following) {
  grad_rows_f64(y, dy, dx, rows, cols, row_dot, log, prefetch_following);
}

inline void dropout_grad(const float* dy, const uint8_t* keep, float scale, int64_t n, float* g) {
  dropout_grad_f32(dy, keep, scale, n, g);
}
inline void dropout_grad(const double* dy, const uint8_t* keep, double scale, int64_t n, double* g) {
  dropout_grad_f64(dy, keep, scale, n, g);
}

inline void scale_by(float* v, int64_t n, float f) { scale_f32(v, n, f); }
inline void scale_by(double* v, int64_t n, double f) { scale_f64(v, n, f); }

}  // namespace cpu
}  // namespace softmax_internal
