// Keep bytes for a run of flat elements: one Philox4x32-10 evaluation (two when offset % 4 != 0)
// per group of 4 elements, through dropout_keep4 so there is exactly one definition of the bits.
#include "backends/cpu/dropout_keep_bytes.h"

#include "backends/common/philox.h"

namespace softmax_internal {
namespace cpu {

void dropout_keep_bytes(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n,
                        uint8_t* keep) {
  if (n <= 0) return;
  const uint64_t end = first + static_cast<uint64_t>(n);
  uint64_t i = first;
  // A leading partial group.
  if (i % 4 != 0) {
    const unsigned bits = dropout_keep4(seed, offset, i / 4, p);
    for (; i % 4 != 0 && i < end; ++i) keep[i - first] = (bits >> (i % 4)) & 1u;
  }
  for (; i + 4 <= end; i += 4) {
    const unsigned bits = dropout_keep4(seed, offset, i / 4, p);
    uint8_t* k = keep + (i - first);
    k[0] = bits & 1u;
    k[1] = (bits >> 1) & 1u;
    k[2] = (bits >> 2) & 1u;
    k[3] = (bits >> 3) & 1u;
  }
  if (i < end) {
    const unsigned bits = dropout_keep4(seed, offset, i / 4, p);
    for (; i < end; ++i) keep[i - first] = (bits >> (i % 4)) & 1u;
  }
}

}  // namespace cpu
}  // namespace softmax_internal
