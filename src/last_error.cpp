// SPDX-License-Identifier: Apache-2.0
#include "last_error.h"

namespace softmax_internal {
namespace {
// One message per thread, so concurrent callers never see each other's errors.
thread_local std::string t_last_error;
}  // namespace

void set_last_error(std::string message) { t_last_error = std::move(message); }
void clear_last_error() { t_last_error.clear(); }
const char* last_error_cstr() { return t_last_error.c_str(); }

}  // namespace softmax_internal
