/* SPDX-License-Identifier: Apache-2.0 */
// The calling thread's last error message, behind softmax_last_error().
#pragma once

#include <string>

namespace softmax_internal {

void set_last_error(std::string message);
void clear_last_error();
const char* last_error_cstr();

}  // namespace softmax_internal
