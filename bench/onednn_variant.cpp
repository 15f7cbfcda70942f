// SPDX-License-Identifier: Apache-2.0
// oneDNN softmax primitive wrapper. Debian bookworm ships oneDNN 2.6 (operation descriptor API);
// oneDNN 3 folded the descriptor into the primitive descriptor, hence the two spellings.
#include "onednn_variant.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace bench {

struct OneDnnSoftmax::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc md;
  dnnl::softmax_forward::primitive_desc pd;
  dnnl::softmax_forward prim;
};

OneDnnSoftmax::OneDnnSoftmax(int64_t rows, int64_t cols) : impl_(new Impl) {
  using dnnl::memory;
  impl_->md = memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
#if DNNL_VERSION_MAJOR >= 3
  impl_->pd = dnnl::softmax_forward::primitive_desc(impl_->engine, dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::softmax_accurate, impl_->md,
                                                    impl_->md, 1);
#else
  const dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, impl_->md, 1);
  impl_->pd = dnnl::softmax_forward::primitive_desc(d, impl_->engine);
#endif
  impl_->prim = dnnl::softmax_forward(impl_->pd);
}

OneDnnSoftmax::~OneDnnSoftmax() = default;

void OneDnnSoftmax::run(const float* x, float* y) {
  dnnl::memory src(impl_->md, impl_->engine, const_cast<float*>(x));
  dnnl::memory dst(impl_->md, impl_->engine, y);
  impl_->prim.execute(impl_->stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  impl_->stream.wait();
}

std::string OneDnnSoftmax::impl_name() const { return impl_->pd.impl_info_str(); }

std::string OneDnnSoftmax::version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace bench
