/* SPDX-License-Identifier: Apache-2.0 */
/* A C99 caller: the whole header compiles as plain C (pedantic, warnings as errors), and every
   function of the ABI is called once from C: the forward, the backward and its dropout twin,
   the sharded statistics on two column halves, f64 storage through y_dtype, an empty call and a
   refused one. Results are checked against double-precision formulas. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <softmax/softmax.h>

enum { ROWS = 2, COLS = 4, HALF = COLS / 2 };

static int failed(const char* what, softmax_status s) {
  fprintf(stderr, "%s: %s: %s\n", what, softmax_status_string(s), softmax_last_error());
  return 1;
}

static int close_to(double got, double want, double tol, const char* what, int i) {
  if (fabs(got - want) <= tol) return 1;
  fprintf(stderr, "%s[%d] = %.9g, expected %.9g\n", what, i, got, want);
  return 0;
}

int main(void) {
  const float x[ROWS * COLS] = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 4.0f, -2.0f, 0.0f};
  const float dy[ROWS * COLS] = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 0.0f, -0.5f, 3.0f};
  float y[ROWS * COLS], dx[ROWS * COLS], dx2[ROWS * COLS];
  float halves_x[2][ROWS * HALF], halves_y[2][ROWS * HALF], halves_dy[2][ROWS * HALF], halves_dx[2][ROWS * HALF];
  float row_max[2][ROWS], row_sumexp[2][ROWS], row_dot[2][ROWS], merged_max[ROWS], merged_sum[ROWS], dot[ROWS];
  double y64[ROWS * COLS];
  softmax_options opts = SOFTMAX_OPTIONS_INIT;
  softmax_status s;
  int r, c, h, ok = 1;
  opts.backend = SOFTMAX_BACKEND_CPU;

  /* Forward, against exp(x - max) / sum. */
  s = softmax_rows(x, y, ROWS, COLS, SOFTMAX_DTYPE_F32, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_rows", s);
  for (r = 0; r < ROWS; ++r) {
    double m = x[r * COLS], sum = 0.0;
    for (c = 1; c < COLS; ++c) m = x[r * COLS + c] > m ? x[r * COLS + c] : m;
    for (c = 0; c < COLS; ++c) sum += exp(x[r * COLS + c] - m);
    for (c = 0; c < COLS; ++c) ok &= close_to(y[r * COLS + c], exp(x[r * COLS + c] - m) / sum, 1e-6, "y", r * COLS + c);
  }

  /* Backward, against y * (dy - sum(dy * y)). */
  s = softmax_rows_backward(y, dy, dx, ROWS, COLS, SOFTMAX_DTYPE_F32, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_rows_backward", s);
  for (r = 0; r < ROWS; ++r) {
    double d = 0.0;
    for (c = 0; c < COLS; ++c) d += (double)dy[r * COLS + c] * y[r * COLS + c];
    for (c = 0; c < COLS; ++c) {
      const int i = r * COLS + c;
      ok &= close_to(dx[i], y[i] * (dy[i] - d), 1e-6, "dx", i);
    }
  }

  /* The dropout backward with p = 0 keeps everything: the same gradient, from x itself. */
  s = softmax_dropout_backward(x, dy, dx2, ROWS, COLS, SOFTMAX_DTYPE_F32, 0.0f, 1, 0, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_dropout_backward", s);
  for (c = 0; c < ROWS * COLS; ++c) ok &= close_to(dx2[c], dx[c], 1e-6, "dropout dx", c);

  /* Sharded by columns: each half is a dense [ROWS, HALF] matrix of its own. */
  for (h = 0; h < 2; ++h) {
    for (r = 0; r < ROWS; ++r) {
      for (c = 0; c < HALF; ++c) {
        halves_x[h][r * HALF + c] = x[r * COLS + h * HALF + c];
        halves_y[h][r * HALF + c] = y[r * COLS + h * HALF + c];
        halves_dy[h][r * HALF + c] = dy[r * COLS + h * HALF + c];
      }
    }
    s = softmax_row_stats(halves_x[h], row_max[h], row_sumexp[h], ROWS, HALF, SOFTMAX_DTYPE_F32, &opts);
    if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_row_stats", s);
    s = softmax_backward_row_stats(halves_y[h], halves_dy[h], row_dot[h], ROWS, HALF, SOFTMAX_DTYPE_F32, &opts);
    if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_backward_row_stats", s);
  }
  for (r = 0; r < ROWS; ++r) { /* the all-reduce */
    const float m = row_max[0][r] > row_max[1][r] ? row_max[0][r] : row_max[1][r];
    merged_max[r] = m;
    merged_sum[r] = (float)(row_sumexp[0][r] * exp(row_max[0][r] - m) + row_sumexp[1][r] * exp(row_max[1][r] - m));
    dot[r] = row_dot[0][r] + row_dot[1][r];
  }
  for (h = 0; h < 2; ++h) {
    s = softmax_rows_from_stats(halves_x[h], halves_y[h], merged_max, merged_sum, ROWS, HALF, SOFTMAX_DTYPE_F32, &opts);
    if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_rows_from_stats", s);
    s = softmax_rows_backward_from_stats(halves_y[h], halves_dy[h], halves_dx[h], dot, ROWS, HALF,
                                         SOFTMAX_DTYPE_F32, &opts);
    if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_rows_backward_from_stats", s);
    for (r = 0; r < ROWS; ++r) {
      for (c = 0; c < HALF; ++c) {
        ok &= close_to(halves_y[h][r * HALF + c], y[r * COLS + h * HALF + c], 1e-6, "sharded y", r * COLS + h * HALF + c);
        ok &= close_to(halves_dx[h][r * HALF + c], dx[r * COLS + h * HALF + c], 1e-6, "sharded dx",
                       r * COLS + h * HALF + c);
      }
    }
  }

  /* y stored as f64 from f32 x: SOFTMAX_FLAG_Y_DTYPE. */
  opts.flags = SOFTMAX_FLAG_Y_DTYPE;
  opts.y_dtype = SOFTMAX_DTYPE_F64;
  s = softmax_rows(x, y64, ROWS, COLS, SOFTMAX_DTYPE_F32, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) return failed("softmax_rows into f64", s);
  for (c = 0; c < ROWS * COLS; ++c) ok &= close_to(y64[c], y[c], 1e-6, "f64 y", c);
  opts.flags = 0;

  /* An empty matrix is a successful call that reads no pointer; a negative size is refused. */
  s = softmax_dropout(NULL, NULL, NULL, 0, COLS, SOFTMAX_DTYPE_F32, 0.5f, 1, 0, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS || softmax_last_error()[0] != '\0') return failed("empty softmax_dropout", s);
  s = softmax_rows(x, y, -1, COLS, SOFTMAX_DTYPE_F32, NULL);
  if (s != SOFTMAX_STATUS_INVALID_SIZE || softmax_last_error()[0] == '\0') {
    fprintf(stderr, "rows = -1 was not refused with a message\n");
    return 1;
  }
  if (SOFTMAX_OPTIONS_MAX_SIZE < sizeof(softmax_options) || softmax_default_options().struct_size != sizeof opts ||
      !softmax_backend_available(SOFTMAX_BACKEND_CPU) || strcmp(softmax_status_string(s), "SOFTMAX_STATUS_INVALID_SIZE") != 0) {
    fprintf(stderr, "options size limit, default options, CPU availability or status names are wrong\n");
    return 1;
  }
  if (!ok) return 1;
  printf("C99 caller OK, libsoftmax %s\n", softmax_version());
  return 0;
}
