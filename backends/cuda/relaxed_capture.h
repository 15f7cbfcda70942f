/* SPDX-License-Identifier: Apache-2.0 */
// One-time setup that is not stream work (creating the workspace pool, opting a kernel into
// clusters of 16) can fall inside the caller's graph capture: the library's first split-row call
// may be the one being captured. In the default (global) capture mode the runtime refuses such
// calls and invalidates the capture (on the H200, a capture whose first split-row call created
// the pool ended in cudaErrorStreamCaptureInvalidated). This thread's capture mode is relaxed
// for the scope of the setup and restored after, as cudaThreadExchangeStreamCaptureMode allows.
#pragma once

#include <cuda_runtime.h>

namespace softmax_internal {

class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;  // the caller's while in scope
};

}  // namespace softmax_internal
