/*
 * libsoftmax from C: the softmax of a small matrix, a fused softmax+dropout with its keep-mask,
 * and what a bad call reports. Exits non-zero if any result is wrong.
 *
 * Build against an installed libsoftmax, either way:
 *   cmake -S examples/c -B build-c -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build-c
 *   cc softmax_example.c $(pkg-config --cflags --libs softmax) -o softmax_example
 */
#include <softmax/softmax.h>

#include <stdint.h>
#include <stdio.h>

enum { ROWS = 3, COLS = 4 };

static int report(const char* what, softmax_status s) {
  fprintf(stderr, "%s failed: %s: %s\n", what, softmax_status_string(s), softmax_last_error());
  return 1;
}

static void print_matrix(const char* title, const float* m) {
  printf("%s\n", title);
  for (int r = 0; r < ROWS; ++r) {
    for (int c = 0; c < COLS; ++c) printf(" %10.6f", m[r * COLS + c]);
    printf("\n");
  }
}

int main(void) {
  /* Row 2 has a huge entry: softmax subtracts the row maximum, so nothing overflows. */
  const float x[ROWS * COLS] = {1, 2, 3, 4, -1, 0, 1, 2, 0, 0, 0, 1000};
  float y[ROWS * COLS];

  softmax_status s = softmax_rows(x, y, ROWS, COLS, SOFTMAX_DTYPE_F32, NULL);
  if (s != SOFTMAX_STATUS_SUCCESS) return report("softmax_rows", s);
  print_matrix("softmax(x):", y);
  for (int r = 0; r < ROWS; ++r) {
    float sum = 0;
    for (int c = 0; c < COLS; ++c) sum += y[r * COLS + c];
    if (sum < 0.99999f || sum > 1.00001f) {
      fprintf(stderr, "row %d sums to %.9g, not 1\n", r, sum);
      return 1;
    }
  }

  /* Options: start from SOFTMAX_OPTIONS_INIT (it sets struct_size), then change fields. */
  softmax_options opts = SOFTMAX_OPTIONS_INIT;
  opts.backend = SOFTMAX_BACKEND_CPU;
  uint8_t keep[ROWS * COLS];
  s = softmax_dropout(x, y, keep, ROWS, COLS, SOFTMAX_DTYPE_F32, 0.5f, /*seed=*/42, /*offset=*/0,
                      &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return report("softmax_dropout", s);
  print_matrix("dropout(softmax(x), p=0.5, seed=42):", y);
  for (int i = 0; i < ROWS * COLS; ++i) {
    if (keep[i] > 1 || (keep[i] == 0 && y[i] != 0.0f)) {
      fprintf(stderr, "element %d: keep=%d but y=%g\n", i, keep[i], y[i]);
      return 1;
    }
  }

  /* A bad call: nothing is written, and the status and message say why. */
  s = softmax_dropout(x, y, NULL, ROWS, COLS, SOFTMAX_DTYPE_F32, 1.5f, 42, 0, NULL);
  if (s != SOFTMAX_STATUS_INVALID_PROBABILITY) {
    fprintf(stderr, "p = 1.5 was not refused (%s)\n", softmax_status_string(s));
    return 1;
  }
  printf("p = 1.5 refused as expected: %s: %s\n", softmax_status_string(s), softmax_last_error());

  printf("libsoftmax %s: C example OK\n", softmax_version());
  return 0;
}
