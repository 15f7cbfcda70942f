// SPDX-License-Identifier: Apache-2.0
// Many threads calling the CPU backend at once: 16 threads, many calls each, mixed shapes, dtypes
// and all eight functions (softmax, log-softmax, dropout with and without a mask, both
// backwards, the four sharded-row statistics functions), in place or not, interleaved with
// failing calls. Every successful result must be bit-identical to the same call made alone
// beforehand (which was itself checked against the float64 reference), and each thread's
// softmax_last_error() must describe that thread's own last call, whatever the others do.
// sanitizers.sh runs this under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "op_call.h"
#include "reference.h"

namespace {

using softmax_reliability::Op;
using softmax_reliability::OpCall;

#if defined(__SANITIZE_THREAD__)
#define RELIABILITY_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RELIABILITY_UNDER_TSAN 1
#endif
#endif

#ifdef RELIABILITY_UNDER_TSAN
// libgomp is not instrumented: TSan cannot see its barriers and reports races between the
// threads of one parallel region. One OpenMP thread per call keeps the check about libsoftmax
// and its callers' threads (sanitizers.sh also sets OMP_NUM_THREADS=1).
constexpr int kThreadChoices[] = {1};
constexpr int kCallsPerThread = 40;
#else
constexpr int kThreadChoices[] = {0, 1, 2, 3};
constexpr int kCallsPerThread = 120;
#endif
constexpr int kCallerThreads = 16;

constexpr Op kOps[] = {Op::Rows,     Op::Dropout,       Op::RowsBackward,     Op::DropoutBackward,
                       Op::RowStats, Op::RowsFromStats, Op::BackwardRowStats, Op::RowsBackwardFromStats};

struct Job {
  OpCall call;
  std::vector<std::vector<unsigned char>> want;  // the arrays after a call made before any thread started
};

// The jobs, each computed once alone and checked against the reference. Every function appears
// with each of the shapes' families (the list cycles through both).
std::vector<Job> make_jobs(uint64_t seed) {
  const int64_t shapes[][2] = {{1, 1},   {3, 7},     {64, 33},  {17, 128}, {8, 1000},
                               {2, 4099}, {1, 40000}, {2, 70001}, {300, 64}, {5, 257}};
  const softmax_dtype dtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F64};
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < 32; ++i) {
    const auto& s = shapes[i % 10];
    const Op op = kOps[i % 8];
    const auto& rule = softmax_reliability::op_rule(op);
    const bool log = rule.log_allowed && rng() % 2 == 0;
    const int choices = rule.f64_allowed ? 4 : 3;
    const softmax_dtype dtype = dtypes[rng() % choices];
    // Every fourth job stores y in another type (mixed precision).
    const softmax_dtype y_dtype = i % 4 == 3 ? dtypes[rng() % choices] : dtype;
    Job j{softmax_reliability::make_op_call(op, log, dtype, y_dtype, s[0], s[1], rng()), {}};
    j.call.mask = rng() % 2 == 0;
    EXPECT_EQ(j.call.run(&j.want, 1, false), SOFTMAX_STATUS_SUCCESS) << j.call.describe() << ": " << softmax_last_error();
    // Loose: tests/cpu owns accuracy; this only proves the stored answers are answers.
    const std::string wrong = j.call.check(j.want);
    EXPECT_EQ(wrong, "") << "job " << i << ": " << j.call.describe();
    jobs.push_back(std::move(j));
  }
  return jobs;
}

TEST(Concurrency, SixteenThreadsMixedCallsGiveTheSameBitsAndTheirOwnErrors) {
  const uint64_t seed = softmax_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<Job> jobs = make_jobs(seed);
  ASSERT_FALSE(HasFailure());

  std::atomic<int> ready{0};
  std::vector<std::string> failures(kCallerThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallerThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + 1000003u * uint64_t(t + 1));
      std::string& failure = failures[t];
      // Start together so the calls really overlap.
      ready.fetch_add(1);
      while (ready.load() < kCallerThreads) std::this_thread::yield();
      std::vector<std::vector<unsigned char>> out;
      for (int call = 0; call < kCallsPerThread && failure.empty(); ++call) {
        const std::string where = "thread " + std::to_string(t) + " call " + std::to_string(call);
        if (rng() % 4 == 0) {
          // A failing call whose message names a number unique to this thread and call.
          const int64_t bad_cols = -(int64_t(t) * 100000 + call + 1);
          float x = 0, y = 0;
          const softmax_status s = rng() % 2 == 0
                                       ? softmax_rows(&x, &y, 1, bad_cols, SOFTMAX_DTYPE_F32, nullptr)
                                       : softmax_row_stats(&x, &y, &y, 1, bad_cols, SOFTMAX_DTYPE_F32, nullptr);
          const std::string msg = softmax_last_error();
          if (s != SOFTMAX_STATUS_INVALID_SIZE || msg.find(std::to_string(bad_cols)) == std::string::npos) {
            failure = where + ": expected INVALID_SIZE naming " + std::to_string(bad_cols) + ", got " +
                      softmax_status_string(s) + " \"" + msg + "\"";
          }
          continue;
        }
        const Job& j = jobs[rng() % jobs.size()];
        const int nt = kThreadChoices[rng() % (sizeof kThreadChoices / sizeof kThreadChoices[0])];
        // In place only where the element sizes of the aliased pair agree.
        const int alias = j.call.in_place_output();
        const bool in_place =
            alias >= 0 && rng() % 3 == 0 &&
            j.call.arrays[alias].size() == j.call.arrays[j.call.rule().array[alias].in_place_with].size();
        const softmax_status s = j.call.run(&out, nt, in_place);
        const std::string msg = softmax_last_error();
        if (s != SOFTMAX_STATUS_SUCCESS) {
          failure = where + ": " + softmax_status_string(s) + " \"" + msg + "\"";
          continue;
        }
        if (!msg.empty()) {
          failure = where + ": succeeded but softmax_last_error() is \"" + msg + "\"";
          continue;
        }
        for (int i = 0; i < j.call.rule().arrays && failure.empty(); ++i) {
          if (!j.call.is_output(i) || (j.call.op == Op::Dropout && i == 2 && !j.call.mask)) continue;
          if (out[i] != j.want[i]) {
            failure = where + ": " + j.call.rule().array[i].name + " differs from the same call made alone (" +
                      j.call.describe() + ", num_threads " + std::to_string(nt) + (in_place ? ", in place)" : ")");
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kCallerThreads; ++t) EXPECT_TRUE(failures[t].empty()) << failures[t];
}

// A thread's message survives other threads' successes and failures until its own next call.
TEST(Concurrency, LastErrorIsPerThread) {
  float x = 1, y = 0;
  ASSERT_EQ(softmax_rows(&x, &y, -7, 1, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
  const std::string mine = softmax_last_error();
  ASSERT_NE(mine.find("-7"), std::string::npos) << mine;
  std::thread other([] {
    float a = 1, b = 0;
    EXPECT_STREQ(softmax_last_error(), "");  // a new thread starts with no error
    EXPECT_EQ(softmax_rows(&a, &b, 1, -99, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
    EXPECT_NE(std::string(softmax_last_error()).find("-99"), std::string::npos);
    EXPECT_EQ(softmax_rows(&a, &b, 1, 1, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_SUCCESS);
    EXPECT_STREQ(softmax_last_error(), "");
    EXPECT_EQ(softmax_rows_backward(nullptr, nullptr, nullptr, 0, 5, SOFTMAX_DTYPE_F32, nullptr),
              SOFTMAX_STATUS_SUCCESS);
    EXPECT_STREQ(softmax_last_error(), "");
  });
  other.join();
  EXPECT_EQ(mine, softmax_last_error());
}

}  // namespace
