// SPDX-License-Identifier: Apache-2.0
// The dropout-backward kernel family. The layout is x's type (x and dx); dy may be stored as any
// type. f32 and 16-bit x get the full set of shapes; anything with f64 the generic kernels.
#include "backends/cuda/launch_ops.h"

namespace softmax_internal {
namespace {

using namespace cuda_kernels;

template <class T, class A>
struct Launches {
  const DropoutBackwardArgs& a;
  const LaunchEnv& env;
  static constexpr int V = kChunkElems<T>;
  static constexpr const char* kName = "softmax dropout backward kernel launch";
  // 16-bit rows move in pieces where every row of x, dy and dx starts on a 4-byte boundary and not
  // every one on a 16-byte boundary, as in the forward (forward_launch.cuh): on the H200 bf16 rows
  // of 1500, 2050, 4100 and 12500 columns +10-15%, 4096 columns two elements off +20%, segments
  // of 250 columns +3%, 8196 columns unchanged (the block kernel held to the realigning one's
  // registers: kDropoutBackwardMaxRegisters).
  static constexpr bool kPiecesForm = Elem<T>::kBytes == 2 && !kGeneric<T>;
  bool rows_in_pieces() const {
    const uintptr_t x = reinterpret_cast<uintptr_t>(a.x), dx = reinterpret_cast<uintptr_t>(a.dx),
                    dy = dtype_bytes(a.dy_dtype) == 2 ? reinterpret_cast<uintptr_t>(a.dy) : 0;
    if (a.cols % 2 != 0 || x % 4 != 0 || dx % 4 != 0 || dy % 4 != 0) return false;
    return a.cols % V != 0 || x % 16 != 0 || dx % 16 != 0 || dy % 16 != 0;
  }
  template <int K, int R>
  Outcome segment(const Plan& plan) const {
    if constexpr (kPiecesForm) {
      if (rows_in_pieces()) {
        return launch_register(register_rows_dropout_backward<T, A, K, R, false, true>, a, a.rows, a.cols, plan, env,
                               kName, Looping::WhenAlone, kDropoutOrBackwardWaves<T>);
      }
    }
    return launch_register(register_rows_dropout_backward<T, A, K, R, false>, a, a.rows, a.cols, plan, env, kName,
                           Looping::WhenAlone, kDropoutOrBackwardWaves<T>);
  }
  template <int K>
  Outcome block(const Plan& plan) const {
    if constexpr (kPiecesForm) {
      if (rows_in_pieces()) {
        return launch_register(register_rows_dropout_backward<T, A, K, 1, true, true>, a, a.rows, a.cols, plan, env,
                               kName, Looping::WhenAlone, SegmentWaves::Few, kRealignInStage16<T>);
      }
    }
    return launch_register(register_rows_dropout_backward<T, A, K, 1, true>, a, a.rows, a.cols, plan, env, kName,
                           Looping::WhenAlone, SegmentWaves::Few, kRealignInStage16<T>);
  }
  Outcome split() const {
    const int64_t bytes_per_col = dtype_bytes(a.x_dtype) + dtype_bytes(a.dy_dtype);
    return launch_split<Weighted<A, 2>>(split_rows_dropout_backward<T, A>, a, a.rows, a.cols, V,
                                        kSplitThreads * (kSplitK / 2), bytes_per_col, SplitWork::Both, env, kName);
  }
};

template <class T, class A, bool kFull>
Outcome launch_family(const DropoutBackwardArgs& a, const LaunchEnv& env) {
  // Its split rows run in waves: clusters of up to eight blocks. The speed paths (f32 and 16-bit)
  // run rows of blocks that would be alone on their SM as clusters of small blocks.
  constexpr SmallBlockClusters kSmall = kFull ? SmallBlockClusters::LoneBlocks : SmallBlockClusters::None;
  return launch_plan_of<kChunkElems<T>, 2, kFull, true, false, max_chunks(kChunkElems<T>, 2), 8, kSmall, 0,
                        false, false>(a.cols, Launches<T, A>{a, env}, env);
}

}  // namespace

Outcome launch_dropout_backward(const DropoutBackwardArgs& a, const LaunchEnv& env) {
  if (a.x_dtype == SOFTMAX_DTYPE_F64 || a.dy_dtype == SOFTMAX_DTYPE_F64) return launch_family<AnyDtype, double, false>(a, env);
  switch (a.x_dtype) {
    case SOFTMAX_DTYPE_F32: return launch_family<float, float, true>(a, env);
    case SOFTMAX_DTYPE_F16: return launch_family<__half, float, true>(a, env);
    default: return launch_family<__nv_bfloat16, float, true>(a, env);
  }
}

}  // namespace softmax_internal
