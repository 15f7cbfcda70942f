/* SPDX-License-Identifier: Apache-2.0 */
// softmax_dropout's Highway kernels (dropout_rows_highway.cpp), each dispatched to the best
// target the running CPU has: the dropout entries of highway_vector_kernels()' table, with the
// contracts VectorKernels states for finish_dropout, finish_dropout_stored and short_rows_dropout.
#pragma once

#include <cstdint>

#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {

void highway_finish_dropout(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, const uint8_t* keep);
void highway_finish_dropout_stored(const void* e, void* y, Dtypes dtype, int64_t n, double factor,
                                   const uint8_t* keep, bool stream);
void highway_short_rows_dropout(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, uint64_t first,
                                const DropoutRule& rule, uint8_t* mask, bool stream);

}  // namespace cpu
}  // namespace softmax_internal
