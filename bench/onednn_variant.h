/* SPDX-License-Identifier: Apache-2.0 */
// oneDNN's softmax as the CPU anchor (built only when Debian's libdnnl-dev is found).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace bench {

class OneDnnSoftmax {
 public:
  // Creates the primitive for an fp32 [rows, cols] softmax over axis 1 on the CPU engine.
  OneDnnSoftmax(int64_t rows, int64_t cols);
  ~OneDnnSoftmax();
  void run(const float* x, float* y);
  // The implementation oneDNN picked, e.g. "jit:avx512_core".
  std::string impl_name() const;
  static std::string version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bench
