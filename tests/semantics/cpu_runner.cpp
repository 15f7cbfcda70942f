// SPDX-License-Identifier: Apache-2.0
// The CPU backend's runner: host buffers with the requested misalignment.
#include <cstring>

#include "backend_runner.h"

namespace softmax_semantics {

namespace {

class CpuRunner final : public Runner {
 public:
  const char* name() const override { return "cpu"; }
  std::string unavailable() const override { return ""; }

  Result run(const Call& c) const override {
    const Buffer& x = *c.x;
    const size_t n = size_t(c.rows) * size_t(c.cols);
    const size_t xs = softmax_test::element_size(x.dtype), ys = softmax_test::element_size(c.y_dtype);
    Buffer xbuf(x.dtype, n + c.x_offset);
    Buffer ybuf(c.y_dtype, n + c.y_offset);
    ybuf.poison();
    std::memcpy(static_cast<unsigned char*>(xbuf.data()) + c.x_offset * xs, x.data(), n * xs);
    const void* xp = static_cast<unsigned char*>(xbuf.data()) + c.x_offset * xs;
    void* yp = static_cast<unsigned char*>(ybuf.data()) + c.y_offset * ys;
    if (c.in_place) yp = const_cast<void*>(xp);
    std::vector<uint8_t> mask(c.dropout && c.drop.want_mask ? n : 0, 0xAB);

    const softmax_options o = call_options(c, SOFTMAX_BACKEND_CPU);
    Result r;
    r.status = c.dropout ? softmax_dropout(xp, yp, mask.empty() ? nullptr : mask.data(), c.rows, c.cols,
                                           x.dtype, c.drop.p, c.drop.seed, c.drop.offset, &o)
                         : softmax_rows(xp, yp, c.rows, c.cols, x.dtype, &o);
    if (r.status != SOFTMAX_STATUS_SUCCESS) r.message = softmax_last_error();
    r.y = Buffer(c.y_dtype, n);
    std::memcpy(r.y.data(), yp, n * ys);
    r.mask = std::move(mask);
    return r;
  }
};

}  // namespace

const Runner& cpu_runner() {
  static const CpuRunner runner;
  return runner;
}

}  // namespace softmax_semantics
