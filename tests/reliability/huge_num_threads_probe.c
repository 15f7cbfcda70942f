/* options.num_threads is documented as "threads to use, 0 = OpenMP's default" and only negative
   values are invalid, so a caller may ask for 100000 or INT32_MAX threads. The library must then
   either run (clamping to what the machine can do) or fail with a status; it must never hand the
   count to the OpenMP runtime unchecked, which aborts the process ("libgomp: Out of memory
   allocating ...") or crashes while creating threads. Found by the fuzzer (LLVM libomp tried to
   allocate 10 GB for a num_threads of about 2^30).

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

static int check(int32_t threads, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  float* x = malloc(sizeof(float) * (size_t)n);
  float* y = malloc(sizeof(float) * (size_t)n);
  if (!x || !y) return 1;
  for (int64_t i = 0; i < n; ++i) x[i] = (float)((i * 7919) % 101) / 10.0f;
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CPU;
  o.num_threads = threads;
  const softmax_status s = softmax_rows(x, y, rows, cols, SOFTMAX_DTYPE_F32, &o);
  int bad = 0;
  if (s == SOFTMAX_STATUS_SUCCESS) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += y[r * cols + c];
      if (!(fabs(sum - 1.0) < 1e-3)) bad = 1;
    }
    printf("num_threads=%d, %lldx%lld: SUCCESS%s\n", (int)threads, (long long)rows, (long long)cols,
           bad ? " but rows do not sum to 1" : "");
  } else {
    if (softmax_last_error()[0] == '\0') bad = 1;
    printf("num_threads=%d, %lldx%lld: %s (\"%s\")\n", (int)threads, (long long)rows,
           (long long)cols, softmax_status_string(s), softmax_last_error());
  }
  free(x);
  free(y);
  return bad;
}

int main(void) {
#ifndef UNDER_SANITIZER
  const struct rlimit cap = {(rlim_t)4 << 30, (rlim_t)4 << 30};
  setrlimit(RLIMIT_AS, &cap);
#endif
  int bad = 0;
  /* One long row (split over threads) and many rows (rows over threads). */
  bad |= check(INT32_MAX, 1, 1 << 17);
  bad |= check(INT32_MAX, 256, 512);
#ifndef UNDER_SANITIZER
  bad |= check(100000, 1, 1 << 17);
  bad |= check(100000, 256, 512);
#endif
  if (bad) printf("FAIL\n");
  return bad;
}
