/* SPDX-License-Identifier: Apache-2.0 */
/* C-side wrappers that pass raw integers for enum arguments (see c_caller.c). */
#ifndef SOFTMAX_FUZZ_C_CALLER_H
#define SOFTMAX_FUZZ_C_CALLER_H

#include <softmax/softmax.h>

#ifdef __cplusplus
extern "C" {
#endif

softmax_status fuzz_call_rows(const void* x, void* y, int64_t rows, int64_t cols, int32_t dtype,
                              const void* options);
softmax_status fuzz_call_dropout(const void* x, void* y, uint8_t* keep_mask, int64_t rows,
                                 int64_t cols, int32_t dtype, float p, uint64_t seed,
                                 uint64_t offset, const void* options);
softmax_status fuzz_call_rows_backward(const void* y, const void* dy, void* dx, int64_t rows,
                                       int64_t cols, int32_t dtype, const void* options);
softmax_status fuzz_call_dropout_backward(const void* x, const void* dy, void* dx, int64_t rows,
                                          int64_t cols, int32_t dtype, float p, uint64_t seed,
                                          uint64_t offset, const void* options);
softmax_status fuzz_call_row_stats(const void* x, float* row_max, float* row_sumexp, int64_t rows,
                                   int64_t cols, int32_t dtype, const void* options);
softmax_status fuzz_call_rows_from_stats(const void* x, void* y, const float* row_max,
                                         const float* row_sumexp, int64_t rows, int64_t cols,
                                         int32_t dtype, const void* options);
softmax_status fuzz_call_backward_row_stats(const void* y, const void* dy, float* row_dot,
                                            int64_t rows, int64_t cols, int32_t dtype,
                                            const void* options);
softmax_status fuzz_call_rows_backward_from_stats(const void* y, const void* dy, void* dx,
                                                  const float* row_dot, int64_t rows, int64_t cols,
                                                  int32_t dtype, const void* options);
const char* fuzz_status_string(int32_t status);
int fuzz_backend_available(int32_t backend);

#ifdef __cplusplus
}
#endif

#endif
