// SPDX-License-Identifier: Apache-2.0
// The portable fp32 vector kernels: portable_kernels.h instantiated for float, each entry compiled
// three times with target_clones (x86-64-v4 = AVX-512, x86-64-v3 = AVX2+FMA, baseline SSE2) and
// picked by the loader at run time through an ifunc; the entries that can write streamed output
// hand it, on x86-64-v3 CPUs, to a version compiled for that level with 32-byte non-temporal
// stores.
//
// Why this exists next to the Highway kernels: Highway is an optional build dependency, and
// machines without libhwy-dev (the GPU build machine among them) must still get a correct CPU
// backend that is not slow. It follows the same arithmetic contract (vector_kernels.h) and the
// same exp algorithm as the Highway kernels.
#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/portable_kernels.h"
#include "backends/cpu/target_clones.h"
#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {
namespace {

constexpr KeepBytesFn kKeepBytes = dropout_keep_bytes_portable;

#if SOFTMAX_CPU_X86_LEVELS
// Streamed outputs (short rows, and phase 2 of long rows' chunks) with 32-byte non-temporal
// stores (portable_kernels.h says why), compiled for x86-64-v3 and called only on CPUs that have
// it; other CPUs keep ordinary stores.
__attribute__((target("arch=x86-64-v3"))) void short_rows_f32_streams32(const void* x, void* y, Dtypes dtype,
                                                                         int64_t rows, int64_t cols,
                                                                         bool log_softmax) {
  short_rows<float, Streams32>(x, y, dtype, rows, cols, log_softmax, true);
}

__attribute__((target("arch=x86-64-v3"))) void finish_recompute_f32_streams32(const float* x, float* y, int64_t n,
                                                                               ChunkFinish f) {
  finish_recompute_streamed<float, Streams32>(x, y, n, f);
}

__attribute__((target("arch=x86-64-v3"))) void finish_stored_f32_streams32(const float* e, float* y, int64_t n,
                                                                            double factor) {
  finish_stored_streamed<float, Streams32>(e, y, n, factor);
}

__attribute__((target("arch=x86-64-v3"))) void finish_log_f32_streams32(const float* x, float* y, int64_t n,
                                                                         double max, double log_sum) {
  finish_log_streamed<float, Streams32>(x, y, n, max, log_sum);
}

bool cpu_has_x86_64_v3() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v3");
  }();
  return has;
}
#endif

// Whether n streamed elements of y (a chunk, or each of the rows) take the 32-byte stores.
bool streams32_for(const void* y, softmax_dtype t, int64_t n, bool stream) {
#if SOFTMAX_CPU_X86_LEVELS
  return stream && stream_rows_to<float, Streams32>(y, t, n) && cpu_has_x86_64_v3();
#else
  (void)y, (void)t, (void)n, (void)stream;
  return false;
#endif
}

SOFTMAX_CPU_CLONES
void short_rows_f32(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, bool log_softmax,
                    bool stream) {
#if SOFTMAX_CPU_X86_LEVELS
  if (streams32_for(y, dtype.y, cols, stream)) return short_rows_f32_streams32(x, y, dtype, rows, cols, log_softmax);
#endif
  short_rows<float>(x, y, dtype, rows, cols, log_softmax, stream);
}

SOFTMAX_CPU_CLONES
ChunkPartial chunk_partial_f32(const void* x, Dtypes dtype, int64_t n, void* exp_out) {
  return chunk_partial<float>(x, dtype, n, exp_out);
}

SOFTMAX_CPU_CLONES
void finish_recompute_f32(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, bool stream) {
#if SOFTMAX_CPU_X86_LEVELS
  if (streams32_for(y, dtype.y, n, stream))
    return finish_recompute_f32_streams32(as_arith<float>(x, dtype.x, size_t(n)), static_cast<float*>(y), n, f);
#endif
  finish_recompute<float>(x, y, dtype, n, f);
}

SOFTMAX_CPU_CLONES
void finish_stored_f32(const void* e, void* y, Dtypes dtype, int64_t n, double factor, bool stream) {
#if SOFTMAX_CPU_X86_LEVELS
  if (streams32_for(y, dtype.y, n, stream))
    return finish_stored_f32_streams32(static_cast<const float*>(e), static_cast<float*>(y), n, factor);
#endif
  finish_stored<float>(e, y, dtype, n, factor);
}

SOFTMAX_CPU_CLONES
void finish_log_f32(const void* x, void* y, Dtypes dtype, int64_t n, double max, double log_sum, bool stream) {
#if SOFTMAX_CPU_X86_LEVELS
  if (streams32_for(y, dtype.y, n, stream))
    return finish_log_f32_streams32(as_arith<float>(x, dtype.x, size_t(n)), static_cast<float*>(y), n, max, log_sum);
#endif
  finish_log<float>(x, y, dtype, n, max, log_sum);
}

SOFTMAX_CPU_CLONES
void finish_dropout_f32(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, const uint8_t* keep) {
  finish_dropout<float>(x, y, dtype, n, f, keep);
}

SOFTMAX_CPU_CLONES
void finish_dropout_stored_f32(const void* e, void* y, Dtypes dtype, int64_t n, double factor, const uint8_t* keep,
                           bool /*stream*/) {
  finish_dropout_stored<float>(e, y, dtype, n, factor, keep);
}

SOFTMAX_CPU_CLONES
void short_rows_dropout_f32(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, uint64_t first,
                          const DropoutRule& rule, uint8_t* mask, bool /*stream*/) {
  short_rows_dropout<float>(x, y, dtype, rows, cols, first, rule, mask, kKeepBytes);
}

void keep_bytes_p(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n, uint8_t* keep) {
  kKeepBytes(seed, offset, dropout_word_threshold(p), first, n, keep);
}

void keep_bytes_rule(const DropoutRule& rule, uint64_t first, int64_t n, uint8_t* keep) {
  kKeepBytes(rule.seed, rule.offset, rule.threshold, first, n, keep);
}


void fence() { stream_fence(); }

}  // namespace

const VectorKernels& portable_vector_kernels() {
  static const VectorKernels kernels{"portable (target_clones)",
                                     sizeof(float),
                                     short_rows_f32,
                                     chunk_partial_f32,
                                     finish_recompute_f32,
                                     finish_stored_f32,
                                     finish_log_f32,
                                     finish_dropout_f32,
                                     finish_dropout_stored_f32,
                                     short_rows_dropout_f32,
                                     keep_bytes_p,
                                     keep_bytes_rule,
                                     fence};
  return kernels;
}

}  // namespace cpu
}  // namespace softmax_internal
