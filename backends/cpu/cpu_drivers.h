/* SPDX-License-Identifier: Apache-2.0 */
// The CPU backend's operations, as the backend table calls them (backends/backend.h).
#pragma once

#include "backends/backend.h"

namespace softmax_internal {
namespace cpu {

Outcome softmax_rows(const RowsProblem& problem, const ExecContext& ctx);
Outcome softmax_dropout(const RowsProblem& problem, const DropoutParams& dropout, const ExecContext& ctx);

// cpu_softmax_backward.cpp
Outcome softmax_rows_backward(const RowsBackwardProblem& problem, const ExecContext& ctx);
Outcome softmax_backward_row_stats(const BackwardRowStatsProblem& problem, const ExecContext& ctx);
Outcome softmax_rows_backward_from_stats(const RowsBackwardFromStatsProblem& problem, const ExecContext& ctx);

// cpu_dropout_backward.cpp
Outcome softmax_dropout_backward(const DropoutBackwardProblem& problem, const DropoutParams& dropout,
                                 const ExecContext& ctx);

// cpu_row_stats.cpp
Outcome softmax_row_stats(const RowStatsProblem& problem, const ExecContext& ctx);
Outcome softmax_rows_from_stats(const RowsFromStatsProblem& problem, const ExecContext& ctx);

}  // namespace cpu
}  // namespace softmax_internal
