/* SPDX-License-Identifier: Apache-2.0 */
/* The fuzzer's calls into libsoftmax, made from C as a real C caller would make them: in C an
   enum parameter is just an integer, so out-of-range dtype values are legal to pass here, while
   forming them in C++ would itself be undefined behaviour. */
#include <softmax/softmax.h>

#include "c_caller.h"

softmax_status fuzz_call_rows(const void* x, void* y, int64_t rows, int64_t cols, int32_t dtype,
                              const void* options) {
  return softmax_rows(x, y, rows, cols, (softmax_dtype)dtype, (const softmax_options*)options);
}

softmax_status fuzz_call_dropout(const void* x, void* y, uint8_t* keep_mask, int64_t rows,
                                 int64_t cols, int32_t dtype, float p, uint64_t seed,
                                 uint64_t offset, const void* options) {
  return softmax_dropout(x, y, keep_mask, rows, cols, (softmax_dtype)dtype, p, seed, offset,
                         (const softmax_options*)options);
}

softmax_status fuzz_call_rows_backward(const void* y, const void* dy, void* dx, int64_t rows,
                                       int64_t cols, int32_t dtype, const void* options) {
  return softmax_rows_backward(y, dy, dx, rows, cols, (softmax_dtype)dtype,
                               (const softmax_options*)options);
}

softmax_status fuzz_call_dropout_backward(const void* x, const void* dy, void* dx, int64_t rows,
                                          int64_t cols, int32_t dtype, float p, uint64_t seed,
                                          uint64_t offset, const void* options) {
  return softmax_dropout_backward(x, dy, dx, rows, cols, (softmax_dtype)dtype, p, seed, offset,
                                  (const softmax_options*)options);
}

softmax_status fuzz_call_row_stats(const void* x, float* row_max, float* row_sumexp, int64_t rows,
                                   int64_t cols, int32_t dtype, const void* options) {
  return softmax_row_stats(x, row_max, row_sumexp, rows, cols, (softmax_dtype)dtype,
                           (const softmax_options*)options);
}

softmax_status fuzz_call_rows_from_stats(const void* x, void* y, const float* row_max,
                                         const float* row_sumexp, int64_t rows, int64_t cols,
                                         int32_t dtype, const void* options) {
  return softmax_rows_from_stats(x, y, row_max, row_sumexp, rows, cols, (softmax_dtype)dtype,
                                 (const softmax_options*)options);
}

softmax_status fuzz_call_backward_row_stats(const void* y, const void* dy, float* row_dot,
                                            int64_t rows, int64_t cols, int32_t dtype,
                                            const void* options) {
  return softmax_backward_row_stats(y, dy, row_dot, rows, cols, (softmax_dtype)dtype,
                                    (const softmax_options*)options);
}

softmax_status fuzz_call_rows_backward_from_stats(const void* y, const void* dy, void* dx,
                                                  const float* row_dot, int64_t rows, int64_t cols,
                                                  int32_t dtype, const void* options) {
  return softmax_rows_backward_from_stats(y, dy, dx, row_dot, rows, cols, (softmax_dtype)dtype,
                                          (const softmax_options*)options);
}

const char* fuzz_status_string(int32_t status) { return softmax_status_string((softmax_status)status); }

int fuzz_backend_available(int32_t backend) { return softmax_backend_available((softmax_backend)backend); }
