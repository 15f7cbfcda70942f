/* SPDX-License-Identifier: Apache-2.0 */
// oneDNN's softmax backward as the CPU anchor of the backward rows (built only when Debian's
// libdnnl-dev is found, like onednn_variant.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace bench {

class OneDnnSoftmaxBackward {
 public:
  // The backward primitive for an fp32 [rows, cols] softmax over axis 1 on the CPU engine:
  // algorithm softmax_accurate (dx = y * (dy - sum(dy * y))), or softmax_log when `log`
  // (y is the log-softmax output, dx = dy - exp(y) * sum(dy)).
  OneDnnSoftmaxBackward(int64_t rows, int64_t cols, bool log);
  ~OneDnnSoftmaxBackward();
  void run(const float* y, const float* dy, float* dx);
  // The implementation oneDNN picked, e.g. "jit:avx2".
  std::string impl_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bench
