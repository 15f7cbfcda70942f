// SPDX-License-Identifier: Apache-2.0
// libsoftmax from C++: the C ABI behind a small exception-throwing helper, log-softmax over a
// std::vector in place, a fused softmax+dropout whose mask is checked, the softmax's gradient
// (computed in place over dy), and the softmax of rows sharded into two column halves (row
// statistics per shard, merged, then each shard normalised), checked against softmax_rows.
// Exits non-zero if any result is wrong.
//
// Build against an installed libsoftmax:
//   cmake -S examples/cpp -B build-cpp -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build-cpp
//   c++ -std=c++17 softmax_example.cpp $(pkg-config --cflags --libs softmax)
#include <softmax/softmax.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The one place where a status becomes a C++ error, with the library's own words.
struct softmax_error : std::runtime_error {
  softmax_status status;
  softmax_error(softmax_status s, const char* what)
      : std::runtime_error(std::string(softmax_status_string(s)) + ": " + what), status(s) {}
};

void check(softmax_status s) {
  if (s != SOFTMAX_STATUS_SUCCESS) throw softmax_error(s, softmax_last_error());
}

}  // namespace

int main() {
  const int64_t rows = 64, cols = 1000;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-5.0f, 5.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = dist(gen);

  try {
    // Log-softmax in place (x == y is allowed), two CPU threads.
    std::vector<float> logp = x;
    softmax_options opts = softmax_default_options();
    opts.flags = SOFTMAX_FLAG_LOG;
    opts.num_threads = 2;
    check(softmax_rows(logp.data(), logp.data(), rows, cols, SOFTMAX_DTYPE_F32, &opts));
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(logp[r * cols + c]));
      if (std::fabs(sum - 1.0) > 1e-4) {
        std::fprintf(stderr, "row %lld: exp(log_softmax) sums to %.9g\n", (long long)r, sum);
        return 1;
      }
    }
    std::printf("log_softmax of %lld x %lld: every row's exp sums to 1\n", (long long)rows,
                (long long)cols);

    // Fused dropout: the same (seed, offset) always gives the same mask.
    std::vector<float> y(x.size()), y2(x.size());
    std::vector<uint8_t> keep(x.size()), keep2(x.size());
    check(softmax_dropout(x.data(), y.data(), keep.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.1f,
                          1234, 0, nullptr));
    check(softmax_dropout(x.data(), y2.data(), keep2.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.1f,
                          1234, 0, nullptr));
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      kept += keep[i];
      if (keep[i] != keep2[i] || (keep[i] == 0 && y[i] != 0.0f)) {
        std::fprintf(stderr, "element %zu: mask not reproducible or dropped value non-zero\n", i);
        return 1;
      }
    }
    std::printf("dropout p=0.1: kept %zu of %zu (%.1f%%), mask reproducible\n", kept, x.size(),
                100.0 * double(kept) / double(x.size()));

    // The gradient of softmax_rows: dL/dx = y * (dy - sum(dy * y)) per row. In place over dy
    // (dx == dy is allowed), as a training loop that no longer needs dy would do it.
    std::vector<float> probs(x.size());
    check(softmax_rows(x.data(), probs.data(), rows, cols, SOFTMAX_DTYPE_F32, nullptr));
    std::vector<float> grad(x.size());
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = dist(gen);
    const std::vector<float> dy = grad;
    check(softmax_rows_backward(probs.data(), grad.data(), grad.data(), rows, cols, SOFTMAX_DTYPE_F32, nullptr));
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += double(dy[r * cols + c]) * probs[r * cols + c];
      for (int64_t c = 0; c < cols; ++c) {
        const std::size_t i = std::size_t(r * cols + c);
        worst = std::max(worst, std::fabs(grad[i] - probs[i] * (dy[i] - dot)));
      }
    }
    if (worst > 1e-6) {
      std::fprintf(stderr, "backward: largest error %.3g\n", worst);
      return 1;
    }
    std::printf("backward in place over dy: largest error %.3g\n", worst);

    // Rows sharded by columns: two shards of `half` columns each, dense arrays of their own.
    const int64_t half = cols / 2;
    std::vector<float> shard[2], shard_y[2], shard_max[2], shard_sumexp[2];
    for (int h = 0; h < 2; ++h) {
      shard[h].resize(std::size_t(rows * half));
      shard_y[h].resize(shard[h].size());
      shard_max[h].resize(std::size_t(rows));
      shard_sumexp[h].resize(std::size_t(rows));
      for (int64_t r = 0; r < rows; ++r) {
        std::copy_n(x.begin() + r * cols + h * half, half, shard[h].begin() + r * half);
      }
      check(softmax_row_stats(shard[h].data(), shard_max[h].data(), shard_sumexp[h].data(), rows, half,
                              SOFTMAX_DTYPE_F32, nullptr));
    }
    // The merge (an all-reduce across processes in real use): global max, sums rescaled to it.
    const auto n_rows = static_cast<std::size_t>(rows);
    std::vector<float> row_max(n_rows), row_sumexp(n_rows, 0.0f);
    for (std::size_t r = 0; r < row_max.size(); ++r) {
      row_max[r] = std::max(shard_max[0][r], shard_max[1][r]);
      for (int h = 0; h < 2; ++h) {
        if (shard_sumexp[h][r] != 0) row_sumexp[r] += shard_sumexp[h][r] * std::exp(shard_max[h][r] - row_max[r]);
      }
    }
    worst = 0;
    for (int h = 0; h < 2; ++h) {
      check(softmax_rows_from_stats(shard[h].data(), shard_y[h].data(), row_max.data(), row_sumexp.data(), rows,
                                    half, SOFTMAX_DTYPE_F32, nullptr));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < half; ++c) {
          const double got = shard_y[h][r * half + c], want = probs[r * cols + h * half + c];
          worst = std::max(worst, std::fabs(got - want) / want);
        }
      }
    }
    if (worst > 1e-5) {
      std::fprintf(stderr, "sharded softmax differs from softmax_rows: largest relative error %.3g\n", worst);
      return 1;
    }
    std::printf("sharded over two column halves: equals softmax_rows (largest relative error %.3g)\n", worst);

    // A bad call throws with the library's message.
    try {
      check(softmax_rows(x.data(), y.data(), rows, -3, SOFTMAX_DTYPE_F32, nullptr));
      std::fprintf(stderr, "cols = -3 was not refused\n");
      return 1;
    } catch (const softmax_error& e) {
      std::printf("cols = -3 refused as expected: %s\n", e.what());
    }
  } catch (const softmax_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("libsoftmax %s: C++ example OK\n", softmax_version());
  return 0;
}
