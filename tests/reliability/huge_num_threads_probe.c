/* SPDX-License-Identifier: Apache-2.0 */
/* options.num_threads is documented as "threads to use, 0 = OpenMP's default" and only negative
   values are invalid, so a caller may ask for 100000 or INT32_MAX threads. The library must then
   either run (clamping to what the machine can do) or fail with a status; it must never hand the
   count to the OpenMP runtime unchecked, which aborts the process ("libgomp: Out of memory
   allocating ...") or crashes while creating threads. Found by the fuzzer (LLVM libomp tried to
   allocate 10 GB for a num_threads of about 2^30; libgomp aborted for INT32_MAX and crashed for
   100000). backends/cpu now clamps the count (threads_for in chunked_rows.h); this keeps it so.

   Run as its own ctest test because the failure is the death of the process. Outside sanitizer
   builds the address space is capped, so that a library which really tries to start 100000
   threads fails quickly instead of swamping the machine. */
#include <softmax/softmax.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

/* op 0: softmax_rows; op 1: softmax_dropout with p (dropout rows sum to 1 only at p = 0). */
static int check(int op, float p, int32_t threads, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  float* x = malloc(sizeof(float) * (size_t)n);
  float* y = malloc(sizeof(float) * (size_t)n);
  uint8_t* mask = malloc((size_t)n);
  if (!x || !y || !mask) return 1;
  for (int64_t i = 0; i < n; ++i) x[i] = (float)((i * 7919) % 101) / 10.0f;
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CPU;
  o.num_threads = threads;
  const softmax_status s = op == 0 ? softmax_rows(x, y, rows, cols, SOFTMAX_DTYPE_F32, &o)
                                   : softmax_dropout(x, y, mask, rows, cols, SOFTMAX_DTYPE_F32, p, 9,
                                                     0, &o);
  int bad = 0;
  if (s == SOFTMAX_STATUS_SUCCESS) {
    for (int64_t r = 0; r < rows && (op == 0 || p == 0.0f); ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += y[r * cols + c];
      if (!(fabs(sum - 1.0) < 1e-3)) bad = 1;
    }
    for (int64_t i = 0; i < n && op == 1 && p == 1.0f; ++i) bad |= y[i] != 0.0f || mask[i] != 0;
  } else if (softmax_last_error()[0] == '\0') {
    bad = 1;
  }
  printf("%s p=%g num_threads=%d, %lldx%lld: %s%s%s\n", op == 0 ? "rows" : "dropout", (double)p,
         (int)threads, (long long)rows, (long long)cols, softmax_status_string(s),
         s == SOFTMAX_STATUS_SUCCESS ? "" : " ", softmax_last_error());
  if (bad) printf("  ^ wrong result or missing message\n");
  free(x);
  free(y);
  free(mask);
  return bad;
}

int main(void) {
#ifndef UNDER_SANITIZER
  const struct rlimit cap = {(rlim_t)4 << 30, (rlim_t)4 << 30};
  setrlimit(RLIMIT_AS, &cap);
#endif
  int bad = 0;
  /* One long row (split over threads) and many rows (rows over threads); dropout's p = 0 and
     p = 1 take their own fill paths. */
  const int32_t counts[] = {INT32_MAX, 100000};
#ifdef UNDER_SANITIZER
  const int n_counts = 1; /* no address-space cap here: only the count that fails fast */
#else
  const int n_counts = 2;
#endif
  for (int k = 0; k < n_counts; ++k) {
    bad |= check(0, 0.0f, counts[k], 1, 1 << 17);
    bad |= check(0, 0.0f, counts[k], 256, 512);
    bad |= check(1, 0.3f, counts[k], 1, 1 << 17);
    bad |= check(1, 0.0f, counts[k], 256, 512);
    bad |= check(1, 1.0f, counts[k], 256, 512);
  }
  if (bad) printf("FAIL\n");
  return bad;
}
