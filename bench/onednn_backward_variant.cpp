// SPDX-License-Identifier: Apache-2.0
// oneDNN softmax backward primitive wrapper. oneDNN 2.6 (Debian bookworm) has the algorithm
// (accurate or log) only on its softmax_v2 primitives, whose descriptors are separate objects;
// oneDNN 3 folded the v2 primitives into softmax_* and the descriptor into the primitive
// descriptor, hence the two spellings. The forward primitive descriptor is only the hint that
// oneDNN's backward requires.
#include "onednn_backward_variant.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace bench {

namespace {

#if DNNL_VERSION_MAJOR >= 3
using ForwardPrimitive = dnnl::softmax_forward;
using BackwardPrimitive = dnnl::softmax_backward;
#else
using ForwardPrimitive = dnnl::softmax_v2_forward;
using BackwardPrimitive = dnnl::softmax_v2_backward;
#endif

}  // namespace

struct OneDnnSoftmaxBackward::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc md;
  BackwardPrimitive::primitive_desc pd;
  BackwardPrimitive prim;
};

OneDnnSoftmaxBackward::OneDnnSoftmaxBackward(int64_t rows, int64_t cols, bool log) : impl_(new Impl) {
  using dnnl::memory;
  const dnnl::algorithm alg = log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  const memory::desc& md = impl_->md = memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
#if DNNL_VERSION_MAJOR >= 3
  const ForwardPrimitive::primitive_desc hint(impl_->engine, dnnl::prop_kind::forward_training, alg, md, md, 1);
  impl_->pd = BackwardPrimitive::primitive_desc(impl_->engine, alg, md, md, md, 1, hint);
#else
  const ForwardPrimitive::primitive_desc hint(
      ForwardPrimitive::desc(dnnl::prop_kind::forward_training, alg, md, md, 1), impl_->engine);
  impl_->pd = BackwardPrimitive::primitive_desc(BackwardPrimitive::desc(alg, md, md, md, 1), impl_->engine, hint);
#endif
  impl_->prim = BackwardPrimitive(impl_->pd);
}

OneDnnSoftmaxBackward::~OneDnnSoftmaxBackward() = default;

void OneDnnSoftmaxBackward::run(const float* y, const float* dy, float* dx) {
  dnnl::memory dst(impl_->md, impl_->engine, const_cast<float*>(y));
  dnnl::memory diff_dst(impl_->md, impl_->engine, const_cast<float*>(dy));
  dnnl::memory diff_src(impl_->md, impl_->engine, dx);
  impl_->prim.execute(impl_->stream,
                      {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
  impl_->stream.wait();
}

std::string OneDnnSoftmaxBackward::impl_name() const { return impl_->pd.impl_info_str(); }

}  // namespace bench
