// The CPU backend's two operations, as the backend table calls them (backends/backend.h).
#pragma once

#include "backends/backend.h"

namespace softmax_internal {
namespace cpu {

Outcome softmax_rows(const RowsProblem& problem, const ExecContext& ctx);
Outcome softmax_dropout(const RowsProblem& problem, const DropoutParams& dropout, const ExecContext& ctx);

}  // namespace cpu
}  // namespace softmax_internal
