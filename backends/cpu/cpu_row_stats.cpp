// SPDX-License-Identifier: Apache-2.0
// The sharded forward on the CPU (fp32 arithmetic: the front door refuses f64 here).
//   row_stats:        row_max[r] = max x[r, :], row_sumexp[r] = sum exp(x[r, :] - row_max[r]),
//                     from the forward's own chunk partials (chunk_partial, merged in double in
//                     chunk order by merge_chunk_partials), so a single shard's statistics are
//                     the normaliser softmax_rows itself uses. Special rows: any NaN gives
//                     (NaN, NaN); any +inf (no NaN) gives (+inf, NaN); all -inf gives (-inf, 0).
//   rows_from_stats:  y = exp(x - M) * (1 / S), or (x - M) - log S, element-wise from the merged
//                     statistics (M, S), with the subtraction first so that inputs of any
//                     magnitude stay exact. An all -inf row (M = -inf) gives NaN as softmax_rows
//                     does: -inf - -inf is NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/chunk_merge.h"
#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/cpu_drivers.h"
#include "backends/cpu/grad_arrays.h"
#include "backends/cpu/grad_schedule.h"
#include "backends/cpu/storage_convert.h"

namespace softmax_internal {
namespace cpu {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Outcome out_of_memory() { return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory"); }

bool row_has_nan(const InArray& x, size_t first, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c)
    if (std::isnan(convert::load_as<float>(x.base, x.type, first + size_t(c)))) return true;
  return false;
}

// The statistics of row r from its chunk partials.
void finish_row(const InArray& x, const ChunkGrid& g, int64_t r, const ChunkPartial* parts, float* row_max,
                float* row_sumexp) {
  const int64_t chunks = g.chunks();
  bool special = false, all_neg_inf = true;
  for (int64_t c = 0; c < chunks; ++c) {
    special |= parts[c].has_nan;
    all_neg_inf &= parts[c].max == -kInf;
  }
  if (special) {
    // A NaN or a +inf somewhere (the partials do not say which): look at the row itself.
    row_max[r] = row_has_nan(x, g.flat(r, 0), g.cols) ? kNaN : kInf;
    row_sumexp[r] = kNaN;
  } else if (all_neg_inf) {
    row_max[r] = -kInf;
    row_sumexp[r] = 0.0f;
  } else {
    const RowNormaliser norm = merge_chunk_partials(parts, chunks);
    row_max[r] = norm.max;
    row_sumexp[r] = static_cast<float>(norm.sum);
  }
}

}  // namespace

Outcome softmax_row_stats(const RowStatsProblem& p, const ExecContext& ctx) {
  const ChunkGrid g{p.rows, p.cols};
  const InArray x{p.x, p.dtype.x};
  const VectorKernels& k = vector_kernels();
  const int threads = threads_for(ctx, g.total());
  const int64_t chunks = g.chunks();
  if (whole_rows_per_thread(g, threads)) {
    const bool ok = for_rows(g, threads, [&](int64_t r) {
      ChunkPartial* parts = grad_scratch_of<ChunkPartial>(GradSlot::A, size_t(chunks));
      for (int64_t c = 0; c < chunks; ++c) parts[c] = k.chunk_partial(x.at(g.flat(r, c)), Dtypes{x.type, x.type}, g.len(c), nullptr);
      finish_row(x, g, r, parts, p.row_max, p.row_sumexp);
    });
    return ok ? Outcome::ok() : out_of_memory();
  }
  std::vector<ChunkPartial> parts(size_t(g.rows * chunks));
  const bool ok = for_chunk_items(g, threads, false, [&](int64_t r, int64_t c) {
    parts[size_t(r * chunks + c)] = k.chunk_partial(x.at(g.flat(r, c)), Dtypes{x.type, x.type}, g.len(c), nullptr);
  });
  if (!ok) return out_of_memory();
  for (int64_t r = 0; r < g.rows; ++r) finish_row(x, g, r, &parts[size_t(r * chunks)], p.row_max, p.row_sumexp);
  return Outcome::ok();
}

namespace {

struct FromStats {
  ChunkGrid grid;
  InArray x;
  OutArray y;
  const float* row_max;
  const float* row_sumexp;
  bool log;

  // n elements of row r, widened (xr), into their fp32 results (yr).
  void run(int64_t r, int64_t n, const float* xr, float* yr) const {
    const double s = double(row_sumexp[r]);
    if (log) {
      log_shifted_f32(xr, yr, n, row_max[r], static_cast<float>(std::log(s)));
    } else {
      exp_scaled_f32(xr, yr, n, row_max[r], static_cast<float>(1.0 / s));
    }
  }
};

}  // namespace

Outcome softmax_rows_from_stats(const RowsFromStatsProblem& p, const ExecContext& ctx) {
  const size_t total = size_t(p.rows) * size_t(p.cols);
  const OutArray out{p.y, p.dtype.y, stream_results(p.dtype.y, false, p.x == p.y, total)};
  const FromStats f{{p.rows, p.cols}, {p.x, p.dtype.x}, out, p.row_max, p.row_sumexp, p.log_softmax};
  const ChunkGrid& g = f.grid;
  const int threads = threads_for(ctx, g.total());
  bool ok;
  if (g.short_rows()) {
    ok = for_tiles(g, threads, [&](int64_t r0, int64_t nr) {
      const size_t first = g.flat(r0, 0);
      const int64_t n = nr * g.cols;
      const float* x = read_as<float>(f.x, first, n, GradSlot::A);
      float* y = result_space<float>(f.y, first, n);
      for (int64_t r = 0; r < nr; ++r)
        f.run(r0 + r, g.cols, x + r * g.cols, y + r * g.cols);
      write_back(y, f.y, first, n);
    });
  } else {
    ok = for_chunk_items(g, threads, false, [&](int64_t r, int64_t c) {
      const size_t first = g.flat(r, c);
      const int64_t n = g.len(c);
      const float* x = read_as<float>(f.x, first, n, GradSlot::A);
      float* y = result_space<float>(f.y, first, n);
      f.run(r, n, x, y);
      write_back(y, f.y, first, n);
    });
  }
  return ok ? Outcome::ok() : out_of_memory();
}

}  // namespace cpu
}  // namespace softmax_internal
