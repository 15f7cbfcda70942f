/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Softmax over rows whose columns are split across MPI ranks. Every rank holds its own columns
 * of a [ROWS, COLS] matrix; softmax_rows_mpi normalises whole rows, so the slices of each row add
 * up to 1 across the ranks. Each rank checks its columns against softmax_rows on the full matrix
 * (which every rank can rebuild here), then does the same for the gradient.
 *
 *   mpiexec -n 2 ./softmax_mpi_example        (any number of ranks; more than COLS leaves some empty)
 */
#include <softmax/softmax_mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS 3
#define COLS 10

/* The full matrix, which any rank can compute: x for the forward, dy for the backward. */
static float full_x(int r, int c) { return 4.0f * (float)sin(0.7 * c + r) * (float)(r + 1); }
static float full_dy(int r, int c) { return (float)cos(1.3 * c - r); }

static void check(softmax_status s, const char* what, int rank) {
  if (s != SOFTMAX_STATUS_SUCCESS) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, softmax_status_string(s), softmax_mpi_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int main(int argc, char** argv) {
  int rank, ranks, c, r;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  /* This rank's columns [first, first + width): an even split, possibly empty. */
  const int first = COLS * rank / ranks;
  const int width = COLS * (rank + 1) / ranks - first;
  float x[ROWS * COLS], y[ROWS * COLS], dy[ROWS * COLS], dx[ROWS * COLS];
  for (r = 0; r < ROWS; ++r)
    for (c = 0; c < width; ++c) {
      x[r * width + c] = full_x(r, first + c);
      dy[r * width + c] = full_dy(r, first + c);
    }

  /* Sharded forward and backward: collective, every rank calls with the same rows and options. */
  check(softmax_rows_mpi(x, y, ROWS, width, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, NULL), "softmax_rows_mpi", rank);
  check(softmax_rows_backward_mpi(y, dy, dx, ROWS, width, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, NULL),
        "softmax_rows_backward_mpi", rank);

  /* The same on the full matrix, on this rank alone. */
  float fx[ROWS * COLS], fy[ROWS * COLS], fdy[ROWS * COLS], fdx[ROWS * COLS];
  for (r = 0; r < ROWS; ++r)
    for (c = 0; c < COLS; ++c) {
      fx[r * COLS + c] = full_x(r, c);
      fdy[r * COLS + c] = full_dy(r, c);
    }
  check(softmax_rows(fx, fy, ROWS, COLS, SOFTMAX_DTYPE_F32, NULL), "softmax_rows", rank);
  check(softmax_rows_backward(fy, fdy, fdx, ROWS, COLS, SOFTMAX_DTYPE_F32, NULL), "softmax_rows_backward", rank);

  double worst_y = 0.0, worst_dx = 0.0, row_sums[ROWS] = {0}, total[ROWS];
  for (r = 0; r < ROWS; ++r)
    for (c = 0; c < width; ++c) {
      worst_y = fmax(worst_y, fabs(y[r * width + c] - fy[r * COLS + first + c]));
      worst_dx = fmax(worst_dx, fabs(dx[r * width + c] - fdx[r * COLS + first + c]));
      row_sums[r] += y[r * width + c];
    }
  MPI_Allreduce(row_sums, total, ROWS, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: columns [%d, %d), largest difference from the unsharded call: y %.2g, dx %.2g\n", rank, first,
         first + width, worst_y, worst_dx);

  int ok = worst_y <= 1e-6 && worst_dx <= 1e-6, all_ok = 0;
  for (r = 0; r < ROWS; ++r) ok = ok && fabs(total[r] - 1.0) <= 1e-5;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("row sums over all ranks: %.6f %.6f %.6f\n", total[0], total[1], total[2]);
    printf(all_ok ? "MPI example OK\n" : "MPI example FAILED\n");
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
