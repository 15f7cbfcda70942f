/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsoftmax from C: the softmax of a small matrix, a fused softmax+dropout with its keep-mask,
 * the gradient of the softmax, the same softmax computed from two column halves held apart (as
 * when a row is sharded over processes), and what a bad call reports. Exits non-zero if any
 * result is wrong.
 *
 * Build against an installed libsoftmax, either way:
 *   cmake -S examples/c -B build-c -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build-c
 *   cc softmax_example.c $(pkg-config --cflags --libs softmax) -o softmax_example
 */
#include <softmax/softmax.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>

enum { ROWS = 3, COLS = 4, HALF = COLS / 2 };

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

  /* The gradient: given dL/dy, dL/dx = y * (dy - sum(dy * y)) per row, from the forward's y. */
  s = softmax_rows(x, y, ROWS, COLS, SOFTMAX_DTYPE_F32, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return report("softmax_rows", s);
  const float dy[ROWS * COLS] = {1, 0, 0, 0, 0.5f, -0.5f, 0.25f, 2, 1, 1, 1, 1};
  float dx[ROWS * COLS];
  s = softmax_rows_backward(y, dy, dx, ROWS, COLS, SOFTMAX_DTYPE_F32, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return report("softmax_rows_backward", s);
  print_matrix("backward: dx for dy:", dx);
  for (int r = 0; r < ROWS; ++r) {
    double dot = 0;
    for (int c = 0; c < COLS; ++c) dot += (double)dy[r * COLS + c] * y[r * COLS + c];
    for (int c = 0; c < COLS; ++c) {
      const int i = r * COLS + c;
      const double want = y[i] * (dy[i] - dot);
      if (fabs(dx[i] - want) > 1e-6) {
        fprintf(stderr, "dx[%d] = %.9g, expected %.9g\n", i, dx[i], want);
        return 1;
      }
    }
  }

  /* Sharded rows: the left and right halves of every row live in separate [ROWS, HALF] arrays
   * (on two GPUs, say). Each shard computes its per-row max and sum of exponentials; the
   * statistics are merged (an all-reduce across processes in real use); each shard then
   * normalises its own columns. The result equals softmax_rows of the whole rows. */
  float shard_x[2][ROWS * HALF], shard_y[2][ROWS * HALF];
  float shard_max[2][ROWS], shard_sumexp[2][ROWS], row_max[ROWS], row_sumexp[ROWS];
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < ROWS; ++r) {
      for (int c = 0; c < HALF; ++c) shard_x[h][r * HALF + c] = x[r * COLS + h * HALF + c];
    }
    s = softmax_row_stats(shard_x[h], shard_max[h], shard_sumexp[h], ROWS, HALF, SOFTMAX_DTYPE_F32, &opts);
    if (s != SOFTMAX_STATUS_SUCCESS) return report("softmax_row_stats", s);
  }
  for (int r = 0; r < ROWS; ++r) {  /* the merge: global max, sums rescaled to it */
    row_max[r] = shard_max[0][r] > shard_max[1][r] ? shard_max[0][r] : shard_max[1][r];
    row_sumexp[r] = 0;
    for (int h = 0; h < 2; ++h) {
      if (shard_sumexp[h][r] != 0) row_sumexp[r] += shard_sumexp[h][r] * expf(shard_max[h][r] - row_max[r]);
    }
  }
  for (int h = 0; h < 2; ++h) {
    s = softmax_rows_from_stats(shard_x[h], shard_y[h], row_max, row_sumexp, ROWS, HALF, SOFTMAX_DTYPE_F32, &opts);
    if (s != SOFTMAX_STATUS_SUCCESS) return report("softmax_rows_from_stats", s);
    for (int r = 0; r < ROWS; ++r) {
      for (int c = 0; c < HALF; ++c) {
        const float got = shard_y[h][r * HALF + c], want = y[r * COLS + h * HALF + c];
        if (fabsf(got - want) > 1e-6f) {
          fprintf(stderr, "shard %d element (%d, %d) = %.9g, softmax_rows gives %.9g\n", h, r, c, got, want);
          return 1;
        }
      }
    }
  }
  printf("sharded over two column halves: equals softmax_rows\n");

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
