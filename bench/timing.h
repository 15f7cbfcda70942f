/* SPDX-License-Identifier: Apache-2.0 */
// Timing helpers shared by the CPU and GPU sections: the median of the timed runs is what is
// reported (robust against the odd preempted run on a shared 2-core machine).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs f() `warmup` times untimed, then `reps` times, each timed with the steady clock; returns
// the per-run times in milliseconds.
template <class F>
std::vector<double> time_host_ms(F&& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  ms.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return ms;
}

}  // namespace bench
