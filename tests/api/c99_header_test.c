/* A C99 caller: the header compiles as plain C, and a tiny softmax round-trips through the ABI. */
#include <math.h>
#include <stdio.h>
#include <softmax/softmax.h>

int main(void) {
  const float x[6] = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 4.0f};
  float y[6];
  softmax_options opts = SOFTMAX_OPTIONS_INIT;
  softmax_status s;
  double sum0 = 0.0, sum1 = 0.0;
  int i;
  opts.backend = SOFTMAX_BACKEND_CPU;
  s = softmax_rows(x, y, 2, 3, SOFTMAX_DTYPE_F32, &opts);
  if (s != SOFTMAX_STATUS_SUCCESS) {
    fprintf(stderr, "softmax_rows: %s: %s\n", softmax_status_string(s), softmax_last_error());
    return 1;
  }
  for (i = 0; i < 3; ++i) sum0 += y[i];
  for (i = 3; i < 6; ++i) sum1 += y[i];
  if (fabs(sum0 - 1.0) > 1e-6 || fabs(sum1 - 1.0) > 1e-6 || !(y[2] > y[1] && y[1] > y[0])) {
    fprintf(stderr, "wrong result: sums %.9f %.9f\n", sum0, sum1);
    return 1;
  }
  s = softmax_rows(x, y, -1, 3, SOFTMAX_DTYPE_F32, NULL);
  if (s != SOFTMAX_STATUS_INVALID_SIZE || softmax_last_error()[0] == '\0') {
    fprintf(stderr, "rows = -1 was not rejected with a message\n");
    return 1;
  }
  /* An empty matrix is a successful call that reads no pointer. */
  s = softmax_rows(NULL, NULL, 0, 3, SOFTMAX_DTYPE_F32, NULL);
  if (s != SOFTMAX_STATUS_SUCCESS || softmax_last_error()[0] != '\0') {
    fprintf(stderr, "rows = 0 with NULL pointers: %s: %s\n", softmax_status_string(s), softmax_last_error());
    return 1;
  }
  printf("C99 caller OK, libsoftmax %s\n", softmax_version());
  return 0;
}
