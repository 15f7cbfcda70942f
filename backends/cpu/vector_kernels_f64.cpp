// SPDX-License-Identifier: Apache-2.0
// The fp64 vector kernels, for calls where x or y is stored as f64: portable_kernels.h
// instantiated for double (fp64 arithmetic, whatever the other storage type), each entry compiled
// per x86 level with target_clones. One implementation serves builds with and without Highway.
#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/portable_kernels.h"
#include "backends/cpu/target_clones.h"
#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {
namespace {

// The fastest keep-byte code of the build (the bytes are the same from every implementation).
#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
constexpr KeepBytesFn kKeepBytes = dropout_keep_bytes_highway;
#else
constexpr KeepBytesFn kKeepBytes = dropout_keep_bytes_portable;
#endif

SOFTMAX_CPU_CLONES
void short_rows_f64(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, bool log_softmax,
                    bool stream) {
  short_rows<double>(x, y, dtype, rows, cols, log_softmax, stream);
}

SOFTMAX_CPU_CLONES
ChunkPartial chunk_partial_f64(const void* x, Dtypes dtype, int64_t n, void* exp_out) {
  return chunk_partial<double>(x, dtype, n, exp_out);
}

SOFTMAX_CPU_CLONES
void finish_recompute_f64(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, bool /*stream*/) {
  finish_recompute<double>(x, y, dtype, n, f);
}

SOFTMAX_CPU_CLONES
void finish_stored_f64(const void* e, void* y, Dtypes dtype, int64_t n, double factor, bool /*stream*/) {
  finish_stored<double>(e, y, dtype, n, factor);
}

SOFTMAX_CPU_CLONES
void finish_log_f64(const void* x, void* y, Dtypes dtype, int64_t n, double max, double log_sum,
                    bool /*stream*/) {
  finish_log<double>(x, y, dtype, n, max, log_sum);
}

SOFTMAX_CPU_CLONES
void finish_dropout_f64(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, const uint8_t* keep) {
  finish_dropout<double>(x, y, dtype, n, f, keep);
}

SOFTMAX_CPU_CLONES
void finish_dropout_stored_f64(const void* e, void* y, Dtypes dtype, int64_t n, double factor, const uint8_t* keep,
                           bool /*stream*/) {
  finish_dropout_stored<double>(e, y, dtype, n, factor, keep);
}

SOFTMAX_CPU_CLONES
void short_rows_dropout_f64(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, uint64_t first,
                          const DropoutRule& rule, uint8_t* mask, bool /*stream*/) {
  short_rows_dropout<double>(x, y, dtype, rows, cols, first, rule, mask, kKeepBytes);
}

void keep_bytes_p(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n, uint8_t* keep) {
  kKeepBytes(seed, offset, dropout_word_threshold(p), first, n, keep);
}

void keep_bytes_rule(const DropoutRule& rule, uint64_t first, int64_t n, uint8_t* keep) {
  kKeepBytes(rule.seed, rule.offset, rule.threshold, first, n, keep);
}


// Ordinary stores only (short_rows' default store policy): nothing to fence.
void no_fence() {}

}  // namespace

const VectorKernels& f64_vector_kernels() {
  static const VectorKernels kernels{"fp64 portable (target_clones)",
                                     sizeof(double),
                                     short_rows_f64,
                                     chunk_partial_f64,
                                     finish_recompute_f64,
                                     finish_stored_f64,
                                     finish_log_f64,
                                     finish_dropout_f64,
                                     finish_dropout_stored_f64,
                                     short_rows_dropout_f64,
                                     keep_bytes_p,
                                     keep_bytes_rule,
                                     no_fence};
  return kernels;
}

}  // namespace cpu
}  // namespace softmax_internal
