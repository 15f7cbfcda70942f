/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the layout of the public ABI types as the C compiler sees them, one "name=value" per
 * field, for the bindings' layout tests (Rust: softmax-sys/tests/abi.rs, Python:
 * python/tests/test_abi.py). ctest passes this output to them in SOFTMAX_C_LAYOUT. */
#include <softmax/softmax.h>

#include <stddef.h>
#include <stdio.h>

int main(void) {
  printf("sizeof=%zu alignof=%zu struct_size=%zu backend=%zu flags=%zu stream=%zu "
         "num_threads=%zu y_dtype=%zu sizeof_enum=%zu options_max_size=%u\n",
         sizeof(softmax_options), _Alignof(softmax_options),
         offsetof(softmax_options, struct_size), offsetof(softmax_options, backend),
         offsetof(softmax_options, flags), offsetof(softmax_options, stream),
         offsetof(softmax_options, num_threads), offsetof(softmax_options, y_dtype),
         sizeof(softmax_status), (unsigned)SOFTMAX_OPTIONS_MAX_SIZE);
  return 0;
}
